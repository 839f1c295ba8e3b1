"""Adding and refreshing collections: scan, then ask for the embedding of what changed.

One path for every face: the CLI (`pmd collection add`, `pmd update`), `pmd up`'s folders,
the web UI, the API, the admin actions, the index and reconcile tasks and the watcher all call
`collections_refresh` (or `collection_add`, which ends in it) and get one `RefreshResult`, so
each leaves the same trace: documents indexed, and an embedding request for what changed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from django.db import close_old_connections, connection

from indexing import errors
from indexing.access import Access, collection_visible, require_write, visible_collections
from indexing.models import Collection, Job
from indexing.services.audit import audit_record
from indexing.services.background import NoWorker, embedding_request, index_request
from indexing.services.collections import (
    PullResult,
    collection_create,
    collection_git_pull,
)
from indexing.services.history import HistoryReport, history_index
from indexing.services.jobs import JobProgress, job_fail, job_finish, job_start
from indexing.services.scanning import ProgressCallback, ScanReport, collection_index, nested_collections

log = logging.getLogger("pmd.watcher")


@dataclass
class Refreshed:
    """One collection's part of a refresh: the scan's report (None if the folder is gone), the
    git pull, the problem that stopped the scan, and the commits read after it."""

    collection: str
    report: ScanReport | None
    pulled: PullResult | None = None
    problem: str | None = None
    history: HistoryReport | None = None  # the commits read after the scan (collections in a git work tree)

    @property
    def changed(self) -> bool:
        """Is there anything new to embed: changed notes or new commits?"""
        return bool((self.report and self.report.changed_document_ids) or (self.history and self.history.added))


def _collection_scan(
    collection: Collection, *, pull: bool, progress: ProgressCallback | None, job: Job | None = None
) -> Refreshed:
    """Scan one collection (after `git pull` with `pull`); with `job`, the scan is recorded in it."""
    pulled = collection_git_pull(collection) if pull else None
    if job is not None:
        job_start(job)
        progress = progress or JobProgress(job)
    try:
        report = collection_index(collection, progress=progress)
    except FileNotFoundError as exc:
        if job is not None:
            job_fail(job, message=str(exc))
        return Refreshed(collection.name, None, pulled, str(exc))
    if job is not None:
        job_finish(
            job,
            result=report.as_dict(),
            message=f"{report.added} added, {report.updated} updated, {report.removed} removed, {report.errors} errors",
        )
    return Refreshed(collection.name, report, pulled, history=_history(collection, progress))


@dataclass
class RefreshResult:
    """What a refresh did, whichever face asked: each collection scanned here, the names skipped
    (removed before their scan), the one embedding request for what changed, and the index job
    started instead of scanning here (`in_job`)."""

    collections: list[Refreshed] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    embedding: Job | None = None
    job: Job | None = None
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.collections)

    def logged_summary(self) -> dict:
        """The numbers of a refresh nobody watches (the watcher, the reconcile task, the heartbeat),
        after logging its problems: a missing folder, a failed git pull, skipped collections."""
        for refreshed in self.collections:
            pulled = refreshed.pulled
            if refreshed.problem:
                log.warning("%s", refreshed.problem)
            elif pulled is not None and pulled.ran and not pulled.ok:
                log.warning("git pull %s failed: %s", pulled.collection, pulled.output)
        if self.skipped:
            log.info("skipped: collection %s no longer exists", ", ".join(self.skipped))
        done = [r for r in self.collections if not r.problem]
        reports = [r.report.as_dict() | ({"history": r.history.as_dict()} if r.history else {}) for r in done]
        return {
            "collections": [r.collection for r in done],
            "changed": sum(len(r.report.changed_document_ids) for r in done),
            "removed": sum(len(r.report.removed_document_ids) for r in done),
            "commits": sum(r.history.added for r in done if r.history),
            "embedding_task": str(self.embedding.pk) if self.embedding else None,
            "seconds": round(self.seconds, 3),
            "reports": reports,
            "skipped": list(self.skipped),
        }


def collections_refresh(
    *,
    access: Access,
    names: list[str] | None = None,
    pull: bool = False,
    in_job: bool = False,
    job: Job | None = None,
    missing: Literal["error", "skip"] = "error",
    progress_for: Callable[[Collection], ProgressCallback | None] | None = None,
    no_worker: NoWorker = "queue",
) -> RefreshResult:
    """Refresh collections (all `access` sees by default): scan what changed, then ask once for
    the embedding of it.

    The one refresh of every face: `pmd update`, `pmd up`, the watcher, the reconcile and index
    tasks, and, with `in_job` (staff start an index job to follow; its task calls this again
    with the `job` to record the scan in), the web UI, the API and the admin. `missing="skip"`:
    a collection removed between a file event and its scan is listed in `skipped`, not an error."""
    if in_job:
        require_write(access)
        [name] = names  # one collection per job
        return _refresh(collection_visible(name, access), access=access, in_job=True)
    skipped: list[str] = []
    collections = _collections(names, access, missing, skipped)
    return _refresh(
        *collections, access=access, pull=pull, job=job, progress_for=progress_for, no_worker=no_worker, skipped=skipped
    )


def _refresh(
    *collections: Collection,
    access: Access,
    in_job: bool = False,
    pull: bool = False,
    job: Job | None = None,
    progress_for=None,
    no_worker: NoWorker = "queue",
    skipped: list[str] | None = None,
) -> RefreshResult:
    """`collections_refresh` once the collections are known (`collection_add` starts here: a
    collection just added may lie outside what a token names)."""
    if in_job:
        [collection] = collections
        return RefreshResult(job=index_request(collection=collection, created_by=None if access.local else access.user))
    started = time.perf_counter()
    if not connection.in_atomic_block:  # a long-running loop must not reuse a dropped connection
        close_old_connections()
    result = RefreshResult(skipped=list(skipped or []))
    for collection in collections:
        result.collections.append(
            _collection_scan(
                collection, pull=pull, job=job, progress=progress_for(collection) if progress_for else None
            )
        )
    if result.changed:
        result.embedding = embedding_request(no_worker=no_worker)
    result.seconds = time.perf_counter() - started
    return result


def _history(collection: Collection, progress: ProgressCallback | None) -> HistoryReport | None:
    """The collection's commits, after its files; a failure here never fails the scan."""
    try:
        return history_index(collection, progress=progress)
    except Exception:  # the notes are indexed; the history is retried next time
        log.exception("reading the git history of %s failed", collection.name)
        return None


