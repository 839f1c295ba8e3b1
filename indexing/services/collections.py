"""Creating, renaming and removing collections (refreshing them: services/refresh.py)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from indexing import errors
from indexing.access import Access, collection_suggestions, collection_visible, require_write, visible_collections
from indexing.convert import formats_mask
from indexing.folders import collection_folder_refusal, is_within
from indexing.git import GitTimedOut, git_run
from indexing.keyword import keyword_index_rebuild
from indexing.language import AUTO, LANGUAGES, LanguageChoice, language_choice, sample_texts
from indexing.models import Collection
from indexing.paths import glob_regex
from indexing.services.audit import audit_record
from indexing.services.scanning import collection_files

LANGUAGE_SAMPLE_LISTED = 2000  # files listed to pick the language sample from (`auto`)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def collection_root_check(
    *,
    path: str | Path,
    allowed_roots: list[Path] | None,
    access: Access | None = None,
    moving: Collection | None = None,
) -> Path:
    """The resolved, existing folder if this caller may make it a collection (or move `moving`
    there); CollectionPathRefused if not.

    `allowed_roots` is the caller's trust: None for the local CLI (run by the OS user, who can
    read the files anyway), the PMD_COLLECTION_ROOTS list for the web UI, API and admin, where
    staff of a shared server must not turn /etc or /root into something every member can read.
    With `access`, the folder may not be the folder of a collection the caller does not see, nor
    lie inside or around one: a second collection over it would show its notes to everyone.
    Those faces get one answer for every folder they may not use (outside the roots, missing,
    not a folder, overlapping a hidden collection), so a refusal tells them nothing about which
    folders exist or which of them hidden collections hold.
    """
    typed = Path(path).expanduser()
    roots = None if allowed_roots is None else [Path(os.path.realpath(Path(r).expanduser())) for r in allowed_roots]
    if roots == []:
        raise errors.CollectionPathRefused(
            f"{typed}: collections cannot be added here because PMD_COLLECTION_ROOTS is empty; "
            "the server's administrator sets it to the folders that may hold collections"
        )
    root = Path(os.path.realpath(typed))
    allowed = (
        ""
        if roots is None
        else (f" inside the folders allowed for collections (PMD_COLLECTION_ROOTS: {', '.join(str(r) for r in roots)})")
    )
    refused = errors.CollectionPathRefused(
        f"{typed} cannot be a collection: choose an existing folder{allowed} that is "
        "not the folder of a collection you do not see, nor inside or around one"
    )
    if access is not None and _overlaps_hidden_collection([Path(os.path.abspath(typed)), root], access, moving):
        raise refused  # first: nothing below may tell what lies in a hidden collection's folder
    refusal = collection_folder_refusal(root)
    if refusal:
        raise errors.CollectionPathRefused(refusal)
    if roots is None:
        if not root.exists():
            raise errors.InvalidCollection(f"folder {typed} does not exist")
        if not root.is_dir():
            raise errors.InvalidCollection(f"{typed} is not a folder")
        return root
    if not any(is_within(root, allowed) for allowed in roots) or not root.is_dir():
        raise refused
    return root


def _overlaps_hidden_collection(folders: list[Path], access: Access, moving: Collection | None) -> bool:
    """Whether any of `folders` is, holds or lies inside the folder of a collection `access` does not see."""
    hidden = Collection.objects.exclude(pk__in=visible_collections(access).values("pk"))
    if moving is not None:
        hidden = hidden.exclude(pk=moving.pk)
    for stored in hidden.values_list("root_path", flat=True):
        for other in {Path(stored), Path(os.path.realpath(stored))}:
            if any(is_within(folder, other) or is_within(other, folder) for folder in folders):
                return True
    return False


def _name_taken(name: str, access: Access | None) -> errors.CollectionExists:
    """The local user hears that the collection exists; every other caller the same words whether
    or not they see the collection holding the name, so a hidden one is not confirmed."""
    if access is None or access.local:
        return errors.CollectionExists(name=name)
    return errors.CollectionExists(f"the collection name '{name}' is not available: choose another", name=name)


def _check_name(name: str) -> str:
    name = name.strip()
    if not _NAME_RE.match(name):
        raise errors.InvalidCollection(
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
    formats: list[str] | None = None,
    ignore_patterns: list[str] | None = None,
    text_search_config: str | None = None,
    title_from: str | None = None,
    language: str | None = None,
    transclude: bool = False,
    writable: bool = False,
    allowed_roots: list[Path] | None = None,
    owner=None,
    visibility: str = Collection.Visibility.EVERYONE,
    access: Access | None = None,
) -> Collection:
    """Register a folder as a collection (without indexing it yet).

    `allowed_roots`: None for the local CLI; the web UI, API and admin pass
    settings.PMD_COLLECTION_ROOTS. `access`: who asks (None: the local user); see
    `collection_root_check` for the folders each may use. `title_from`: None chooses (see
    `title_from_for`).
    `language`: a code (`de`), a name
    (`german`) or `auto` (PMD_LANGUAGE, the default: detected from a sample of the notes);
    `text_search_config` names PostgreSQL's configuration directly and wins. The returned
    collection carries `language_choice` (indexing.language.LanguageChoice) to say what was chosen.
    """
    mask = _mask_with_formats(mask, formats)
    root = collection_root_check(path=path, allowed_roots=allowed_roots, access=access)
    title_from = title_from_for(root, title_from)
    name = _check_name(name or default_name_for(root))
    for glob in [mask or settings.PMD_DEFAULT_MASK, *(ignore_patterns or [])]:
        glob_regex(glob.strip())  # InvalidGlob now, not at every scan of the folder
    if Collection.objects.filter(name=name).exists():
        raise _name_taken(name, access)
    if access is not None:
        access.forget_collections()  # asked above, before this collection existed
    collection = Collection(
        name=name,
        root_path=str(root),
        mask=(mask or settings.PMD_DEFAULT_MASK).strip(),
        ignore_patterns=list(ignore_patterns or []),
        title_from=title_from,
        owner=owner,
        visibility=visibility,
        transclude=bool(transclude),
        writable=bool(writable),
    )
    choice = _language_choice(collection, language=language, config=text_search_config)
    collection.text_search_config = choice.config
    try:
        with transaction.atomic():
            collection.save(force_insert=True)
    except IntegrityError:
        raise _name_taken(name, access) from None
    collection.language_choice = choice
    return collection


def _mask_with_formats(mask: str | None, formats: list[str] | None) -> str | None:
    """The mask of `formats` (`pdf,docx` → `**/*.{md,pdf,docx}`); they and a mask are one or the other."""
    formats = [f for f in (formats or []) if f.strip()]
    if not formats:
        return mask
    if mask and mask.strip():
        raise errors.InvalidGlob(
            "give the files to index as a mask or as formats, not both "
            f"(the formats {', '.join(formats)} are the mask {formats_mask(formats)})"
        )
    return formats_mask(formats)


def _language_choice(collection: Collection, *, language: str | None, config: str | None) -> LanguageChoice:
    """The text search configuration of a new collection (see indexing.language)."""
    language = language or settings.PMD_LANGUAGE
    sample = None
    if not config and language.strip().lower() == AUTO:
        paths = [absolute for _, absolute in islice(collection_files(collection, []), LANGUAGE_SAMPLE_LISTED)]
        sample = sample_texts(paths)
    try:
        return language_choice(
            language=language, config=config, sample=sample, fallback_config=settings.PMD_TEXT_SEARCH_CONFIG
        )
    except ValueError:
        raise errors.InvalidCollection(
            f"unknown language '{language}': use auto or one of {', '.join(c for c in LANGUAGES)}"
        ) from None


def title_from_for(root: Path, asked: str | None) -> str:
    """Where the titles of a new collection's notes come from: as asked, else from file names in an
    Obsidian vault (a folder holding .obsidian/, where the file name is the note's title), else
    from headings."""
    if asked:
        asked = asked.strip().lower()
        if asked not in Collection.TitleFrom.values:
            raise errors.InvalidCollection(
                f"unknown title source '{asked}': use one of {', '.join(Collection.TitleFrom.values)}"
            )
        return asked
    return Collection.TitleFrom.FILENAME if (root / ".obsidian").is_dir() else Collection.TitleFrom.HEADING


def collection_configure(
    *, name: str, access: Access, transclude: bool | None = None, title_from: str | None = None
) -> Collection:
    """Change how a collection's notes are read. Transclusion takes effect at once (its keyword
    passages are written again); a new title source at the next scan, which reads every note again."""
    require_write(access)
    collection = collection_visible(name, access)
    changes: dict = {}
    if transclude is not None and bool(transclude) != collection.transclude:
        changes["transclude"] = bool(transclude)
    if title_from is not None:
        chosen = title_from_for(Path(collection.root_path), title_from)
        if chosen != collection.title_from:
            changes["title_from"] = chosen
    if not changes:
        return collection
    with transaction.atomic():
        for field, value in changes.items():
            setattr(collection, field, value)
        collection.save(update_fields=[*changes, "updated_at"])
        audit_record(access, "collection.configure", collection.name, **changes)
        if "transclude" in changes:
            keyword_index_rebuild(collection_ids=[collection.pk])
    return collection


def collection_get(name: str) -> Collection:
    """A collection by name, for the local user and background work, who see every collection.
    A face acting for a member uses `indexing.access.collection_visible` instead."""
    try:
        return Collection.objects.get(name=name)
    except Collection.DoesNotExist:
        raise errors.CollectionNotFound(
            name=name, suggestions=collection_suggestions(name, Access.local_user())
        ) from None


def collection_rename(*, name: str, new_name: str, access: Access) -> Collection:
    require_write(access)
    collection = collection_visible(name, access)
    new_name = _check_name(new_name)
    if Collection.objects.filter(name=new_name).exclude(pk=collection.pk).exists():
        raise _name_taken(new_name, access)
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


def collection_git_pull(collection: Collection, *, timeout: float | None = None) -> PullResult:
    """`git pull --ff-only` when the collection folder is the top of a git checkout.

    A collection that is only a subfolder of a checkout is not pulled: the pull would change
    files outside the collection, in a repository the collection's owner did not name. Nothing
    the checkout's configuration names is run (indexing/git.py): the upload-pack is git's own
    whatever `remote.<name>.uploadpack` says, no hook, filter, credential helper or merge; after
    PMD_GIT_PULL_TIMEOUT seconds git and everything it started are killed.
    """
    root = str(Path(collection.root_path))
    timeout = settings.PMD_GIT_PULL_TIMEOUT if timeout is None else timeout
    try:
        probe = git_run(root, "rev-parse", "--show-toplevel", timeout=60, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return PullResult(collection.name, ran=False, ok=False, output=f"git cannot read the folder: {exc}")
    if probe.returncode != 0 or not probe.stdout.strip():
        return PullResult(collection.name, ran=False, ok=True, output="not a git checkout")
    if os.path.realpath(probe.stdout.strip()) != os.path.realpath(root):
        return PullResult(
            collection.name,
            ran=False,
            ok=True,
            output=f"not pulled: the folder is inside the git checkout {probe.stdout.strip()}, not its top",
        )
    try:
        result = git_run(
            root,
            "pull",
            "--ff-only",
            "--no-rebase",
            "--no-recurse-submodules",
            "--no-verify",
            "--no-edit",
            "--no-verify-signatures",
            "--upload-pack=git-upload-pack",
            timeout=timeout,
            text=True,
        )
    except GitTimedOut:
        return PullResult(
            collection.name,
            ran=True,
            ok=False,
            output=f"git pull timed out after {timeout:g}s (PMD_GIT_PULL_TIMEOUT): stopped",
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return PullResult(collection.name, ran=True, ok=False, output=f"git pull could not run: {exc}")
    return PullResult(
        collection.name, ran=True, ok=result.returncode == 0, output=(result.stdout + result.stderr).strip()
    )
