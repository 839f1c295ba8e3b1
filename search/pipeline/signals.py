"""Optional ranking signals of hybrid search from the notes' own structure: links and recency.

Both act after fusion, before re-ranking, on the fused scale in units of its spread (a
candidate's *place*: 1 for the top candidate, 0 for the lowest fused one), so a weight means the
same whatever a query's scores are:

- link boost `w`: a candidate linked to or from other candidates among the first SIGNAL_DEPTH
  gains `w ×` the best such neighbour's place (mcp-markdown-ragdocs gives a wikilink neighbour
  half of its score: w = 0.5). Places are read before any boost, so boosts do not cascade.
- recency boost `w`: a note dated in the last RECENT_DAYS days gains `w`, in the last
  FRESH_DAYS days `w / 2` (ragdocs' 1.2× / 1.1× tiers for w = 0.2), by its note date
  (frontmatter, file name, else mtime: the date `after:` filters use).

Off by default (PMD_LINK_BOOST / PMD_RECENCY_BOOST = 0; the request's `link_boost` /
`recency_boost` override them): README, Benchmarks, "Ranking signals" has the measurements.
Only documents already among the candidates are read, so nothing the searcher may not see
comes in.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Q

from indexing.models import Document, DocumentLink
from search.pipeline.fusion import KINDS, Fusion

SIGNAL_DEPTH = 100  # fused candidates the signals look at (and may reorder)
RECENT_DAYS = 7
FRESH_DAYS = 30


def signal_weights(request) -> tuple[float, float]:
    """(link boost, recency boost) for a request: its own values, else the settings."""
    link = request.link_boost if request.link_boost is not None else settings.PMD_LINK_BOOST
    recency = request.recency_boost if request.recency_boost is not None else settings.PMD_RECENCY_BOOST
    return max(0.0, float(link or 0.0)), max(0.0, float(recency or 0.0))


def apply_signals(
    fusion: Fusion, hits: dict, *, link_boost: float, recency_boost: float, now: datetime | None = None
) -> dict[str, float]:
    """Boost the fused scores of `fusion`'s first candidates in place and re-sort them; returns
    {candidate key: boost in fused units} for those boosted. `hits`: list name → key → result."""
    if not fusion.candidates or (link_boost <= 0 and recency_boost <= 0):
        return {}
    head = fusion.candidates[:SIGNAL_DEPTH]
    top, floor = head[0].fused, fusion.floor
    span = top - floor
    if span <= 1e-12:
        return {}
    place = {c.key: (c.fused - floor) / span for c in head}
    shown = {c.key: _shown(c, hits) for c in head}
    boosts: dict[str, float] = {}
    if link_boost > 0:
        for key, neighbour_place in _best_neighbours(shown, place).items():
            boosts[key] = boosts.get(key, 0.0) + link_boost * neighbour_place
    if recency_boost > 0:
        now = now or datetime.now(UTC)
        for key, result in shown.items():
            age = _age(result, now)
            if age is None:
                continue
            tier = 1.0 if age <= timedelta(days=RECENT_DAYS) else 0.5 if age <= timedelta(days=FRESH_DAYS) else 0.0
            if tier:
                boosts[key] = boosts.get(key, 0.0) + recency_boost * tier
    if not boosts:
        return {}
    out = {}
    for candidate in head:
        if candidate.key in boosts and not candidate.pinned:
            candidate.fused += boosts[candidate.key] * span
            out[candidate.key] = boosts[candidate.key] * span
    head.sort(key=lambda c: (not c.pinned, -c.fused, c.best_rank, c.order))
    fusion.candidates[: len(head)] = head
    first = fusion.candidates[0]
    fusion.top_evidence = sum(fusion.weights.get(kind, 0.0) * first.evidence.get(kind, 0.0) for kind in KINDS)
    return out


def _shown(candidate, hits):
    for name in candidate.hits:
        result = hits.get(name, {}).get(candidate.key)
        if result is not None:
            return result
    return None


def _age(result, now: datetime) -> timedelta | None:
    if result is None or not result.date:
        return None
    try:
        when = datetime.fromisoformat(result.date)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(timedelta(0), now - when)


def _best_neighbours(shown: dict, place: dict[str, float]) -> dict[str, float]:
    """{key: the highest place of a candidate it links to or that links to it}."""
    pairs = {(r.collection, r.path): key for key, r in shown.items() if r is not None}
    if len(pairs) < 2:
        return {}
    by_collection: dict[str, list[str]] = {}
    for collection, path in pairs:
        by_collection.setdefault(collection, []).append(path)
    condition = Q()
    for collection, paths in by_collection.items():
        condition |= Q(collection__name=collection, path__in=paths)
    ids = {
        pk: pairs[(name, path)]
        for pk, name, path in Document.objects.filter(condition, active=True).values_list(
            "pk", "collection__name", "path"
        )
    }
    best: dict[str, float] = {}
    for source, target in DocumentLink.objects.filter(source_id__in=ids, target_id__in=ids).values_list(
        "source_id", "target_id"
    ):
        a, b = ids[source], ids[target]
        if a == b:
            continue
        best[a] = max(best.get(a, 0.0), place[b])
        best[b] = max(best.get(b, 0.0), place[a])
    return best