def _collections(names: list[str] | None, access: Access, missing: str, skipped: list[str]) -> list[Collection]:
    if names is None:
        return list(visible_collections(access).order_by("name"))
    found = []
    for name in names:
        try:
            found.append(collection_visible(name, access))
        except errors.CollectionNotFound:
            if missing != "skip":
                raise
            skipped.append(name)
    return found


@dataclass
class CollectionAdded:
    collection: Collection
    refresh: RefreshResult | None = None  # index="now": the scan here; index="job": the job started
    # Collections whose folder holds this one: its notes are now theirs no more (indexed once, here).
    inside: list[str] = field(default_factory=list)

    @property
    def refreshed(self) -> Refreshed | None:
        return self.refresh.collections[0] if self.refresh and self.refresh.collections else None

    @property
    def job(self) -> Job | None:
        return self.refresh.job if self.refresh else None


def collection_add(
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
    index: Literal["now", "job", "no"] = "now",
    progress: ProgressCallback | None = None,
    access: Access,
    visibility: str = Collection.Visibility.EVERYONE,
) -> CollectionAdded:
    """Register a folder as a collection, then index it and ask for its embedding.

    `index="now"` scans here (the CLI and `pmd up`, which show the report); `"job"` starts an
    index job (a worker, or a thread here) to follow (web UI, API); `"no"` only registers it.
    `allowed_roots`: None for the local CLI; the other faces pass PMD_COLLECTION_ROOTS.
    `formats`: the formats to read besides markdown (`pdf`, `docx`, …: indexing.convert), instead of a mask.
    `title_from`: "heading", "filename", or None to choose by the folder (an Obsidian vault: file names).
    The member who adds it (not the local user) owns it: they see it whatever its visibility."""
    require_write(access)
    if visibility not in Collection.Visibility.values:
        raise errors.InvalidCollection(
            f"unknown visibility '{visibility}': use one of {', '.join(Collection.Visibility.values)}"
        )
    owner = None if access.local else access.user
    collection = collection_create(
        path=path,
        name=name,
        mask=mask,
        formats=formats,
        ignore_patterns=ignore_patterns,
        text_search_config=text_search_config,
        title_from=title_from,
        language=language,
        transclude=transclude,
        writable=writable,
        allowed_roots=allowed_roots,
        owner=owner,
        visibility=visibility,
        access=access,
    )
    audit_record(
        access,
        "collection.add",
        collection.name,
        path=collection.root_path,
        visibility=visibility,
        language=collection.language_choice.label,
        text_search_config=collection.text_search_config,
        writable=collection.writable,
    )
    added = CollectionAdded(collection, inside=[outer.name for outer in _collections_around(collection)])
    if index != "no":
        added.refresh = _refresh(collection, access=access, in_job=index == "job", progress_for=lambda _: progress)
        for outer in _collections_around(collection):  # their copies of its notes go (see nested_collections)
            _refresh(outer, access=Access.local_user(), in_job=index == "job")
    return added


def _collections_around(collection: Collection) -> list[Collection]:
    """The other collections whose folder holds this one's (a nested collection)."""
    return [
        outer
        for outer in Collection.objects.exclude(pk=collection.pk).order_by("name")
        if collection.name in nested_collections(outer).values()
    ]


def collection_embed_job(*, name: str, access: Access, force: bool = False) -> Job:
    """Compute a collection's missing embeddings in a job (web UI, API): staff with write access to it."""
    require_write(access)
    collection = collection_visible(name, access)
    return embedding_request(collection=collection, force=force, created_by=None if access.local else access.user)
