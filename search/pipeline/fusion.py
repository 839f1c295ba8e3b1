"""Query-adaptive score fusion and position-aware blending: the arithmetic of `pmd query`.

Hybrid search asks a keyword and a vector retriever (and, with expansion, model-written
variants of the query) and gets ranked lists whose scores live on different scales
(BM25 is unbounded, cosine is not). pmd fuses the *scores*, not only the ranks, and
weighs the two kinds of evidence per query by how much signal each list carries:

1. **z-scores per list.** Each list's scores (keyword: best-passage BM25; vector: best
   chunk's cosine) are standardised over its top `FUSION_DEPTH` hits,
   z = (s − mean)/sd (score normalisation for CombSUM: Montague & Aslam, CIKM 2001;
   Fox & Shaw, TREC-2 1994). A document a list did not return gets that list's lowest z.
   Unlike Reciprocal Rank Fusion, a keyword #1 far ahead of its #2 keeps its lead.
2. **Within a kind** (keyword lists, vector lists) the lists' z are averaged with the list
   weights: the user's own query 2, a model-written variant 1 (a variant is a guess and can
   drift off topic). With no variants this is just the query's own list.
3. **Across kinds** a per-query weight from a query-performance predictor: Normalised Query
   Commitment (Shtok, Kurland & Carmel, "Predicting query performance by query-drift
   estimation", ACM TOIS 30(2), 2012), NQC = sd(top-10 scores) / |mean(top-100 scores)|,
   computed on each kind's own list for the query (the variants' mean when the query has
   none of that kind). A list whose top stands out from its bulk is committed to an answer:
       w_v = σ(β·(NQC_V − NQC_K) + γ),   w_k = 1 − w_v,   fused = w_k·Z_K + w_v·Z_V
   The mean is measured from what a list scores by chance: 0 for BM25 (a document without
   the query's words), and for cosines the index's chance cosine (the median cosine of two
   unrelated passages, search.retrieval.vector.chance_cosine): about 0.1-0.2 for
   all-MiniLM-L6-v2, 0.82 for multilingual-e5-small, whose cosines all sit in a narrow band
   near 0.9, so that NQC on raw cosines (≈0.015 against ≈0.75 for keyword) gave a strong
   vector list a third of the say. Above chance the mean is held to at least
   NQC_CHANCE_FLOOR of the room left (1 − chance), so a list at chance level cannot claim an
   unbounded commitment.
   β = 1, γ = 0.5 (a slight vector tilt), fitted on the odd-numbered queries of tldr-multi
   (MiniLM and multilingual-e5-small), SciFact, Cranfield and scifact-long jointly; one set for
   every collection. This is the no-LLM
   analogue of dynamic alpha tuning (Hsu & Tzeng 2025, who ask an LLM to grade each
   retriever's top hit).
4. **Short and degenerate lists.** A kind with no hits gets weight 0 (fused = the other
   kind's order). A list shorter than the depth asked for is complete: the documents the
   other lists found and it lacks score 0 in it (BM25's "no query word"), and those zeros
   join its z statistics up to the depth, so a lone keyword hit stands far above the rest
   (NQC stays on the list as retrieved). A list still without spread (one document in all, or
   all scores equal) has no z: its hits get +1, the documents it lacks 0. A list of one hit
   has no measurable NQC: a kind with no measurable list takes the other kind's NQC (the
   neutral prior w_v = σ(γ)).
   A keyword hit's z is capped at KEYWORD_Z_CAP (4 sd). BM25 is heavy-tailed where cosine is
   not: a passage that holds one rare query word can stand 5-10 sd above the list while the
   best cosine rarely passes 3, so one partial match would outvote any vector evidence
   (`how to change who owns a file`: chmod far ahead of chown on "change … file"). Capped, a
   keyword #1 still leads its list; a clear keyword answer is pinned first by the strong-signal
   rule in hybrid, not by its z.

5. **A retriever with nothing to say.** An embedding model trained on English text only
   (all-MiniLM-L6-v2) returns noise for a Chinese or Japanese query, and little for a German
   one, yet its list has a spread like any other and NQC gives it a say. The query's language
   (indexing.language.query_language) against the model's languages scales the vector weight
   by `vector_trust`: NON_LATIN_TRUST for another script (raised by the share of the query's
   letters in Latin script, which the model can read), FOREIGN_LATIN_TRUST for another
   Latin-script language; an English query, a multilingual model, or a query whose words do
   not tell its language keeps the weights above.

Blending then mixes the retrieval score with a re-ranker's confidence, by fusion rank:
near the top retrieval is strong evidence and the re-ranker only nudges (75/25); deeper
down the re-ranker decides more (60/40 for ranks 4-10, 40/60 below).

The retrieval score (0..1, what `pmd query` shows without a re-ranker) is anchored on
absolute evidence so that it reads the same across queries: the top document scores its
own evidence, w_k·keyword + w_v·vector (the shown keyword score — the share of the query
its best passage holds — and its cosine, 0 where a kind did not find it); every other
document scores that times its place on the fused scale between the top (1) and the
lowest fused score (0). A weak best match therefore reads weak, and the order is the
fusion order.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

KEYWORD, VECTOR = "keyword", "vector"
KINDS = (KEYWORD, VECTOR)
FUSION_DEPTH = 100  # hits per list the statistics are taken over (fetched whatever -n is)
NQC_TOP = 10
NQC_BETA = 1.0
NQC_CHANCE_FLOOR = 0.07  # share of (1 − chance) below which the mean above chance is not taken
NQC_GAMMA = 0.5
ORIGINAL_WEIGHT = 2.0
VARIANT_WEIGHT = 1.0
DEGENERATE_Z = 1.0  # a hit of a list without spread: one sd above an average hit
DEFAULT_CANDIDATE_LIMIT = 40
KEYWORD_Z_CAP = 4.0  # sd; fitted on odd queries of tldr-multi, SciFact, Cranfield and scifact-long
NON_LATIN_TRUST = 0.0  # English-only model, query in another script (Han, kana, Cyrillic…)
FOREIGN_LATIN_TRUST = 0.75  # English-only model, query in another Latin-script language


@dataclass
class RankedList:
    """One retriever's answer to one phrasing: keys in rank order (best first)."""

    name: str  # e.g. "original/keyword", "lex 1/keyword", "hyde/vector"
    keys: list[str]
    scores: list[float] = field(default_factory=list)  # shown scores 0..1 (keyword share, cosine)
    weight: float = VARIANT_WEIGHT
    kind: str = ""  # KEYWORD or VECTOR; by default the name's suffix
    values: list[float] = field(default_factory=list)  # what is standardised (raw BM25, cosine); default scores
    chance: float | None = None  # a cosine list: what unrelated texts score (None: a score with 0 at chance, BM25)

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = VECTOR if self.name.endswith(VECTOR) else KEYWORD
        if not self.values:
            self.values = list(self.scores)


