"""Query-adaptive z-score fusion and position-aware blending on constructed lists."""

import math
import statistics

import pytest

from search.pipeline.fusion import (
    KEYWORD,
    KEYWORD_Z_CAP,
    NQC_BETA,
    NQC_CHANCE_FLOOR,
    NQC_GAMMA,
    ORIGINAL_WEIGHT,
    VECTOR,
    RankedList,
    adaptive_weights,
    blend,
    fuse,
    nqc,
    retrieval_weight,
    sigmoid,
)


def kw(keys, values, shown=None, name="original/keyword", weight=ORIGINAL_WEIGHT):
    return RankedList(
        name, list(keys), scores=list(shown or [0.5] * len(keys)), weight=weight, kind=KEYWORD, values=list(values)
    )


def vec(keys, values, name="original/vector", weight=ORIGINAL_WEIGHT):
    return RankedList(name, list(keys), scores=list(values), weight=weight, kind=VECTOR, values=list(values))


def z_of(values, x):
    return (x - statistics.fmean(values)) / statistics.pstdev(values)


def test_nqc_is_the_spread_of_the_top_over_the_mean():
    values = [10.0, 8.0, 5.0, 4.0, 3.0]
    assert nqc(values, top=3) == pytest.approx(statistics.pstdev([10, 8, 5]) / statistics.fmean(values))
    assert nqc([1.0]) == 0.0 and nqc([]) == 0.0
    assert nqc([2.0 * v for v in values]) == pytest.approx(nqc(values))  # scale-free


def test_nqc_of_cosines_is_measured_above_chance():
    """A model whose unrelated passages already score 0.82 (multilingual-e5-small) puts every
    list in a narrow band near 0.9: raw NQC reads it as uncommitted; above chance it reads like
    a list of cosines spread from 0 (all-MiniLM-L6-v2) with the same shape."""
    band = [0.90, 0.88, 0.87, 0.86] + [0.84] * 20
    wide = [0.1 + (v - 0.82) / 0.18 * 0.9 for v in band]  # the same list, chance 0.1, room 0.9
    assert nqc(band) < 0.05
    assert nqc(band, chance=0.82) == pytest.approx(statistics.pstdev(band[:10]) / (statistics.fmean(band) - 0.82))
    assert nqc(band, chance=0.82) == pytest.approx(nqc(wide, chance=0.1))
    assert nqc(band, chance=0.82) > 10 * nqc(band)
    assert nqc([2.0, 1.0], chance=None) == nqc([2.0, 1.0])  # BM25: 0 is chance already


def test_a_cosine_list_at_chance_level_has_a_bounded_commitment():
    at_chance = [0.83, 0.82, 0.81, 0.80, 0.80]
    floor = NQC_CHANCE_FLOOR * (1 - 0.82)
    assert nqc(at_chance, chance=0.82) == pytest.approx(statistics.pstdev(at_chance) / floor)
    assert math.isfinite(nqc([0.5, 0.5], chance=1.0))


def test_a_strong_cosine_band_gets_its_say_once_chance_is_known():
    keys = [f"d{i}" for i in range(30)]
    keyword = kw(keys[::-1], [12.0, 7.0, 6.5] + [6.0 - 0.1 * i for i in range(27)])
    cosines = [0.93, 0.88, 0.87] + [0.86 - 0.001 * i for i in range(27)]
    raw = fuse([keyword, vec(keys, cosines)])
    known = vec(keys, cosines)
    known.chance = 0.82
    above = fuse([keyword, known])
    assert above.nqc[VECTOR] > 5 * raw.nqc[VECTOR] and above.nqc[KEYWORD] == raw.nqc[KEYWORD]
    assert above.weights[VECTOR] > raw.weights[VECTOR] + 0.15
    # the keyword #1 (d29, a partial match) no longer outranks the vector list's #2
    assert [c.key for c in raw.candidates[:2]] == ["d0", "d29"]
    assert [c.key for c in above.candidates[:2]] == ["d0", "d1"]


