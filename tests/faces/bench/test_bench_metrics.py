import math

import pytest

from indexing.errors import BenchmarkError
from pmd_site.bench.quality import evaluate, mrr_at, ndcg_at, percentile, recall_at


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


def test_doc_ids_follow_eval_py_file_name_without_folder_or_extension():
    from pmd_site.bench.quality import doc_id_of

    assert doc_id_of("vol-03/notebook-0123.md") == "notebook-0123"
    assert doc_id_of("docs/4983.md") == "4983"
    assert doc_id_of("plain") == "plain"
    assert doc_id_of("a\\b\\c.md") == "c"


def test_split_odd_and_even_are_1_based_positions_that_partition_the_queries():
    from pmd_site.bench.quality import split_queries

    queries = [(f"q{i}", f"text {i}") for i in range(1, 8)]
    odd, even = split_queries(queries, "odd"), split_queries(queries, "even")
    assert [q for q, _ in odd] == ["q1", "q3", "q5", "q7"]
    assert [q for q, _ in even] == ["q2", "q4", "q6"]
    assert sorted(odd + even) == sorted(queries) and split_queries(queries, "all") == queries
    with pytest.raises(BenchmarkError):
        split_queries(queries, "third")