@dataclass
class ListHit:
    rank: int  # 1-based rank in that list
    score: float | None  # the shown score in that list
    value: float | None  # the standardised input (raw BM25, cosine)
    z: float = 0.0

    def as_dict(self) -> dict:
        return {"rank": self.rank, "score": self.score, "value": self.value, "z": round(self.z, 4)}


@dataclass
class Candidate:
    key: str
    fused: float = 0.0  # w_k·Z_K + w_v·Z_V
    kind_z: dict[str, float] = field(default_factory=dict)  # kind → within-kind z (missing: the floor)
    evidence: dict[str, float] = field(default_factory=dict)  # kind → best shown score (0 if not found)
    best_rank: int = 0  # best rank in any list
    hits: dict[str, ListHit] = field(default_factory=dict)  # list name → hit
    order: int = 0  # first appearance, the last tie-breaker (deterministic output)
    pinned: bool = False  # first by the strong keyword signal


@dataclass
class Fusion:
    """Fused candidates (best first) and the per-query facts --explain shows."""

    candidates: list[Candidate]
    weights: dict[str, float]  # kind → w
    nqc: dict[str, float | None]  # kind → NQC (None: no list of that kind)
    top_evidence: float = 0.0  # w_k·keyword + w_v·vector of the #1: its retrieval score
    floor: float = 0.0  # the lowest fused score (retrieval 0)
    trust: float = 1.0  # vector_trust of the query

    def retrieval(self, candidate: Candidate) -> float:
        """The 0..1 retrieval score: the #1's evidence, scaled by place on the fused scale."""
        if not self.candidates:
            return 0.0
        top = self.candidates[0].fused
        span = top - self.floor
        place = 1.0 if span <= 1e-12 else (candidate.fused - self.floor) / span
        return max(0.0, min(1.0, self.top_evidence * max(0.0, min(1.0, place))))

    def explain(self) -> dict:
        return {
            "w_keyword": round(self.weights.get(KEYWORD, 0.0), 4),
            "w_vector": round(self.weights.get(VECTOR, 0.0), 4),
            "nqc": {k: None if v is None else round(v, 4) for k, v in self.nqc.items()},
            "vector_trust": round(self.trust, 4),
            "top_evidence": round(self.top_evidence, 4),
        }


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def nqc(values: list[float], top: int = NQC_TOP, *, chance: float | None = None) -> float:
    """Normalised Query Commitment (Shtok et al., TOIS 2012): sd of the top `top` scores over
    |mean| of the list (the list stands in for the corpus score). 0 without two hits.
    `chance` (cosine lists): the mean is taken above that cosine, and at least
    NQC_CHANCE_FLOOR·(1 − chance), so cosines of every model are read on BM25's footing."""
    head = values[:top]
    if len(head) < 2:
        return 0.0
    if chance is None:
        mean = abs(statistics.fmean(values))
    else:
        mean = max(statistics.fmean(values) - chance, NQC_CHANCE_FLOOR * (1.0 - chance))
    return statistics.pstdev(head) / mean if mean > 1e-12 else 0.0


