import math

import pytest

from search.bench.quality import evaluate, mrr_at, ndcg_at, percentile, recall_at


def test_ndcg_hand_worked_graded():
    grades = {"a": 3, "b": 1, "c": 2}
    ranked = ["b", "x", "a"]
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    idcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranked, grades) == pytest.approx(dcg / idcg)


def test_perfect_run_scores_one():
    grades = {"a": 2, "b": 1}
    assert ndcg_at(["a", "b"], grades) == pytest.approx(1.0)
    assert recall_at(["a", "b"], grades, 10) == 1.0
    assert mrr_at(["a", "b"], grades) == 1.0


def test_recall_and_mrr_cutoffs():
    grades = {"a": 1, "b": 1}
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert recall_at(ranked, grades, 10) == 0.0
    assert recall_at(ranked, grades, 100) == 0.5
    assert mrr_at(ranked, grades) == 0.0
    assert mrr_at(["x", "x2", "b"], grades) == pytest.approx(1 / 3)


def test_evaluate_counts_missing_queries_as_zero_and_skips_unjudged():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    metrics = evaluate({"q1": ["a"]}, qrels)
    assert metrics["nDCG@10"] == pytest.approx(0.5)
    assert metrics["MRR@10"] == pytest.approx(0.5)


def test_percentile_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile([], 50) == 0.0