def test_weights_follow_the_more_committed_list():
    w = adaptive_weights({KEYWORD: 0.1, VECTOR: 0.1})
    assert w[VECTOR] == pytest.approx(sigmoid(NQC_GAMMA)) and w[KEYWORD] == pytest.approx(1 - w[VECTOR])
    assert adaptive_weights({KEYWORD: 0.9, VECTOR: 0.1})[KEYWORD] > 0.5
    assert adaptive_weights({KEYWORD: 0.1, VECTOR: 0.5})[VECTOR] == pytest.approx(sigmoid(NQC_BETA * 0.4 + NQC_GAMMA))
    assert adaptive_weights({KEYWORD: None, VECTOR: 0.3}) == {KEYWORD: 0.0, VECTOR: 1.0}
    assert adaptive_weights({KEYWORD: 0.3, VECTOR: None}) == {KEYWORD: 1.0, VECTOR: 0.0}


def test_fused_score_is_the_weighted_sum_of_z_scores():
    kv, vv = [9.0, 5.0, 4.0, 1.0], [0.8, 0.7, 0.5, 0.45]
    fusion = fuse([kw("abcd", kv), vec("bcde", vv)], limit=None, depth=4)  # both lists cut at the depth
    w = adaptive_weights({KEYWORD: nqc(kv), VECTOR: nqc(vv)})
    assert fusion.weights == pytest.approx(w)
    by_key = {c.key: c for c in fusion.candidates}
    # a: keyword #1, missing from vector → vector's lowest z
    assert by_key["a"].fused == pytest.approx(w[KEYWORD] * z_of(kv, 9.0) + w[VECTOR] * z_of(vv, 0.45))
    # e: vector only → keyword's lowest z
    assert by_key["e"].fused == pytest.approx(w[KEYWORD] * z_of(kv, 1.0) + w[VECTOR] * z_of(vv, 0.45))
    assert by_key["b"].hits["original/keyword"].z == pytest.approx(z_of(kv, 5.0))
    assert [c.key for c in fusion.candidates] == sorted(by_key, key=lambda k: -by_key[k].fused)


def test_a_far_ahead_keyword_hit_keeps_its_lead():
    # RRF would tie "x" (keyword #1 only) with "y" (vector #1 only); scores do not.
    fusion = fuse(
        [kw(["x", "p", "q", "r"], [30.0, 3.0, 2.9, 2.8]), vec(["y", "p", "q", "r"], [0.62, 0.61, 0.60, 0.59])]
    )
    assert fusion.candidates[0].key == "x"


def test_an_empty_kind_leaves_the_other_lists_order():
    fusion = fuse([kw([], []), vec(["a", "b", "c"], [0.9, 0.5, 0.4])])
    assert fusion.weights == {KEYWORD: 0.0, VECTOR: 1.0}
    assert [c.key for c in fusion.candidates] == ["a", "b", "c"]
    fusion = fuse([kw(["c", "b", "a"], [3.0, 2.0, 1.0])])
    assert fusion.weights[KEYWORD] == 1.0 and [c.key for c in fusion.candidates] == ["c", "b", "a"]
    assert fuse([]).candidates == []


def test_a_short_list_is_complete_its_missing_documents_score_zero():
    # keyword found one document of the four: BM25 0 for the other three
    fusion = fuse([kw(["solo"], [4.0]), vec(["a", "b", "solo", "c"], [0.8, 0.7, 0.6, 0.5])], limit=None)
    by_key = {c.key: c for c in fusion.candidates}
    padded = [4.0, 0.0, 0.0, 0.0]
    assert by_key["solo"].kind_z[KEYWORD] == pytest.approx(z_of(padded, 4.0))
    assert by_key["a"].kind_z[KEYWORD] == pytest.approx(z_of(padded, 0.0))
    # NQC on the list as retrieved: one hit measures nothing, so the keyword side takes the
    # vector's NQC and the weights are the neutral prior
    assert fusion.nqc[KEYWORD] == pytest.approx(fusion.nqc[VECTOR])
    assert fusion.weights[VECTOR] == pytest.approx(sigmoid(NQC_GAMMA))
    assert all(math.isfinite(c.fused) for c in fusion.candidates)


def test_a_list_without_spread_still_counts():
    fusion = fuse([kw(["solo"], [4.0])])
    assert [c.key for c in fusion.candidates] == ["solo"] and fusion.candidates[0].kind_z[KEYWORD] == 1.0
    flat = fuse([vec(["a", "b"], [0.5, 0.5])])
    assert [c.key for c in flat.candidates] == ["a", "b"]  # ties: first appearance