def vector_trust(query_language: str | None, *, english_only_model: bool, latin_share: float = 0.0) -> float:
    """How far the vector list can be believed for this query (1: fully), from the query's
    language and whether the embedding model knows only English (see 5. above). A query in
    another script keeps the say of its Latin-script words (`latin_share` of its letters:
    `如何切换 Node.js 版本` is partly readable to an English model)."""
    if not english_only_model or query_language in (None, "en"):
        return 1.0
    latin = query_language not in ("zh", "ja", "ko", "ru", "el", "ar", "hy", "hi", "ta", "yi")
    if latin:
        return FOREIGN_LATIN_TRUST
    return NON_LATIN_TRUST + (1.0 - NON_LATIN_TRUST) * max(0.0, min(1.0, latin_share))


def adaptive_weights(nqc_by_kind: dict[str, float | None], trust: float = 1.0) -> dict[str, float]:
    """w_v = trust·σ(β·(NQC_V − NQC_K) + γ); a kind without lists gets 0."""
    k, v = nqc_by_kind.get(KEYWORD), nqc_by_kind.get(VECTOR)
    if k is None and v is None:
        return {KEYWORD: 0.0, VECTOR: 0.0}
    if k is None:
        return {KEYWORD: 0.0, VECTOR: 1.0}
    if v is None:
        return {KEYWORD: 1.0, VECTOR: 0.0}
    w_v = trust * sigmoid(NQC_BETA * (v - k) + NQC_GAMMA)
    return {KEYWORD: 1.0 - w_v, VECTOR: w_v}


@dataclass
class _Standardised:
    z: dict[str, float]  # key → z of its best hit in the list
    floor: float  # z given to documents the list lacks
    nqc: float | None  # None: fewer than two hits, commitment not measurable


