"""Creating, renaming, removing and refreshing collections."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from indexing import errors
from indexing.access import Access, collection_suggestions, collection_visible, require_write
from indexing.folders import collection_folder_refusal, is_within
from indexing.models import Collection
from indexing.paths import glob_regex
from indexing.services.audit import audit_record
from indexing.services.scanning import ProgressCallback, ScanReport, collection_index

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class CollectionError(errors.InvalidCollection):
    """A collection request that cannot be carried out; the message says why."""


class CollectionPathRefused(errors.CollectionPathRefused, CollectionError):
    """A folder that may not become a collection for this caller (see `collection_root_check`)."""


class CollectionNotFound(errors.CollectionNotFound, CollectionError):
    """No collection of that name (404 on the API); a CollectionError for callers that catch those."""


class CollectionExists(errors.CollectionExists, CollectionError):
    """The name is taken (409 on the API); each face adds how to choose another."""


def collection_root_check(*, path: str | Path, allowed_roots: list[Path] | None) -> Path:
    """The resolved folder if this caller may make it a collection; CollectionPathRefused if not.

    `allowed_roots` is the caller's trust: None for the local CLI (run by the OS user, who can
    read the files anyway), the PMD_COLLECTION_ROOTS list for the web UI, API and admin, where
    staff of a shared server must not turn /etc or /root into something every member can read.
    """
    root = Path(os.path.realpath(Path(path).expanduser()))
    refusal = collection_folder_refusal(root)
    if refusal:
        raise CollectionPathRefused(refusal)
    if allowed_roots is None:
        return root
    roots = [Path(os.path.realpath(Path(r).expanduser())) for r in allowed_roots]
    if not roots:
        raise CollectionPathRefused(
            f"{root}: collections cannot be added here because PMD_COLLECTION_ROOTS is empty; "
            "the server's administrator sets it to the folders that may hold collections"
        )
    if not any(is_within(root, allowed) for allowed in roots):
        raise CollectionPathRefused(
            f"{root} is outside the folders allowed for collections (PMD_COLLECTION_ROOTS: "
            f"{', '.join(str(r) for r in roots)})"
        )
    return root


def _check_name(name: str) -> str:
    name = name.strip()
    if not _NAME_RE.match(name):
        raise CollectionError(
            f"'{name}' is not a valid collection name: use letters, digits, '.', '-' and '_' (no '/')"
        )
    return name


def default_name_for(path: Path) -> str:
    candidate = re.sub(r"[^A-Za-z0-9._-]+", "-", path.name).strip("-.") or "notes"
    return candidate[:200]


def collection_create(
    *,
    path: str | Path,
    name: str | None = None,
    mask: str | None = None,
    ignore_patterns: list[str] | None = None,
    text_search_config: str | None = None,
    allowed_roots: list[Path] | None = None,
    owner=None,
    visibility: str = Collection.Visibility.EVERYONE,
) -> Collection:
    """Register a folder as a collection (without indexing it yet).

    `allowed_roots`: None for the local CLI; the web UI, API and admin pass
    settings.PMD_COLLECTION_ROOTS (see `collection_root_check`).
    """
    typed = Path(path).expanduser()
    root = collection_root_check(path=typed, allowed_roots=allowed_roots)  # before probing the folder
    if not root.exists():
        raise CollectionError(f"folder {typed} does not exist")
    if not root.is_dir():
        raise CollectionError(f"{typed} is not a folder")
    name = _check_name(name or default_name_for(root))
    for glob in [mask or settings.PMD_DEFAULT_MASK, *(ignore_patterns or [])]:
        glob_regex(glob.strip())  # InvalidGlob now, not at every scan of the folder
    if Collection.objects.filter(name=name).exists():
        raise CollectionExists(name=name)
    try:
        with transaction.atomic():
            return Collection.objects.create(
                name=name,
                root_path=str(root),
                mask=(mask or settings.PMD_DEFAULT_MASK).strip(),
                ignore_patterns=list(ignore_patterns or []),
                text_search_config=text_search_config or settings.PMD_TEXT_SEARCH_CONFIG,
                owner=owner,
                visibility=visibility,
            )
    except IntegrityError:
        raise CollectionExists(name=name) from None


def collection_get(name: str) -> Collection:
    """A collection by name, for the local user and background work, who see every collection.
    A face acting for a member uses `indexing.access.collection_visible` instead."""
    try:
        return Collection.objects.get(name=name)
    except Collection.DoesNotExist:
        raise CollectionNotFound(name=name, suggestions=collection_suggestions(name, Access.local_user())) from None


def collection_rename(*, name: str, new_name: str, access: Access) -> Collection:
    require_write(access)
    collection = collection_visible(name, access)
    new_name = _check_name(new_name)
    if Collection.objects.filter(name=new_name).exclude(pk=collection.pk).exists():
        raise CollectionExists(name=new_name)
    old_name = collection.name
    with transaction.atomic():
        collection.name = new_name
        collection.save(update_fields=["name", "updated_at"])
        audit_record(access, "collection.rename", new_name, old_name=old_name)
    return collection


def collection_remove(*, name: str, access: Access) -> int:
    """Delete a collection with its documents and contexts; returns the document count."""
    require_write(access)
    collection = collection_visible(name, access)
    with transaction.atomic():
        count = collection.documents.count()
        collection.delete()
        audit_record(access, "collection.remove", name, documents=count, path=collection.root_path)
    return count


@dataclass
class PullResult:
    collection: str
    ran: bool
    ok: bool
    output: str


# Nothing the checkout's own configuration names is run: no hooks (post-merge, ...) and no
# file-system monitor program, whoever wrote .git/config.
GIT_SAFE_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


def collection_git_pull(collection: Collection, *, timeout: float = 120) -> PullResult:
    """`git pull --ff-only` when the collection folder is the top of a git checkout.

    A collection that is only a subfolder of a checkout is not pulled: the pull would change
    files outside the collection, in a repository the collection's owner did not name.
    """
    root = Path(collection.root_path)
    git = ["git", *GIT_SAFE_OPTIONS, "-C", str(root)]
    probe = subprocess.run([*git, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.strip():
        return PullResult(collection.name, ran=False, ok=True, output="not a git checkout")
    if os.path.realpath(probe.stdout.strip()) != os.path.realpath(root):
        return PullResult(collection.name, ran=False, ok=True,
                          output=f"not pulled: the folder is inside the git checkout {probe.stdout.strip()}, "
                                 "not its top")
    try:
        result = subprocess.run([*git, "pull", "--ff-only"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return PullResult(collection.name, ran=True, ok=False, output=f"git pull timed out after {timeout:.0f}s")
    return PullResult(collection.name, ran=True, ok=result.returncode == 0,
                      output=(result.stdout + result.stderr).strip())


def collections_update(
    *,
    names: list[str] | None = None,
    pull: bool = False,
    progress_for: "callable | None" = None,
) -> list[tuple[ScanReport | None, PullResult | None, str | None]]:
    """Re-index collections (all by default); each entry is (report, pull result, error)."""
    collections = [collection_get(n) for n in names] if names else list(Collection.objects.all())
    results = []
    for collection in collections:
        pulled = collection_git_pull(collection) if pull else None
        progress: ProgressCallback | None = progress_for(collection) if progress_for else None
        try:
            results.append((collection_index(collection, progress=progress), pulled, None))
        except FileNotFoundError as exc:
            results.append((None, pulled, str(exc)))
    return results
