"""Saved searches: a query with its filters and mode, private or shared with a group.

Writes here; running one is search.pipeline.saved.saved_search_run (it searches, which is above this
layer). A member sees their own saved searches and those shared with a group they are in; only the
owner removes one. The local user (the CLI on the server) owns those it saves. Changing one is a
write (not through a read-only token); one saved through a collection-limited token keeps that limit.
"""

from __future__ import annotations

import unicodedata

from django.contrib.auth.models import Group
from django.db.models import Q
from django.utils import timezone

from indexing.access import refuse_read_only
from indexing.errors import GroupNotFound, InvalidSearchInput, SavedSearchExists, SavedSearchNotFound
from indexing.models import SavedSearch
from indexing.services.notify import webhook_check

NAME_RULE = "a saved search's name is 1 to 100 characters, without '/' or control characters, and not '.' or '..'"


def _owner(access):
    return None if access.local else access.user


def saved_search_name_check(name: str) -> str:
    """The name as kept (spaces collapsed), or InvalidSearchInput: a name is part of its pages'
    and the API's addresses, so a '/' would make it unreachable there."""
    cleaned = " ".join((name or "").split())
    if (
        not cleaned
        or len(cleaned) > 100
        or "/" in cleaned
        or cleaned in {".", ".."}
        or any(unicodedata.category(c) == "Cc" for c in cleaned)
    ):
        raise InvalidSearchInput(f"{NAME_RULE}: {cleaned[:100]!r} is not")
    return cleaned


def saved_search_access(saved: SavedSearch, access):
    """What a run of `saved` may see: `access`, within the collections of the token it was saved
    through when that token was limited to some."""
    if not saved.scope_limited:
        return access
    return access.within(saved.scope_collections.values_list("pk", flat=True))


def _token_collection_ids(access) -> set[int] | None:
    """The collections a collection-limited token is limited to; None when it is not limited."""
    if not access.token_limited:
        return None
    return set(access.token.collections.values_list("pk", flat=True))


def saved_searches_visible(*, access):
    """The saved searches `access` may see and run: its own, and those shared with its groups."""
    if access.local:
        return SavedSearch.objects.filter(owner=None) | SavedSearch.objects.exclude(group=None)
    if access.user is None:
        return SavedSearch.objects.none()
    return SavedSearch.objects.filter(Q(owner=access.user) | Q(group__in=access.user.groups.all())).distinct()


def saved_search_add(
    *,
    access,
    name: str,
    query: str,
    mode: str = "keyword",
    filters: dict | None = None,
    collections: list[str] | None = None,
    group: str | None = None,
    webhook_url: str = "",
    email_digest: bool = False,
) -> SavedSearch:
    refuse_read_only(access, "saving a search")
    name = saved_search_name_check(name)
    if not (query or "").strip() and not filters:
        raise InvalidSearchInput("a saved search needs words or filters")
    owner = _owner(access)
    shared = None
    if group:
        shared = Group.objects.filter(name=group).first()
        if shared is None or (
            not access.local and not access.is_staff and not access.user.groups.filter(pk=shared.pk).exists()
        ):
            raise GroupNotFound(f"no group named '{group}' of yours")
    webhook_url = (webhook_url or "").strip()
    if webhook_url:
        webhook_check(webhook_url)
    if SavedSearch.objects.filter(owner=owner, name=name).exists():
        raise SavedSearchExists(name=name)
    limit = _token_collection_ids(access)
    saved = SavedSearch.objects.create(
        owner=owner,
        name=name,
        query=(query or "").strip()[:2000],
        mode=mode,
        filters=filters or {},
        collections=list(collections or []),
        group=shared,
        webhook_url=webhook_url,
        email_digest=bool(email_digest),
        scope_limited=limit is not None,
    )
    if limit:
        saved.scope_collections.set(limit)
    return saved


def saved_search_digest_set(
    *, access, name: str, webhook_url: str | None = None, email_digest: bool | None = None
) -> SavedSearch:
    """Change where a saved search of one's own sends its digest (None: leave as it is; "" or False:
    stop sending there). Only the owner changes it, as with removing it; through a collection-limited
    token, its limit narrows to that token's collections (it never widens)."""
    refuse_read_only(access, "changing a saved search")
    saved = SavedSearch.objects.filter(owner=_owner(access), name=name).first()
    if saved is None:
        raise SavedSearchNotFound(name=name)
    limit = _token_collection_ids(access)
    if limit is not None:
        if saved.scope_limited:
            limit &= set(saved.scope_collections.values_list("pk", flat=True))
        saved.scope_limited = True
        saved.save(update_fields=["scope_limited"])
        saved.scope_collections.set(limit)
    if webhook_url is not None:
        webhook_url = webhook_url.strip()
        if webhook_url:
            webhook_check(webhook_url)
        saved.webhook_url = webhook_url
    if email_digest is not None:
        saved.email_digest = bool(email_digest)
    saved.save(update_fields=["webhook_url", "email_digest"])
    return saved


def saved_search_get(*, access, name: str) -> SavedSearch:
    """One's own first, then one shared with a group of theirs."""
    visible = saved_searches_visible(access=access).filter(name=name)
    found = visible.filter(owner=_owner(access)).first() or visible.first()
    if found is None:
        raise SavedSearchNotFound(name=name)
    return found


def saved_search_remove(*, access, name: str) -> None:
    refuse_read_only(access, "removing a saved search")
    deleted, _ = SavedSearch.objects.filter(owner=_owner(access), name=name).delete()
    if not deleted:
        raise SavedSearchNotFound(name=name)


def saved_search_mark_run(saved: SavedSearch, uris: list[str]) -> list[str]:
    """Note a run's results; the URIs new since the last run (all of them on the first)."""
    before = set(saved.seen or [])
    new = [u for u in uris if u not in before] if saved.last_run is not None else list(uris)
    saved.seen = list(dict.fromkeys(list(saved.seen or []) + uris))[-5000:]
    saved.last_run = timezone.now()
    saved.save(update_fields=["seen", "last_run"])
    return new


def saved_search_mark_digest(saved: SavedSearch, uris: list[str]) -> list[str]:
    """Note a digest's results (apart from the owner's own runs); the URIs new since the last digest
    (none on the first: a digest starts from what exists when it is set up)."""
    before = set(saved.digest_seen or [])
    new = [u for u in uris if u not in before] if saved.digest_at is not None else []
    saved.digest_seen = list(dict.fromkeys(list(saved.digest_seen or []) + uris))[-5000:]
    saved.digest_at = timezone.now()
    saved.save(update_fields=["digest_seen", "digest_at"])
    return new