def test_variants_average_within_their_kind_by_list_weight():
    own = kw("abc", [6.0, 3.0, 1.0])
    lex = kw("cba", [6.0, 3.0, 1.0], name="lex 1/keyword", weight=1.0)
    fusion = fuse([own, lex, vec("abc", [0.5, 0.4, 0.3])], limit=None, depth=3)
    by_key = {c.key: c for c in fusion.candidates}
    z = [z_of([6, 3, 1], x) for x in (6.0, 3.0, 1.0)]
    assert by_key["a"].kind_z[KEYWORD] == pytest.approx((2 * z[0] + 1 * z[2]) / 3)
    assert by_key["c"].kind_z[KEYWORD] == pytest.approx((2 * z[2] + 1 * z[0]) / 3)
    # NQC comes from the query's own list when there is one
    assert fusion.nqc[KEYWORD] == pytest.approx(nqc([6.0, 3.0, 1.0]))
    hyde_only = fuse([vec("ab", [0.7, 0.2], name="hyde/vector", weight=1.0), kw("ba", [5.0, 1.0])])
    assert hyde_only.nqc[VECTOR] == pytest.approx(nqc([0.7, 0.2]))


def test_repeated_key_in_one_list_counts_only_its_best_rank():
    fusion = fuse([kw(["x", "x", "y"], [5.0, 4.0, 1.0])], limit=None)
    assert [c.key for c in fusion.candidates] == ["x", "y"]
    assert fusion.candidates[0].hits["original/keyword"].rank == 1


def test_candidate_limit_keeps_the_best():
    keys = [f"d{i}" for i in range(100)]
    values = [100.0 - i for i in range(100)]
    assert [c.key for c in fuse([kw(keys, values)], limit=40).candidates] == keys[:40]
    assert len(fuse([kw(keys, values)], limit=None).candidates) == 100


def test_retrieval_score_is_the_top_evidence_scaled_by_place():
    # the #1 found by both kinds: its evidence is w_k·keyword share + w_v·cosine
    fusion = fuse([kw("abc", [8.0, 4.0, 1.0], shown=[0.4, 0.3, 0.1]), vec("acd", [0.5, 0.4, 0.3])], limit=None)
    top = fusion.candidates[0]
    assert top.key == "a"
    expected = fusion.weights[KEYWORD] * 0.4 + fusion.weights[VECTOR] * 0.5
    assert fusion.retrieval(top) == pytest.approx(expected) and expected < 0.5  # a weak match reads weak
    assert fusion.retrieval(fusion.candidates[-1]) == 0.0
    values = [fusion.retrieval(c) for c in fusion.candidates]
    assert values == sorted(values, reverse=True)


def test_a_strong_match_reads_high_and_the_top_is_not_always_one():
    strong = fuse([kw("ab", [9.0, 1.0], shown=[0.95, 0.2]), vec("ab", [0.82, 0.3])])
    assert 0.85 < strong.retrieval(strong.candidates[0]) < 1.0


def test_retrieval_weight_by_position():
    assert [retrieval_weight(r) for r in (1, 3, 4, 10, 11, 40)] == [0.75, 0.75, 0.6, 0.6, 0.4, 0.4]


def test_blend_mixes_by_fusion_position():
    keys = [f"d{i}" for i in range(1, 13)]
    fusion = fuse([kw(keys, [20.0 - i for i in range(12)], shown=[0.9] * 12)], limit=None)
    rerank = {k: 0.5 for k in keys}
    out = {b.candidate.key: b for b in blend(fusion, fusion.candidates, rerank)}
    r = {c.key: fusion.retrieval(c) for c in fusion.candidates}
    assert out["d1"].weight == 0.75 and out["d1"].final == pytest.approx(0.75 * r["d1"] + 0.25 * 0.5)
    assert out["d5"].final == pytest.approx(0.6 * r["d5"] + 0.4 * 0.5)
    assert out["d12"].final == pytest.approx(0.4 * r["d12"] + 0.6 * 0.5)


def test_reranker_can_lift_a_deep_candidate_but_barely_moves_the_top():
    keys = [f"d{i}" for i in range(1, 21)]
    fusion = fuse([kw(keys, [40.0 - i for i in range(20)], shown=[0.9] * 20)], limit=None)
    rerank = {k: 0.0 for k in keys}
    rerank["d15"] = 1.0
    order = [b.candidate.key for b in blend(fusion, fusion.candidates, rerank)]
    assert order.index("d15") < 14
    assert order[0] == "d1" or order[0] == "d15"


