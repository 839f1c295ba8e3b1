"""The search log: every search a person or an agent makes through a face, to show staff
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

from indexing.access import refuse_read_only, visible_collections
from indexing.errors import DocumentNotFound, InvalidPath
from indexing.models import Document, SearchFeedback, SearchLogEntry
from indexing.paths import SCHEME, parse_virtual, virtual_path

PRUNE_EVERY_SECONDS = 3600
_last_prune = [0.0]


def search_log_record(
    *,
    access,
    face: str,
    mode: str,
    query: str,
    results: int,
    top_score: float | None,
    latency_ms: float,
    corrected_query: str | None = None,
) -> int | None:
    """Log one search; its id (for "opened"), or None when the log is off."""
    if not settings.PMD_SEARCH_LOG or not face:
        return None
    user = access.user if access is not None and not access.local and access.user is not None else None
    fields = dict(
        user=user if user is not None and user.is_authenticated else None,
        token=getattr(access, "token", None),
        face=face[:10],
        mode=mode[:10],
        query=(query or "")[:2000],
        results=results,
        top_score=top_score,
        latency_ms=latency_ms,
        corrected_query=(corrected_query or "")[:2000],
    )
    entry = _still_typing(fields)
    if entry is not None:
        for name, value in fields.items():
            setattr(entry, name, value)
        entry.at = timezone.now()
        entry.save()
    else:
        entry = SearchLogEntry.objects.create(**fields)
    if time.monotonic() - _last_prune[0] > PRUNE_EVERY_SECONDS:
        _last_prune[0] = time.monotonic()
        search_log_prune()
    return entry.pk


TYPING_SECONDS = 10


def _still_typing(fields: dict) -> SearchLogEntry | None:
    """The web box searches at every pause in typing: "postg", "postgres", "postgres vac"… are one
    search, logged once. The entry the same person made in the same face and mode moments ago, when
    one query extends (or backspaces) the other and nothing was opened or rated from it yet."""
    if fields["face"] != "web" or fields["user"] is None:
        return None
    last = (
        SearchLogEntry.objects.filter(
            user=fields["user"], face="web", at__gte=timezone.now() - timedelta(seconds=TYPING_SECONDS)
        )
        .order_by("-at", "-id")
        .first()
    )
    if (
        last is None
        or last.mode != fields["mode"]
        or last.opened_uri
        or SearchFeedback.objects.filter(entry=last).exists()
    ):
        return None
    before, now = last.query.strip().casefold(), fields["query"].strip().casefold()
    return last if before and now and (now.startswith(before) or before.startswith(now)) else None


def _note_uri(uri: str, *, access) -> str:
    """`uri` as the log keeps a result: the `pmd://collection/path` of a note `access` sees. Anything
    else (another scheme such as `javascript:`, a note that does not exist, or one in a collection
    `access` does not see) is refused in the same words as a missing note: staff read these URIs."""
    try:
        collection, path = parse_virtual(uri.strip())
    except InvalidPath:
        collection, path = "", ""
    known = (
        collection
        and Document.objects.filter(
            collection__in=visible_collections(access).filter(name=collection), path=path, active=True
        ).exists()
    )
    if not known:
        raise DocumentNotFound(
            f"no note {uri[:300]}" if uri.strip().startswith(SCHEME) else "a result is a note's pmd://collection/path"
        )
    return virtual_path(collection, path)


def search_log_opened(*, access, entry_id: int, uri: str) -> bool:
    """Note the result opened from a logged search (the first one only); only by whoever searched,
    and only a note they see (staff read these URIs)."""
    refuse_read_only(access, "noting the result opened")
    uri = _note_uri(uri, access=access)
    entries = SearchLogEntry.objects.filter(pk=entry_id, opened_uri="")
    if not access.local:
        entries = entries.filter(user=access.user)
    return entries.update(opened_uri=uri[:4200]) > 0


def search_feedback_record(*, access, entry_id: int, uri: str, helpful: bool) -> bool:
    """A thumbs up (helpful) or down on a result of a logged search; only by whoever searched (a member
    never rates, nor learns of, another's search), and only on a note they see (staff read these URIs).
    A second vote on the same result replaces the first."""
    refuse_read_only(access, "rating a result")
    uri = _note_uri(uri, access=access)
    entries = SearchLogEntry.objects.filter(pk=entry_id)
    if not access.local:
        entries = entries.filter(user=access.user) if access.user is not None else entries.none()
    entry = entries.first()
    if entry is None:
        return False
    SearchFeedback.objects.update_or_create(entry=entry, uri=uri[:4200], defaults={"helpful": bool(helpful)})
    return True


def search_log_prune(*, now=None) -> int:
    """Delete the entries older than PMD_SEARCH_LOG_DAYS; how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.PMD_SEARCH_LOG_DAYS)
    deleted, _ = SearchLogEntry.objects.filter(at__lt=cutoff).delete()
    return deleted
