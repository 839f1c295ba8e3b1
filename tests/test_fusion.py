"""RRF and position-aware blending on constructed lists."""

import pytest

from search.pipeline.fusion import (
    ORIGINAL_WEIGHT,
    RRF_K,
    RankedList,
    blend,
    reciprocal_rank_fusion,
    retrieval_weight,
    top_rank_bonus,
)


def test_contribution_is_weight_over_k_plus_rank():
    fused = reciprocal_rank_fusion([RankedList("a", ["x", "y"], weight=1.0)], limit=None)
    by_key = {c.key: c for c in fused}
    assert by_key["x"].rrf == pytest.approx(1 / 61)
    assert by_key["y"].rrf == pytest.approx(1 / 62)
    assert by_key["x"].hits["a"].rank == 1 and by_key["y"].hits["a"].rank == 2


def test_original_query_lists_weigh_twice():
    lists = [
        RankedList("original/keyword", ["o"], weight=ORIGINAL_WEIGHT),
        RankedList("lex 1/keyword", ["v"], weight=1.0),
    ]
    by_key = {c.key: c for c in reciprocal_rank_fusion(lists)}
    assert by_key["o"].rrf == pytest.approx(2 / (RRF_K + 1))
    assert by_key["v"].rrf == pytest.approx(1 / (RRF_K + 1))
    assert [c.key for c in reciprocal_rank_fusion(lists)] == ["o", "v"]


def test_agreement_between_lists_beats_a_single_first_place():
    lists = [
        RankedList("k", ["solo", "both"]),
        RankedList("v", ["other", "both"]),
    ]
    fused = reciprocal_rank_fusion(lists)
    # both: 2/62 = 0.0323 + 0.02 bonus; solo: 1/61 = 0.0164 + 0.05 bonus
    by_key = {c.key: c for c in fused}
    assert by_key["both"].rrf == pytest.approx(2 / 62)
    assert by_key["solo"].fused == pytest.approx(1 / 61 + 0.05)
    assert by_key["both"].fused == pytest.approx(2 / 62 + 0.02)


def test_top_rank_bonus_counts_once_for_the_best_rank():
    assert top_rank_bonus(1) == 0.05
    assert top_rank_bonus(2) == top_rank_bonus(3) == 0.02
    assert top_rank_bonus(4) == 0.0
    lists = [RankedList("a", ["x"]), RankedList("b", ["x"]), RankedList("c", ["y", "z", "w", "q"])]
    by_key = {c.key: c for c in reciprocal_rank_fusion(lists)}
    assert by_key["x"].bonus == 0.05  # #1 twice is still one bonus
    assert by_key["y"].bonus == 0.05
    assert by_key["z"].bonus == by_key["w"].bonus == 0.02
    assert by_key["q"].bonus == 0.0


def test_repeated_key_in_one_list_counts_only_its_best_rank():
    fused = reciprocal_rank_fusion([RankedList("a", ["x", "x", "y"])], limit=None)
    by_key = {c.key: c for c in fused}
    assert by_key["x"].rrf == pytest.approx(1 / 61)
    assert by_key["y"].hits["a"].rank == 2


def test_candidate_limit_keeps_the_best():
    lists = [RankedList("a", [f"d{i}" for i in range(100)])]
    fused = reciprocal_rank_fusion(lists, limit=40)
    assert len(fused) == 40
    assert fused[0].key == "d0" and fused[-1].key == "d39"
    assert len(reciprocal_rank_fusion(lists, limit=None)) == 100


def test_scores_are_kept_for_explain():
    fused = reciprocal_rank_fusion([RankedList("kw", ["x", "y"], scores=[7.5, 3.0])])
    assert fused[1].hits["kw"].as_dict() == {"rank": 2, "score": 3.0, "rrf": round(1 / 62, 6)}


def test_ties_are_broken_deterministically_by_first_appearance():
    lists = [RankedList("a", ["p", "q"]), RankedList("b", ["q", "p"])]
    assert [c.key for c in reciprocal_rank_fusion(lists)] == ["p", "q"]


def test_retrieval_weight_by_position():
    assert [retrieval_weight(r) for r in (1, 3, 4, 10, 11, 40)] == [0.75, 0.75, 0.6, 0.6, 0.4, 0.4]


def test_blend_mixes_by_rrf_position():
    keys = [f"d{i}" for i in range(1, 13)]
    fused = reciprocal_rank_fusion([RankedList("a", keys)], limit=None)
    top = fused[0].fused
    rerank = {k: 0.5 for k in keys}
    out = {b.candidate.key: b for b in blend(fused, rerank)}
    assert out["d1"].weight == 0.75
    assert out["d1"].final == pytest.approx(0.75 * 1.0 + 0.25 * 0.5)
    assert out["d5"].weight == 0.60
    assert out["d5"].final == pytest.approx(0.6 * fused[4].fused / top + 0.4 * 0.5)
    assert out["d12"].weight == 0.40
    assert out["d12"].final == pytest.approx(0.4 * fused[11].fused / top + 0.6 * 0.5)


def test_reranker_can_lift_a_deep_candidate_but_barely_moves_the_top():
    keys = [f"d{i}" for i in range(1, 16)]
    fused = reciprocal_rank_fusion([RankedList("a", keys), RankedList("b", keys)], limit=None)
    rerank = {k: 0.0 for k in keys}
    rerank["d15"] = 1.0
    order = [b.candidate.key for b in blend(fused, rerank)]
    assert order[0] == "d1"  # 75 % retrieval keeps the agreed #1 on top
    assert order.index("d15") < order.index("d4")  # 60 % reranker lifts the deep one


def test_blend_without_reranker_keeps_rrf_order_and_normalises():
    fused = reciprocal_rank_fusion([RankedList("a", ["x", "y", "z"])])
    out = blend(fused, None)
    assert [b.candidate.key for b in out] == ["x", "y", "z"]
    assert out[0].final == 1.0 and all(b.weight is None and b.rerank is None for b in out)
    assert out[1].final == pytest.approx(fused[1].fused / fused[0].fused)


def test_unjudged_candidates_keep_their_retrieval_score():
    fused = reciprocal_rank_fusion([RankedList("a", ["x", "y"])])
    out = {b.candidate.key: b for b in blend(fused, {"x": 0.0})}
    assert out["y"].final == pytest.approx(out["y"].retrieval)
    assert out["x"].final == pytest.approx(0.75 * 1.0)


def test_blend_clamps_rerank_scores_and_handles_empty():
    assert blend([], {"x": 1.0}) == []
    fused = reciprocal_rank_fusion([RankedList("a", ["x"])])
    assert blend(fused, {"x": 7.0})[0].final == pytest.approx(1.0)
