"""Running a saved search (indexing.services.saved_searches): the same search_run as every face, then
what is new since the last run."""

from __future__ import annotations

from django.db.models import Q

from indexing.access import Access, refuse_read_only, visible_collection_names
from indexing.models import SavedSearch
from indexing.services.notify import email_configured, email_send, webhook_post
from indexing.services.saved_searches import (
    saved_search_access,
    saved_search_get,
    saved_search_mark_digest,
    saved_search_mark_run,
    saved_searches_visible,
)
from search.filters import SearchFilters
from search.pipeline.dispatch import search_run
from search.request import SearchRequest
from search.results import SearchResponse


def saved_search_run(
    *, access, name: str, face: str = "", limit: int | None = None
) -> tuple[SearchResponse, list[str]]:
    """(the response, the result URIs new since the last run of this saved search). A run notes
    what it found, so it is a change: not through a read-only token."""
    refuse_read_only(access, "running a saved search")
    saved = saved_search_get(access=access, name=name)
    response = _run(saved, access=access, face=face, limit=limit)
    new = saved_search_mark_run(saved, [r.uri for r in response.results])
    return response, new


def _run(saved, *, access, face: str = "", limit: int | None = None) -> SearchResponse:
    """Within the limit of the token it was saved through, if any, whoever runs it."""
    return search_run(
        SearchRequest(
            query=saved.query,
            mode=saved.mode,
            limit=limit,
            collections=list(saved.collections or []),
            access=saved_search_access(saved, access),
            filters=SearchFilters.from_dict(saved.filters or None),
            face=face,
        )
    )


DIGEST_LIMIT = 50


def saved_searches_digest() -> dict:
    """Run every saved search that has a webhook or an email digest, as its owner sees the notes (within
    the limit of the token it was saved through), and send what is new since its last digest:
    {name: {"new": n, "webhook": error?, "email": error?}}."""
    wanted = Q(webhook_url__gt="") | (Q(email_digest=True) if email_configured() else Q(pk__in=[]))
    report: dict = {}
    for saved in SavedSearch.objects.filter(wanted).select_related("owner"):
        access = Access.local_user() if saved.owner is None else Access.for_user(saved.owner)
        try:
            response = _run(saved, access=access, limit=DIGEST_LIMIT)
        except Exception as exc:  # noqa: BLE001 - one broken saved search does not stop the others
            report[saved.name] = {"new": 0, "error": str(exc)[:200]}
            continue
        fresh = set(saved_search_mark_digest(saved, [r.uri for r in response.results]))
        new = [r for r in response.results if r.uri in fresh]
        outcome: dict = {"new": len(new)}
        if new:
            payload = {
                "saved_search": saved.name,
                "query": saved.query,
                "mode": saved.mode,
                "new": [
                    {
                        "uri": r.uri,
                        "title": r.title,
                        "path": r.path,
                        "collection": r.collection,
                        "score": round(r.score, 4),
                    }
                    for r in new
                ],
            }
            if saved.webhook_url:
                outcome["webhook"] = webhook_post(saved.webhook_url, payload)
            if saved.email_digest and email_configured() and saved.owner is not None and saved.owner.email:
                lines = [f"- {r.title or r.path} ({r.uri})" for r in new]
                outcome["email"] = email_send(
                    saved.owner.email,
                    f"pmd: {len(new)} new for “{saved.name}”",
                    f"New matches of your saved search “{saved.query}”:\n\n" + "\n".join(lines),
                )
        report[saved.name] = outcome
    return report


def saved_searches_listed(*, access) -> list[dict]:
    """The saved searches `access` may run, as every face lists them. `mine` marks its own; a
    webhook address is shown to its owner only (it often holds a secret token)."""
    owner = None if access.local else access.user
    visible = set(visible_collection_names(access))
    rows = []
    for saved in saved_searches_visible(access=access).select_related("group", "owner"):
        row = saved_search_dict(saved, access=access, visible=visible)
        row["mine"] = saved.owner_id == (owner.pk if owner is not None else None)
        if not row["mine"]:
            row["webhook_url"] = ""
        rows.append(row)
    return rows


def saved_search_dict(saved, *, access, visible: set[str] | None = None) -> dict:
    """Its collections as `access` sees them (`visible`: their names, when already known): one hidden
    from it is left out, as a collection never created is."""
    if visible is None:
        visible = set(visible_collection_names(access)) if saved.collections else set()
    return {
        "name": saved.name,
        "query": saved.query,
        "mode": saved.mode,
        "filters": saved.filters,
        "collections": [c for c in saved.collections if c in visible],
        "shared_with": saved.group.name if saved.group else None,
        "owner": saved.owner.get_username() if saved.owner else "local",
        "last_run": saved.last_run.isoformat() if saved.last_run else None,
        "webhook_url": saved.webhook_url,
        "email_digest": saved.email_digest,
    }
