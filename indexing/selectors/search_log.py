"""Reads: the search log, what people searched and what they found, opened and rated, as each
may see it."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Avg, CharField, Count, Exists, Func, Max, OuterRef, Q, Value
from django.db.models.functions import Substr
from django.utils import timezone

from indexing.access import Access, visible_collection_names
from indexing.models import SearchFeedback, SearchLogEntry
from indexing.paths import SCHEME

WEAK_SCORE = 0.3  # a top hit holding less of the query than this: the notes barely answer it


SLOW_MS = 1000.0


def _collection_of_uri(field: str):
    """The collection a stored `pmd://collection/path` names (the text before its first slash)."""
    return Func(Substr(field, len(SCHEME) + 1), Value("/"), Value(1), function="split_part", output_field=CharField())


def search_log_visible_to(access: Access, entries):
    """The logged searches `access` may see: staff everyone's, a member their own; a token limited to
    collections only the searches made through it (the log does not keep which collections a search
    covered, so only those are known to stay within its scope). And of those, none that opened or
    rated a note of a collection `access` does not see: that search is left out whole, its query and
    counts with it, like a search that never was."""
    if not access.active:
        return entries.none()
    if access.token_limited:
        entries = entries.filter(token=access.token)
    elif not access.is_staff:
        entries = entries.filter(user=access.user)
    if access.collection_ids() is None:
        return entries
    names = visible_collection_names(access)
    hidden_rating = (
        SearchFeedback.objects.filter(entry=OuterRef("pk"), uri__startswith=SCHEME)
        .alias(collection=_collection_of_uri("uri"))
        .exclude(collection__in=names)
    )
    return (
        entries.alias(opened_in=_collection_of_uri("opened_uri"))
        .exclude(Q(opened_uri__startswith=SCHEME) & ~Q(opened_in__in=names))
        .exclude(Exists(hidden_rating))
    )


def search_log_report(*, access, days: int = 30, limit: int = 10, now=None) -> dict:
    """Over the last `days`: the most asked queries, those that found nothing or only weak hits (the
    team's content gaps), the slowest, and the most recent; of the searches `access` may see
    (`search_log_visible_to`)."""
    since = (now or timezone.now()) - timedelta(days=max(1, int(days)))
    entries = search_log_visible_to(access, SearchLogEntry.objects.filter(at__gte=since))

    def grouped(qs, order):
        rows = (
            qs.values("query")
            .annotate(
                searches=Count("id"),
                people=Count("user", distinct=True),
                results=Max("results"),
                top_score=Max("top_score"),
                latency_ms=Avg("latency_ms"),
                last=Max("at"),
            )
            .order_by(*order)[:limit]
        )
        return [
            {**row, "last": row["last"].isoformat(), "latency_ms": round(row["latency_ms"] or 0, 1)} for row in rows
        ]

    def recent(qs):
        return [
            {
                "at": e.at.isoformat(),
                "user": e.user.get_username() if e.user else "local",
                "face": e.face,
                "mode": e.mode,
                "query": e.query,
                "results": e.results,
                "top_score": e.top_score,
                "latency_ms": round(e.latency_ms, 1),
                "opened": e.opened_uri if e.opened_uri.startswith(SCHEME) else "",
            }  # a note, never a link elsewhere
            for e in qs.select_related("user")[:limit]
        ]

    return {
        "days": days,
        "since": since.isoformat(),
        "searches": entries.count(),
        "everyone": access.is_staff and not access.token_limited,
        "top": grouped(entries, ("-searches", "query")),
        "zero_results": grouped(entries.filter(results=0), ("-searches", "query")),
        "weak": grouped(entries.filter(results__gt=0).filter(Q(top_score__lt=WEAK_SCORE)), ("-searches", "query")),
        "slow": grouped(entries.filter(latency_ms__gte=SLOW_MS), ("-latency_ms", "query")),
        "opened": entries.filter(opened_uri__startswith=SCHEME).count(),
        "feedback": search_feedback_rows(entries, limit),
        "recent": recent(entries),
    }


def search_feedback_rows(entries, limit: int) -> list[dict]:
    """The results rated from these searches, per (query, result): thumbs up and down, the most
    disliked first (what the notes answer badly)."""
    rows = (
        SearchFeedback.objects.filter(entry__in=entries, uri__startswith=SCHEME)
        .values("entry__query", "uri")
        .annotate(up=Count("id", filter=Q(helpful=True)), down=Count("id", filter=Q(helpful=False)), last=Max("at"))
        .order_by("-down", "up", "entry__query", "uri")[:limit]
    )
    return [
        {"query": r["entry__query"], "uri": r["uri"], "up": r["up"], "down": r["down"], "last": r["last"].isoformat()}
        for r in rows
    ]
