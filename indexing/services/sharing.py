"""Sharing a collection (everyone, chosen groups and people, or private) and the groups themselves.

Groups are Django's groups: managed here for the CLI and the web UI, and in the admin.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from indexing import errors
from indexing.access import Access, collection_visible, require_write
from indexing.models import Collection
from indexing.services.audit import audit_record

Visibility = Collection.Visibility


def _users(names: list[str]) -> list:
    user_model = get_user_model()
    found = {u.get_username(): u for u in user_model.objects.filter(**{f"{user_model.USERNAME_FIELD}__in": names})}
    missing = [n for n in names if n not in found]
    if missing:
        raise errors.UserNotFound(f"no user named '{missing[0]}'")
    return [found[n] for n in names]


def _groups(names: list[str]) -> list[Group]:
    found = {g.name: g for g in Group.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise errors.GroupNotFound(
            f"no group named '{missing[0]}'",
            [g for g in Group.objects.values_list("name", flat=True) if g.lower() == missing[0].lower()],
        )
    return [found[n] for n in names]


@dataclass
class Sharing:
    collection: Collection
    visibility: str
    users: list[str]
    groups: list[str]


def collection_share(
    *, name: str, access: Access, visibility: str, users: list[str] | None = None, groups: list[str] | None = None
) -> Sharing:
    """Set who sees a collection. `shared` needs at least one group or person; `everyone` and
    `private` refuse any (a caller who means to drop them passes none), and clear the stored ones."""
    require_write(access, "sharing a collection")
    collection = collection_visible(name, access)
    if visibility not in Visibility.values:
        raise errors.InvalidSharing(f"unknown visibility '{visibility}': use one of {', '.join(Visibility.values)}")
    user_names = list(dict.fromkeys(u.strip() for u in users or () if u.strip()))
    group_names = list(dict.fromkeys(g.strip() for g in groups or () if g.strip()))
    if visibility == Visibility.SHARED and not (user_names or group_names):
        raise errors.InvalidSharing("sharing with chosen groups and people needs at least one group or person")
    if visibility != Visibility.SHARED and (user_names or group_names):
        raise errors.InvalidSharing(f"'{visibility}' takes no groups or people: they apply to shared collections only")
    chosen_users, chosen_groups = _users(user_names), _groups(group_names)
    with transaction.atomic():
        collection.visibility = visibility
        if collection.owner_id is None and visibility != Visibility.EVERYONE and not access.local:
            collection.owner = access.user  # someone must keep seeing a private collection
        collection.save(update_fields=["visibility", "owner", "updated_at"])
        collection.shared_users.set(chosen_users)
        collection.shared_groups.set(chosen_groups)
        audit_record(
            access, "collection.share", collection.name, visibility=visibility, users=user_names, groups=group_names
        )
    return Sharing(collection, visibility, user_names, group_names)


def collection_writers(
    *,
    name: str,
    access: Access,
    writable: bool | None = None,
    users: list[str] | None = None,
    groups: list[str] | None = None,
) -> Collection:
    """Make a collection writable (or read-only again) and choose who writes notes in it besides its
    owner and superusers: people and groups who also see it. None leaves that part as it is."""
    require_write(access, "choosing who writes in a collection")
    collection = collection_visible(name, access)
    with transaction.atomic():
        changes: dict = {}
        if writable is not None and bool(writable) != collection.writable:
            collection.writable = bool(writable)
            collection.save(update_fields=["writable", "updated_at"])
            changes["writable"] = collection.writable
        if users is not None:
            names = list(dict.fromkeys(u.strip() for u in users if u.strip()))
            collection.writer_users.set(_users(names))
            changes["users"] = names
        if groups is not None:
            names = list(dict.fromkeys(g.strip() for g in groups if g.strip()))
            collection.writer_groups.set(_groups(names))
            changes["groups"] = names
        if changes:
            audit_record(access, "collection.writers", collection.name, **changes)
    return collection


# --- groups ----------------------------------------------------------------------------------


def group_list() -> list[dict]:
    return [
        {"name": g.name, "members": sorted(u.get_username() for u in g.user_set.all())}
        for g in Group.objects.prefetch_related("user_set").order_by("name")
    ]


def group_create(*, name: str, access: Access) -> Group:
    require_write(access, "managing groups")
    name = name.strip()
    if not name or len(name) > 150:
        raise errors.InvalidSharing("a group name needs 1 to 150 characters")
    group, created = Group.objects.get_or_create(name=name)
    if not created:
        raise errors.Conflict(f"a group named '{name}' already exists")
    audit_record(access, "group.create", name)
    return group


def group_delete(*, name: str, access: Access) -> None:
    require_write(access, "managing groups")
    group = _groups([name])[0]
    # The collections shared with it lose that audience: the record names them.
    shared = sorted(group.shared_collections.values_list("name", flat=True))
    with transaction.atomic():
        group.delete()
        audit_record(access, "group.delete", name, collections=shared)


def group_members_change(*, name: str, users: list[str], access: Access, add: bool) -> Group:
    """Add (`add=True`) or remove people from a group."""
    require_write(access, "managing groups")
    group = _groups([name])[0]
    people = _users(list(dict.fromkeys(u.strip() for u in users if u.strip())))
    if not people:
        raise errors.InvalidSharing("name at least one user")
    members = set(group.user_set.values_list("pk", flat=True))
    changed = [u for u in people if (u.pk in members) != add]  # only who actually joins or leaves
    if changed:
        (group.user_set.add if add else group.user_set.remove)(*changed)
        audit_record(access, "group.add" if add else "group.remove", name, users=[u.get_username() for u in changed])
    return group
