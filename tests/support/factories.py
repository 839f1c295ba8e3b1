"""Test data in one call: users, groups, API tokens and clients, and vaults (a folder of notes
indexed as a collection). Each takes the names a test wants to assert on."""

from __future__ import annotations

from pathlib import Path


def make_user(name: str, *, password: str | None = None, staff: bool = False, superuser: bool = False, **fields):
    """A user; the password defaults to `pw-<name>-123`. A superuser is staff too."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    password = password if password is not None else f"pw-{name}-123"
    if superuser:
        return users.create_superuser(name, password=password, **fields)
    return users.create_user(name, password=password, is_staff=staff, **fields)


def make_group(name: str, *members):
    """A group holding `members` (users)."""
    from django.contrib.auth.models import Group

    group = Group.objects.create(name=name)
    for member in members:
        member.groups.add(group)
    return group


def make_token(user, *, write: bool = False, access=None, **options) -> str:
    """A raw bearer token of `user`, created as the local user unless `access` says otherwise."""
    from indexing.access import Access
    from indexing.services.tokens import token_create

    return token_create(user=user, access=access or Access.local_user(), can_write=write, **options).raw


def api_client(user, *, write: bool = True, **options):
    """A Django test client that sends `user`'s bearer token (write access unless told)."""
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=f"Bearer {make_token(user, write=write, **options)}")


def web_client(user):
    """A Django test client logged in as `user` (the browser UI's session)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def write_notes(folder: Path, notes: dict[str, str]) -> Path:
    """Write `notes` ({relative path: text}) under `folder`, creating sub-folders."""
    for path, text in notes.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder


def make_vault(folder: Path, notes: dict[str, str], *, name: str, embed: bool = False, **create):
    """`notes` written under `folder`, added as collection `name` and indexed (embedded if asked)."""
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    write_notes(folder, notes)
    collection = collection_create(path=folder, name=name, **create)
    collection_index(collection)
    if embed:
        from indexing.services.embedding import embed_pending

        embed_pending()
    return collection
