"""Who is asking, and what that lets them see and change: the one place access is decided.

Every face builds an `Access` once per request (the CLI, `pmd mcp` on stdio, the worker and
the watcher act as the local OS user, who can read the files anyway; the web UI as the signed-in
member; the API and /mcp as a token). Every read then goes through `visible_collections`, inside
its query, so a collection someone may not see does not exist for them: the same "not found" and
the same suggestions as a name that was never created.

Who sees a collection (superusers and the local user see all of them):
- `everyone`: every active signed-in member;
- `shared`: its owner, the chosen people and the members of the chosen groups;
- `private`: its owner only.
A token sees what its user sees, cut down to its collections when it names some; it changes
nothing unless it was created with write scope.

Who writes notes in a collection (`writable_collections`): nobody unless it is writable; then the
local user, superusers, its owner and the people and groups chosen as its writers, among those who
see it, and through a token only with write scope. What is made through a token keeps its limit: a
saved search made through one runs `within` the collections the token was limited to.
"""

from __future__ import annotations

import difflib
import getpass

from django.contrib.auth import get_user_model
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.utils import timezone

from indexing import errors
from indexing.models import Answer, ApiToken, AuditEvent, Collection
from indexing.replicas import read_connection


class Access:
    """A principal: the local OS user, a signed-in member, or a member's API token."""

    def __init__(self, *, user=None, token=None, local: bool = False):
        self.user = user
        self.token = token
        self.local = local
        self._ids: list[int] | None | bool = False  # not computed yet
        self._token_limited: bool | None = None
        self._within: frozenset[int] | None = None  # a further limit (`within`); None: none

    @classmethod
    def local_user(cls) -> Access:
        """The CLI, `pmd mcp` on stdio, the worker and the watcher: everything."""
        return cls(local=True)

    @classmethod
    def for_user(cls, user) -> Access:
        """A signed-in member (web UI, API session)."""
        return cls(user=user)

    @classmethod
    def for_token(cls, token) -> Access:
        """An API token (the API and /mcp): its user's access, within the token's scope."""
        return cls(user=token.user, token=token)

    def within(self, collection_ids) -> Access:
        """The same principal, seeing only those of `collection_ids` it sees now (never more): how
        something made through a collection-limited token keeps that limit when it runs later."""
        limited = type(self)(user=self.user, token=self.token, local=self.local)
        limited._within = (  # noqa: SLF001 - the same class: a copy of this Access, limited further
            frozenset(collection_ids) if self._within is None else self._within & frozenset(collection_ids)
        )
        return limited

    # --- who ---------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.local or bool(self.user is not None and self.user.is_authenticated and self.user.is_active)

    @property
    def is_staff(self) -> bool:
        """May manage collections, contexts and sharing (of the collections they see)."""
        return self.local or (self.active and self.user.is_staff)

    @property
    def is_superuser(self) -> bool:
        return self.local or (self.active and self.user.is_superuser)

    @property
    def can_write(self) -> bool:
        """False for a read-only token, whoever its user is."""
        return self.local or (self.active and (self.token is None or bool(self.token.can_write)))

    @property
    def token_limited(self) -> bool:
        if self._token_limited is None:
            self._token_limited = self.token is not None and self.token.collections.exists()
        return self._token_limited

    @property
    def label(self) -> str:
        """How the audit trail names the actor."""
        if self.local:
            try:
                return f"local user {getpass.getuser()}"
            except (KeyError, OSError):
                return "local user"
        name = self.user.get_username() if self.user is not None else "anonymous"
        return f"{name} (token {self.token.prefix}…)" if self.token is not None else name

    def __repr__(self) -> str:
        return f"<Access {self.label}>"

    # --- what they see -----------------------------------------------------------------------

    def collection_ids(self) -> list[int] | None:
        """Ids of the collections this principal sees; None when that is all of them (no filter).

        Computed once per Access (one per request), so a search pays one small query for it.
        """
        if self._ids is False:
            ids = None if self._sees_everything() else _visible_ids(self)
            if self._within is not None:
                ids = sorted(self._within if ids is None else self._within.intersection(ids))
            self._ids = ids
        return self._ids

    def forget_collections(self) -> None:
        """Ask `collection_ids` afresh next time: a service that changed what this principal sees
        (it added a collection they own) calls this, so the same request then finds it."""
        self._ids = False

    def _sees_everything(self) -> bool:
        return self.local or (self.is_superuser and self.token is None)


def _visible_ids(access: Access) -> list[int]:
    """The rule itself: everyone's collections, the member's own, the shared ones naming the member
    or one of their groups (all of them for a superuser), cut down to a token's collections when
    it names some. One fixed SQL statement, since it runs on every request of every member."""
    if not access.active:
        return []
    user = access.user
    tables = {
        "collection": Collection._meta.db_table,
        "shared_users": Collection.shared_users.through._meta.db_table,
        "shared_groups": Collection.shared_groups.through._meta.db_table,
        "user_groups": get_user_model().groups.through._meta.db_table,  # request.user may be a lazy object
    }
    token_clause = ""
    params = {
        "superuser": bool(user.is_superuser),
        "user": user.pk,
        "everyone": Collection.Visibility.EVERYONE,
        "shared": Collection.Visibility.SHARED,
    }
    if access.token is not None:
        tables["token_collections"] = type(access.token).collections.through._meta.db_table
        params["token"] = access.token.pk
        token_clause = """
          AND (NOT EXISTS (SELECT 1 FROM {token_collections} t WHERE t.apitoken_id = %(token)s)
               OR c.id IN (SELECT t.collection_id FROM {token_collections} t WHERE t.apitoken_id = %(token)s))"""
    sql = (
        """
        SELECT c.id FROM {collection} c
        WHERE (%(superuser)s OR c.visibility = %(everyone)s OR c.owner_id = %(user)s
               OR (c.visibility = %(shared)s
                   AND (EXISTS (SELECT 1 FROM {shared_users} su WHERE su.collection_id = c.id AND su.user_id = %(user)s)
                        OR EXISTS (SELECT 1 FROM {shared_groups} sg JOIN {user_groups} ug ON ug.group_id = sg.group_id
                                   WHERE sg.collection_id = c.id AND ug.user_id = %(user)s))))"""
        + token_clause
    ).format(**tables)
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def visible_collections(access: Access) -> QuerySet[Collection]:
    """The collections `access` may see, as a queryset to filter or join on (the rule: `_visible_ids`)."""
    ids = access.collection_ids()
    return Collection.objects.all() if ids is None else Collection.objects.filter(pk__in=ids)