def _standardise(ranked: RankedList, depth: int, others: set[str]) -> tuple[_Standardised, dict[str, ListHit]]:
    hits: dict[str, ListHit] = {}
    values: list[float] = []
    rank = 0
    for position, key in enumerate(ranked.keys):
        if key in hits:  # several hits of one document in a list: only its best counts
            continue
        rank += 1
        value = ranked.values[position] if position < len(ranked.values) else None
        score = ranked.scores[position] if position < len(ranked.scores) else None
        if value is not None and not math.isfinite(value):  # NaN/inf would poison mean and spread
            value = None  # scored as the list's lowest, like a hit without a value
        hits[key] = ListHit(rank=rank, score=score, value=value)
        if value is not None:
            values.append(float(value))
    head = values[:depth]
    # A list that ended before the depth asked for is complete: a document it lacks scores 0
    # there (BM25 of a document holding no query word; vector: not embedded), and those
    # zeros belong to the list's distribution (up to the depth). One keyword hit among a
    # handful of documents is then far above the rest, not a list "without spread".
    absent = 0.0
    own_nqc = (
        nqc(head, chance=ranked.chance) if len(head) >= 2 else None
    )  # on the list as retrieved (Shtok et al.), before the zeros
    if len(hits) < depth and len(head) == len(hits):
        missing = len([k for k in others if k not in hits])
        head = head + [0.0] * min(missing, depth - len(head))
    sd = statistics.pstdev(head) if len(head) >= 2 else 0.0
    if sd <= 1e-12:
        for hit in hits.values():
            hit.z = DEGENERATE_Z
        return _Standardised({k: DEGENERATE_Z for k in hits}, 0.0, own_nqc), hits
    mean = statistics.fmean(head)
    cap = KEYWORD_Z_CAP if ranked.kind == KEYWORD else math.inf
    for hit in hits.values():
        hit.z = min(cap, ((hit.value if hit.value is not None else min(head)) - mean) / sd)
    if len(head) > len(values[:depth]):
        floor = (absent - mean) / sd
    else:
        floor = min((min(head) - mean) / sd, *(h.z for h in hits.values()))
    return _Standardised({k: h.z for k, h in hits.items()}, floor, own_nqc), hits


