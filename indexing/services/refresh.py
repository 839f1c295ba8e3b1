"""Adding and refreshing collections: scan, then ask for the embedding of what changed.

One path for every face: the CLI (`pmd collection add`, `pmd update`), `pmd up`'s folders,
the web UI, the API, the admin actions, the index task and the watcher all end here, so
each leaves the same trace: documents indexed, and an embedding request for what changed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from django.db import close_old_connections, connection

from indexing.access import Access, collection_visible, require_write
from indexing.models import Collection, Job
from indexing.services.audit import audit_record
from indexing.services.background import NoWorker, embedding_request, index_request
from indexing.services.history import HistoryReport, history_index
from indexing.services.collections import (
    CollectionError,
    PullResult,
    collection_create,
    collection_get,
    collection_git_pull,
)
from indexing.services.jobs import JobProgress, job_fail, job_finish, job_start
from indexing.services.scanning import ProgressCallback, ScanReport, collection_index

log = logging.getLogger("pmd.watcher")


@dataclass
class Refreshed:
    """What one refresh did: the scan's report (None if the folder is gone), the git pull, the
    problem that stopped the scan, and the embedding request it made (None: nothing to embed,
    or nothing could take the request)."""

    collection: str
    report: ScanReport | None
    pulled: PullResult | None = None
    problem: str | None = None
    embedding: Job | None = None
    history: HistoryReport | None = None  # the commits read after the scan (collections in a git work tree)

    @property
    def changed(self) -> bool:
        """Is there anything new to embed: changed notes or new commits?"""
        return bool((self.report and self.report.changed_document_ids) or (self.history and self.history.added))


def collection_refresh(*, collection: Collection, pull: bool = False, job: Job | None = None,
                       progress: ProgressCallback | None = None, embed: bool = True,
                       no_worker: NoWorker = "queue") -> Refreshed:
    """Scan one collection (after `git pull` with `pull`), then ask for embedding if anything changed.

    With `job`, the scan is recorded in it (the index task's job). `embed=False` leaves the
    embedding request to a caller that refreshes several collections (`collections_refresh`)."""
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
        job_finish(job, result=report.as_dict(), message=f"{report.added} added, {report.updated} updated, "
                                                         f"{report.removed} removed, {report.errors} errors")
    refreshed = Refreshed(collection.name, report, pulled, history=_history(collection, progress))
    if embed and refreshed.changed:
        refreshed.embedding = embedding_request(no_worker=no_worker)
    return refreshed


def collections_refresh(*, names: list[str] | None = None, pull: bool = False,
                        progress_for: Callable[[Collection], ProgressCallback | None] | None = None,
                        no_worker: NoWorker = "queue") -> tuple[list[Refreshed], Job | None]:
    """Refresh several collections (all by default; CollectionError for an unknown name), then
    ask once for the embedding of what changed in any of them."""
    results = [collection_refresh(collection=c, pull=pull, embed=False,
                                  progress=progress_for(c) if progress_for else None)
               for c in _collections(names)]
    changed = any(r.changed for r in results)
    return results, (embedding_request(no_worker=no_worker) if changed else None)


def _history(collection: Collection, progress: ProgressCallback | None) -> HistoryReport | None:
    """The collection's commits, after its files; a failure here never fails the scan."""
    try:
        return history_index(collection, progress=progress)
    except Exception:  # noqa: BLE001 - the notes are indexed; the history is retried next time
        log.exception("reading the git history of %s failed", collection.name)
        return None


def _collections(names: list[str] | None) -> list[Collection]:
    return [collection_get(n) for n in names] if names else list(Collection.objects.all())


@dataclass
class CollectionAdded:
    collection: Collection
    refreshed: Refreshed | None = None  # index="now"
    job: Job | None = None  # index="job"


def collection_add(*, path: str | Path, name: str | None = None, mask: str | None = None,
                   ignore_patterns: list[str] | None = None, text_search_config: str | None = None,
                   language: str | None = None, allowed_roots: list[Path] | None = None, index: Literal["now", "job", "no"] = "now",
                   progress: ProgressCallback | None = None, access: Access,
                   visibility: str = Collection.Visibility.EVERYONE) -> CollectionAdded:
    """Register a folder as a collection, then index it and ask for its embedding.

    `index="now"` scans here (the CLI and `pmd up`, which show the report); `"job"` starts an
    index job (a worker, or a thread here) to follow (web UI, API); `"no"` only registers it.
    `allowed_roots`: None for the local CLI; the other faces pass PMD_COLLECTION_ROOTS.
    The member who adds it (not the local user) owns it: they see it whatever its visibility."""
    require_write(access)
    if visibility not in Collection.Visibility.values:
        raise CollectionError(f"unknown visibility '{visibility}': use one of "
                              f"{', '.join(Collection.Visibility.values)}")
    owner = None if access.local else access.user
    collection = collection_create(path=path, name=name, mask=mask, ignore_patterns=ignore_patterns,
                                   text_search_config=text_search_config, language=language,
                                   allowed_roots=allowed_roots,
                                   owner=owner, visibility=visibility, access=access)
    audit_record(access, "collection.add", collection.name, path=collection.root_path, visibility=visibility,
                 language=collection.language_choice.label, text_search_config=collection.text_search_config)
    added = CollectionAdded(collection)
    if index == "now":
        added.refreshed = collection_refresh(collection=collection, progress=progress)
    elif index == "job":
        added.job = index_request(collection=collection, created_by=owner)
    return added


def reindex(names: list[str] | None, *, pull: bool = False) -> dict:
    """Re-index some collections (all with None), then queue embedding; a summary for logs.

    The watcher's and the reconcile task's service. A collection removed between the file
    event and the scan is skipped (and listed under `skipped`); the others are still
    indexed. The summary has the same keys either way."""
    if not connection.in_atomic_block:  # a long-running loop must not reuse a dropped connection
        close_old_connections()
    started = time.perf_counter()
    skipped: list[str] = []
    if names is not None:
        existing = set(Collection.objects.filter(name__in=names).values_list("name", flat=True))
        skipped = [n for n in names if n not in existing]
        names = [n for n in names if n in existing]
    results = [collection_refresh(collection=c, pull=pull, embed=False)
               for c in (Collection.objects.all() if names is None else [])]
    for name in names or []:
        try:
            collection = collection_get(name)
        except CollectionError:  # removed after the check above
            skipped.append(name)
        else:
            results.append(collection_refresh(collection=collection, pull=pull, embed=False))
    if skipped:
        log.info("skipped: collection %s no longer exists", ", ".join(skipped))
    changed = removed = commits = 0
    summary = []
    for refreshed in results:
        if refreshed.problem:
            log.warning("%s", refreshed.problem)
            continue
        pulled = refreshed.pulled
        if pulled is not None and pulled.ran and not pulled.ok:
            log.warning("git pull %s failed: %s", pulled.collection, pulled.output)
        changed += len(refreshed.report.changed_document_ids)
        removed += len(refreshed.report.removed_document_ids)
        commits += refreshed.history.added if refreshed.history else 0
        summary.append(refreshed.report.as_dict() | (
            {"history": refreshed.history.as_dict()} if refreshed.history else {}))
    job = embedding_request(no_worker="queue") if changed or commits else None
    return {
        "collections": [s["collection"] for s in summary],
        "changed": changed,
        "removed": removed,
        "commits": commits,
        "embedding_task": str(job.pk) if job else None,
        "seconds": round(time.perf_counter() - started, 3),
        "reports": summary,
        "skipped": skipped,
    }


def collection_index_job(*, name: str, access: Access) -> Job:
    """Re-scan a collection in a job to follow (web UI, API): staff with write access to it."""
    require_write(access)
    collection = collection_visible(name, access)
    return index_request(collection=collection, created_by=None if access.local else access.user)


def collection_embed_job(*, name: str, access: Access, force: bool = False) -> Job:
    """Compute a collection's missing embeddings in a job (web UI, API): as `collection_index_job`."""
    require_write(access)
    collection = collection_visible(name, access)
    return embedding_request(collection=collection, force=force, created_by=None if access.local else access.user)