def writable_collections(access: Access) -> QuerySet[Collection]:
    """The collections in which `access` may write notes: a subset of `visible_collections`."""
    if not access.can_write:
        return Collection.objects.none()
    writable = visible_collections(access).filter(writable=True)
    if access.is_superuser:
        return writable
    user = access.user
    writers = Q(owner=user) | Q(writer_users=user) | Q(writer_groups__in=user.groups.all())
    return writable.filter(pk__in=Collection.objects.filter(writers).values("pk"))


def collection_writable(name: str, access: Access) -> Collection:
    """The named collection if `access` may write notes in it. One it does not see is not found
    (as everywhere); one it sees but may not write in is refused, saying what is missing. A read-only
    token is refused first, with the same answer whichever collection it names."""
    refuse_read_only(access, "writing notes")
    collection = collection_visible(name, access)
    if writable_collections(access).filter(pk=collection.pk).exists():
        return collection
    if not collection.writable:
        raise errors.AccessDenied(f"collection '{name}' is read-only: staff can make it writable")
    raise errors.AccessDenied(f"you may read collection '{name}' but not write in it")


def visible_collection_names(access: Access) -> list[str]:
    return list(visible_collections(access).order_by("name").values_list("name", flat=True))


def answers_visible_to(access: Access):
    """The answers `access` may read again: its user's own (the local user's, for the CLI), and of
    those only the ones drawing on collections it sees. An answer is made of its passages, so one
    citing a hidden collection is left out whole: the same as an answer that never was."""
    if access.local:
        answers = Answer.objects.filter(user__isnull=True)
    elif access.active:
        answers = Answer.objects.filter(user=access.user)
    else:
        return Answer.objects.none()
    if access.collection_ids() is None:
        return answers
    hidden = RawSQL(
        f"EXISTS (SELECT 1 FROM jsonb_array_elements({Answer._meta.db_table}.passages) p "
        "WHERE coalesce(p->>'collection', '') <> ALL(%s::text[]))",
        (visible_collection_names(access),),
        output_field=BooleanField(),
    )
    return answers.alias(hidden=hidden).filter(hidden=False)


def collection_suggestions(name: str, access: Access) -> list[str]:
    """pmd:// URIs of the visible collections whose names are close to `name`."""
    names = visible_collection_names(access)
    return [f"pmd://{n}/" for n in difflib.get_close_matches(name, names, n=5, cutoff=0.5)]


def collection_visible(name: str, access: Access) -> Collection:
    """The named collection if `access` sees it; otherwise the same CollectionNotFound as for a
    name that was never created (with suggestions only among the visible ones)."""
    found = visible_collections(access).filter(name=name).first()
    if found is None:
        raise errors.CollectionNotFound(name=name, suggestions=collection_suggestions(name, access))
    return found


def require_staff(access: Access, what: str = "managing collections and contexts") -> None:
    if not access.is_staff:
        raise errors.AccessDenied(f"{what} needs a staff account")


def refuse_read_only(access: Access, what: str) -> None:
    """Any change at all (a member's own saved searches, answers, ratings too): not through a
    read-only token."""
    if access.active and not access.can_write:
        raise errors.AccessDenied(f"{what} needs a token with write scope; this token is read-only")


def require_write(access: Access, what: str = "managing collections and contexts") -> None:
    """Staff, and not through a read-only token."""
    refuse_read_only(access, what)
    require_staff(access, what)


@receiver(pre_delete, sender=Collection, dispatch_uid="pmd.access.tokens_of_removed_collections")
def _revoke_tokens_left_without_collections(sender, instance: Collection, origin=None, **kwargs) -> None:
    """A token limited to collections that are all removed is revoked, not widened.

    A token with no collections is not limited (it sees all its user sees), and removing a
    collection removes it from the tokens limited to it: without this, a token limited to the one
    collection that was removed would see everything its user sees on its next request.
    """
    removed = {instance.pk}
    if isinstance(origin, QuerySet) and origin.model is Collection:  # a bulk delete: all of them go
        removed |= set(origin.values_list("pk", flat=True))
    kept = ApiToken.collections.through.objects.exclude(collection_id__in=removed).values("apitoken_id")
    tokens = list(
        ApiToken.objects.filter(collections=instance, revoked__isnull=True).exclude(pk__in=kept).select_related("user")
    )
    now = timezone.now()
    for token in tokens:
        token.revoked = now
        token.save(update_fields=["revoked"])
        AuditEvent.objects.create(
            actor=None,
            actor_label="pmd",
            action="token.revoke",
            target=f"{token.prefix}… of {token.user.get_username()}"[:300],
            detail={"name": token.name, "reason": f"its collection {instance.name} was removed"},
        )