def fuse(
    lists: list[RankedList],
    *,
    limit: int | None = DEFAULT_CANDIDATE_LIMIT,
    depth: int = FUSION_DEPTH,
    pin: str | None = None,
    trust: float = 1.0,
) -> Fusion:
    """Fuse ranked lists into candidates ordered by the query-adaptive weighted z-score sum.

    `pin`: a document that goes first whatever fusion says (hybrid pins the keyword #1 when
    the strong-signal rule fires: keyword search alone was convincing); it takes the best
    fused score, so the retrieval scores stay in order. `trust`: `vector_trust` of the query."""
    candidates: dict[str, Candidate] = {}
    by_kind: dict[str, list[tuple[RankedList, _Standardised]]] = {kind: [] for kind in KINDS}
    universe = {key for ranked in lists for key in ranked.keys}
    for ranked in lists:
        standard, hits = _standardise(ranked, depth, universe)
        if not hits:
            continue
        by_kind.setdefault(ranked.kind, []).append((ranked, standard))
        for key, hit in hits.items():
            candidate = candidates.get(key)
            if candidate is None:
                candidate = candidates[key] = Candidate(key=key, best_rank=hit.rank, order=len(candidates))
            candidate.best_rank = min(candidate.best_rank, hit.rank)
            candidate.hits[ranked.name] = hit
            if hit.score is not None and math.isfinite(hit.score):
                shown = max(0.0, min(1.0, float(hit.score)))
                candidate.evidence[ranked.kind] = max(candidate.evidence.get(ranked.kind, 0.0), shown)

    # NQC per kind: the query's own list (the heaviest), else the variants' weighted mean
    # (lists of one hit have none: a kind with no measurable list takes the other kind's
    # NQC, i.e. the neutral prior w_v = σ(γ))
    nqc_by_kind: dict[str, float | None] = {}
    for kind in KINDS:
        members = [(r, s) for r, s in by_kind.get(kind) or [] if s.nqc is not None]
        if not members:
            nqc_by_kind[kind] = None
            continue
        heaviest = max(r.weight for r, _ in members)
        own = [(r, s) for r, s in members if r.weight == heaviest]
        total = sum(r.weight for r, _ in own)
        nqc_by_kind[kind] = sum(r.weight * s.nqc for r, s in own) / total
    present = {kind: bool(by_kind.get(kind)) for kind in KINDS}
    for kind, other in ((KEYWORD, VECTOR), (VECTOR, KEYWORD)):
        if present[kind] and nqc_by_kind[kind] is None:
            nqc_by_kind[kind] = nqc_by_kind[other] if nqc_by_kind[other] is not None else 0.0
    weights = adaptive_weights({kind: nqc_by_kind[kind] if present[kind] else None for kind in KINDS}, trust)

    for candidate in candidates.values():
        fused = 0.0
        for kind in KINDS:
            members = by_kind.get(kind) or []
            if not members:
                continue
            total = sum(r.weight for r, _ in members) or 1.0
            z = sum(r.weight * s.z.get(candidate.key, s.floor) for r, s in members) / total
            candidate.kind_z[kind] = z
            fused += weights[kind] * z
        candidate.fused = fused
    if pin in candidates and candidates:
        candidates[pin].fused = max(c.fused for c in candidates.values())
        candidates[pin].pinned = True
    ordered = sorted(candidates.values(), key=lambda c: (-c.fused, not c.pinned, c.best_rank, c.order))
    result = Fusion(candidates=ordered, weights=weights, nqc=nqc_by_kind, trust=trust)
    if ordered:
        top = ordered[0]
        result.top_evidence = sum(weights[kind] * top.evidence.get(kind, 0.0) for kind in KINDS)
        result.floor = ordered[-1].fused
    if limit is not None:
        result.candidates = ordered[: max(0, limit)]
    return result


def retrieval_weight(fusion_rank: int) -> float:
    """Share of the retrieval score in the blend for a candidate at this fusion rank (1-based)."""
    if fusion_rank <= 3:
        return 0.75
    if fusion_rank <= 10:
        return 0.60
    return 0.40


@dataclass
class Blended:
    candidate: Candidate
    fusion_rank: int
    retrieval: float  # Fusion.retrieval, 0..1
    rerank: float | None  # re-ranker confidence 0..1, None when not judged
    weight: float | None  # retrieval share used; None when there was nothing to blend
    final: float


def blend(fusion: Fusion, candidates: list[Candidate], rerank_scores: dict[str, float] | None = None) -> list[Blended]:
    """Mix retrieval and re-ranker scores by fusion position; order by the result.

    Candidates without a re-ranker score (no re-ranker, or it ran out of time) keep
    their retrieval score, so a partial re-ranking never pushes unjudged documents
    below judged ones merely for lack of a judgement.
    """
    rerank_scores = rerank_scores or {}
    blended = []
    for fusion_rank, candidate in enumerate(candidates, start=1):
        retrieval = fusion.retrieval(candidate)
        judged = rerank_scores.get(candidate.key)
        if judged is None:
            blended.append(Blended(candidate, fusion_rank, retrieval, None, None, retrieval))
            continue
        judged = min(1.0, max(0.0, float(judged)))
        weight = retrieval_weight(fusion_rank)
        final = weight * retrieval + (1.0 - weight) * judged
        blended.append(Blended(candidate, fusion_rank, retrieval, judged, weight, final))
    blended.sort(key=lambda b: (-b.final, b.fusion_rank))
    return blended