def test_blend_without_reranker_keeps_fusion_order():
    fusion = fuse([kw("xyz", [3.0, 2.0, 1.0], shown=[0.6, 0.5, 0.2])])
    out = blend(fusion, fusion.candidates, None)
    assert [b.candidate.key for b in out] == ["x", "y", "z"]
    assert out[0].final == pytest.approx(0.6) and out[0].weight is None


def test_unjudged_candidates_keep_their_retrieval_score():
    fusion = fuse([kw("xy", [2.0, 1.0], shown=[0.8, 0.7])])
    out = {b.candidate.key: b for b in blend(fusion, fusion.candidates, {"x": 0.0})}
    assert out["y"].rerank is None and out["y"].final == out["y"].retrieval
    assert out["x"].final == pytest.approx(0.75 * 0.8)


def test_blend_clamps_rerank_scores_and_handles_empty():
    assert blend(fuse([]), [], {"x": 1.0}) == []
    fusion = fuse([kw("x", [1.0], shown=[1.0])])
    assert blend(fusion, fusion.candidates, {"x": 7.0})[0].final == pytest.approx(1.0)


def test_a_pinned_document_goes_first_and_scores_stay_in_order():
    lists = [kw(["k", "a"], [5.0, 4.0], shown=[0.95, 0.5]), vec(["a", "b", "k"], [0.9, 0.5, 0.1])]
    assert fuse(lists).candidates[0].key == "a"
    fusion = fuse(lists, pin="k")
    assert fusion.candidates[0].key == "k" and fusion.candidates[0].pinned
    values = [fusion.retrieval(c) for c in fusion.candidates]
    assert values == sorted(values, reverse=True)


def test_non_finite_values_do_not_poison_the_fusion():
    nan = float("nan")
    fused = fuse([kw(["a", "b", "c"], [9.0, 5.0, 1.0]), vec(["x", "b", "y"], [0.9, nan, 0.2])])
    assert all(math.isfinite(c.fused) for c in fused.candidates)
    assert all(math.isfinite(z) for c in fused.candidates for z in c.kind_z.values())
    b = next(c for c in fused.candidates if c.key == "b")
    assert b.evidence.get(VECTOR, 0.0) < 1.0  # a NaN cosine is not a perfect match
    assert [c.key for c in fused.candidates][0] in {"a", "x"}


def test_keyword_hits_far_above_their_list_are_ordered_by_the_other_evidence():
    # BM25 is heavy-tailed: two pages matching the query's rare words stand 6-7 sd above a
    # list of 100 ("Mac clipboard copy": windows-clip 64, pbcopy 61). Both are capped at
    # KEYWORD_Z_CAP: keyword says "both", and the vector list, which prefers pbcopy, decides.
    others = [f"d{i}" for i in range(98)]
    keyword = kw(["clip", "pbcopy", *others], [64.0, 61.0, *[5.0 - 0.04 * i for i in range(98)]])
    vector = vec(["pbcopy", "clip", *others], [0.60, 0.50, *[0.48 - 0.003 * i for i in range(98)]])
    fusion = fuse([keyword, vector], limit=None)
    by_key = {c.key: c for c in fusion.candidates}
    assert by_key["clip"].kind_z[KEYWORD] == by_key["pbcopy"].kind_z[KEYWORD] == pytest.approx(KEYWORD_Z_CAP)
    assert [c.key for c in fusion.candidates[:2]] == ["pbcopy", "clip"]
    lone = fuse([vec(["top", *others], [0.9, *[0.1] * 98])])
    assert lone.candidates[0].kind_z[VECTOR] > KEYWORD_Z_CAP  # a vector z is not capped
    assert by_key["d0"].kind_z[KEYWORD] < KEYWORD_Z_CAP  # the rest of the list keeps its z
    # lists that agree keep their #1
    agreed = fuse([keyword, vec(["clip", "pbcopy", *others], [0.60, 0.50, *[0.48 - 0.003 * i for i in range(98)]])])
    assert agreed.candidates[0].key == "clip"
