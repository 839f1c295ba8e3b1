"""Creating, renaming, removing and refreshing collections."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from indexing.models import Collection
from indexing.services.scanning import ProgressCallback, ScanReport, collection_index

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class CollectionError(ValueError):
    """A collection request that cannot be carried out; the message says why."""


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
) -> Collection:
    """Register a folder as a collection (without indexing it yet)."""
    root = Path(path).expanduser()
    if not root.exists():
        raise CollectionError(f"folder {root} does not exist")
    if not root.is_dir():
        raise CollectionError(f"{root} is not a folder")
    root = root.resolve()
    name = _check_name(name or default_name_for(root))
    if Collection.objects.filter(name=name).exists():
        raise CollectionError(
            f"a collection named '{name}' already exists: choose another with --name, or `pmd collection remove {name}`"
        )
    try:
        with transaction.atomic():
            return Collection.objects.create(
                name=name,
                root_path=str(root),
                mask=(mask or settings.PMD_DEFAULT_MASK).strip(),
                ignore_patterns=list(ignore_patterns or []),
                text_search_config=text_search_config or settings.PMD_TEXT_SEARCH_CONFIG,
            )
    except IntegrityError:
        raise CollectionError(f"a collection named '{name}' already exists") from None


def collection_get(name: str) -> Collection:
    try:
        return Collection.objects.get(name=name)
    except Collection.DoesNotExist:
        from indexing.selectors import close_matches

        names = list(Collection.objects.values_list("name", flat=True))
        hint = close_matches(name, names)
        suffix = f" (did you mean: {', '.join(hint)}?)" if hint else (
            f" (collections: {', '.join(names)})" if names else " (no collections yet: `pmd collection add PATH`)"
        )
        raise CollectionError(f"no collection named '{name}'{suffix}") from None


def collection_rename(*, name: str, new_name: str) -> Collection:
    collection = collection_get(name)
    new_name = _check_name(new_name)
    if Collection.objects.filter(name=new_name).exclude(pk=collection.pk).exists():
        raise CollectionError(f"a collection named '{new_name}' already exists")
    collection.name = new_name
    collection.save(update_fields=["name", "updated_at"])
    return collection


def collection_remove(*, name: str) -> int:
    """Delete a collection with its documents and contexts; returns the document count."""
    collection = collection_get(name)
    count = collection.documents.count()
    collection.delete()
    return count


@dataclass
class PullResult:
    collection: str
    ran: bool
    ok: bool
    output: str


def collection_git_pull(collection: Collection, *, timeout: float = 120) -> PullResult:
    """`git pull --ff-only` when the collection folder is a git checkout."""
    root = Path(collection.root_path)
    probe = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
        capture_output=True, text=True,
    )
    if probe.returncode != 0:
        return PullResult(collection.name, ran=False, ok=True, output="not a git checkout")
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "pull", "--ff-only"],
            capture_output=True, text=True, timeout=timeout,
        )
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
