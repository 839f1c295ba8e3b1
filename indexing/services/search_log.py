"""The search log (issue 31): every search a person or an agent makes through a face, to show staff
what the team could not find (zero-result and weak queries), what is slow and what is asked most.

Recorded by search.pipeline.dispatch.search_run for requests that name their face (CLI, API, web, MCP;
a script or the benchmark calling the service names none and is not logged). Off with
PMD_SEARCH_LOG=false; entries older than PMD_SEARCH_LOG_DAYS are pruned as new ones come in.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from indexing.models import SearchLogEntry

PRUNE_EVERY_SECONDS = 3600
_last_prune = [0.0]


def search_log_record(*, access, face: str, mode: str, query: str, results: int, top_score: float | None,
                      latency_ms: float, corrected_query: str | None = None) -> int | None:
    """Log one search; its id (for "opened"), or None when the log is off."""
    if not settings.PMD_SEARCH_LOG or not face:
        return None
    user = access.user if access is not None and not access.local and access.user is not None else None
    entry = SearchLogEntry.objects.create(
        user=user if user is not None and user.is_authenticated else None,
        token=getattr(access, "token", None), face=face[:10], mode=mode[:10], query=(query or "")[:2000],
        results=results, top_score=top_score, latency_ms=latency_ms, corrected_query=(corrected_query or "")[:2000],
    )
    if time.monotonic() - _last_prune[0] > PRUNE_EVERY_SECONDS:
        _last_prune[0] = time.monotonic()
        search_log_prune()
    return entry.pk


def search_log_opened(*, access, entry_id: int, uri: str) -> bool:
    """Note the result opened from a logged search (the first one only); only by whoever searched."""
    entries = SearchLogEntry.objects.filter(pk=entry_id, opened_uri="")
    if not access.local:
        entries = entries.filter(user=access.user)
    return entries.update(opened_uri=uri[:4200]) > 0


def search_log_prune(*, now=None) -> int:
    """Delete the entries older than PMD_SEARCH_LOG_DAYS; how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.PMD_SEARCH_LOG_DAYS)
    deleted, _ = SearchLogEntry.objects.filter(at__lt=cutoff).delete()
    return deleted
