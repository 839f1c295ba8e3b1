"""Reciprocal Rank Fusion and position-aware blending: the arithmetic of `pmd query`.

Hybrid search asks several retrievers several phrasings of one question and gets
ranked lists whose scores are not comparable (BM25 is unbounded, cosine is not).
RRF ignores the scores and adds ``weight / (k + rank)`` for every list a document
appears in, so a document that several lists agree on rises, and no single list
can dominate through its score scale.

* k = 60 (the value from the original RRF paper; it flattens the difference
  between rank 1 and rank 5 so agreement matters more than one list's order);
* lists produced by the user's own query weigh 2×, lists from model-written
  variants 1×: a variant is a guess and can drift off topic;
* a document ranked #1 in any list gets +0.05, #2-3 +0.02 (once, for its best
  rank): a keyword #1 is often an exact answer that fusion alone would average away.

Blending then mixes the fused (retrieval) score with a re-ranker's confidence.
The mix depends on the RRF rank: near the top the retrieval agreement is strong
evidence and the re-ranker only nudges (75/25); deeper down, retrieval is weak and
the re-ranker decides more (60/40 for ranks 4-10, 40/60 below). The retrieval
score used in the blend is the fused score divided by the best fused score, so
both sides of the mix lie in 0..1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RRF_K = 60
ORIGINAL_WEIGHT = 2.0
VARIANT_WEIGHT = 1.0
TOP1_BONUS = 0.05
TOP3_BONUS = 0.02
DEFAULT_CANDIDATE_LIMIT = 40


@dataclass
class RankedList:
    """One retriever's answer to one phrasing: keys in rank order (best first)."""

    name: str  # e.g. "original/keyword", "lex 1/keyword", "hyde/vector"
    keys: list[str]
    scores: list[float] = field(default_factory=list)  # the retriever's own scores, for --explain
    weight: float = VARIANT_WEIGHT


@dataclass
class ListHit:
    rank: int  # 1-based rank in that list
    score: float | None  # the retriever's own score
    contribution: float  # weight / (k + rank)

    def as_dict(self) -> dict:
        return {"rank": self.rank, "score": self.score, "rrf": round(self.contribution, 6)}


@dataclass
class Candidate:
    key: str
    rrf: float = 0.0  # sum of contributions
    bonus: float = 0.0
    best_rank: int = 0  # best rank in any list
    hits: dict[str, ListHit] = field(default_factory=dict)  # list name → hit
    order: int = 0  # first appearance, the last tie-breaker (deterministic output)

    @property
    def fused(self) -> float:
        return self.rrf + self.bonus


def top_rank_bonus(best_rank: int) -> float:
    if best_rank == 1:
        return TOP1_BONUS
    if 2 <= best_rank <= 3:
        return TOP3_BONUS
    return 0.0


def reciprocal_rank_fusion(
    lists: list[RankedList], *, k: int = RRF_K, limit: int | None = DEFAULT_CANDIDATE_LIMIT
) -> list[Candidate]:
    """Fuse ranked lists into candidates ordered by weighted RRF plus top-rank bonus."""
    if k < 0:
        raise ValueError("the RRF constant k must not be negative")
    candidates: dict[str, Candidate] = {}
    for ranked in lists:
        seen: set[str] = set()
        rank = 0
        for position, key in enumerate(ranked.keys):
            if key in seen:  # several hits of one document in a list: only its best counts
                continue
            seen.add(key)
            rank += 1
            candidate = candidates.get(key)
            if candidate is None:
                candidate = candidates[key] = Candidate(key=key, best_rank=rank, order=len(candidates))
            contribution = ranked.weight / (k + rank)
            candidate.rrf += contribution
            candidate.best_rank = min(candidate.best_rank, rank)
            score = ranked.scores[position] if position < len(ranked.scores) else None
            candidate.hits[ranked.name] = ListHit(rank=rank, score=score, contribution=contribution)
    for candidate in candidates.values():
        candidate.bonus = top_rank_bonus(candidate.best_rank)
    ordered = sorted(candidates.values(), key=lambda c: (-c.fused, c.best_rank, c.order))
    return ordered if limit is None else ordered[: max(0, limit)]


def retrieval_weight(rrf_rank: int) -> float:
    """Share of the retrieval score in the blend for a candidate at this RRF rank (1-based)."""
    if rrf_rank <= 3:
        return 0.75
    if rrf_rank <= 10:
        return 0.60
    return 0.40


@dataclass
class Blended:
    candidate: Candidate
    rrf_rank: int
    retrieval: float  # fused score / best fused score, 0..1
    rerank: float | None  # re-ranker confidence 0..1, None when not judged
    weight: float | None  # retrieval share used; None when there was nothing to blend
    final: float


def blend(candidates: list[Candidate], rerank_scores: dict[str, float] | None = None) -> list[Blended]:
    """Mix retrieval and re-ranker scores by RRF position; order by the result.

    Candidates without a re-ranker score (no re-ranker, or it ran out of time) keep
    their retrieval score, so a partial re-ranking never pushes unjudged documents
    below judged ones merely for lack of a judgement.
    """
    rerank_scores = rerank_scores or {}
    if not candidates:
        return []
    top = max(c.fused for c in candidates) or 1.0
    blended = []
    for rrf_rank, candidate in enumerate(candidates, start=1):
        retrieval = candidate.fused / top
        judged = rerank_scores.get(candidate.key)
        if judged is None:
            blended.append(Blended(candidate, rrf_rank, retrieval, None, None, retrieval))
            continue
        judged = min(1.0, max(0.0, float(judged)))
        weight = retrieval_weight(rrf_rank)
        final = weight * retrieval + (1.0 - weight) * judged
        blended.append(Blended(candidate, rrf_rank, retrieval, judged, weight, final))
    blended.sort(key=lambda b: (-b.final, b.rrf_rank))
    return blended
