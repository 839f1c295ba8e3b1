"""Incremental indexing of a collection's folder.

Cheap first: a file whose mtime and size match what we stored is not read at all.
A file that changed on disk but hashes to the same content costs one small UPDATE.
Only new content creates rows. Files that disappear are deactivated (kept, hidden),
and come back as they were when they reappear.
"""

from __future__ import annotations

import os
import stat as stat_module
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from indexing.models import Collection, Content, Document, FileProblem
from indexing.paths import glob_match
from indexing.services.locks import advisory_lock, collection_lock_key
from indexing.text import BinaryFile, parse_markdown

ProgressCallback = Callable[[int, int, str], None]
ALWAYS_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})
FLUSH_EVERY = 500


class CollectionPathMissing(FileNotFoundError):
    pass


@dataclass
class FileIssue:
    path: str
    message: str
    severity: str = "warning"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class ScanReport:
    collection: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    reactivated: int = 0
    skipped: int = 0
    issues: list[FileIssue] = field(default_factory=list)
    changed_document_ids: list[int] = field(default_factory=list)
    removed_document_ids: list[int] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def errors(self) -> int:
        return sum(1 for i in self.issues if i.severity == "error")

    @property
    def files_seen(self) -> int:
        return self.added + self.updated + self.unchanged + self.reactivated

    def as_dict(self) -> dict:
        return {
            "collection": self.collection,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "reactivated": self.reactivated,
            "skipped": self.skipped,
            "errors": self.errors,
            "warnings": len(self.issues) - self.errors,
            "issues": [{"path": i.path, "severity": i.severity, "message": i.message} for i in self.issues],
            "elapsed_seconds": round(self.elapsed, 3),
        }


def _ignored(rel: str, patterns: list[str]) -> bool:
    return any(glob_match(p, rel) or glob_match(p, rel + "/") for p in patterns)


def collection_files(collection: Collection, issues: list[FileIssue]) -> Iterator[tuple[str, str]]:
    """(relative path, absolute path) of every file the collection's mask selects."""
    root = Path(collection.root_path)
    if not root.is_dir():
        raise CollectionPathMissing(
            f"collection '{collection.name}': folder {root} does not exist or is not a directory"
        )
    patterns = list(collection.ignore_patterns or [])
    seen_dirs: set[tuple[int, int]] = set()

    def on_error(err: OSError) -> None:
        rel = os.path.relpath(err.filename, root) if err.filename else "?"
        issues.append(FileIssue(rel, f"cannot read folder: {err.strerror}", "error"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=on_error):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if key in seen_dirs:
            issues.append(FileIssue(rel_dir or ".", "symlink loop: folder already visited, skipped"))
            dirnames[:] = []
            continue
        seen_dirs.add(key)
        kept = []
        for name in sorted(dirnames):
            if name.startswith(".") or name in ALWAYS_SKIPPED_DIRS:
                continue
            child = f"{rel_dir}/{name}" if rel_dir else name
            if patterns and _ignored(child, patterns):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not glob_match(collection.mask, rel):
                continue
            if patterns and _ignored(rel, patterns):
                continue
            yield rel, os.path.join(dirpath, name)


def collection_index(
    collection: Collection,
    *,
    progress: ProgressCallback | None = None,
    max_file_bytes: int | None = None,
) -> ScanReport:
    """Bring the collection's documents in line with its folder.

    One indexer per collection at a time, across processes (`pmd update` while the
    watcher re-indexes): a second one waits, then scans what the first one left, so
    it ends with the files as they are when it ran."""

    def waiting() -> None:
        if progress:
            progress(0, 0, "waiting for another indexer of this collection")

    with advisory_lock(key=collection_lock_key(collection.pk), on_wait=waiting):
        return _collection_scan(collection, progress=progress, max_file_bytes=max_file_bytes)


def _collection_scan(
    collection: Collection,
    *,
    progress: ProgressCallback | None,
    max_file_bytes: int | None,
) -> ScanReport:
    started = time.perf_counter()
    limit = max_file_bytes or settings.PMD_MAX_FILE_BYTES
    report = ScanReport(collection=collection.name)
    files = list(collection_files(collection, report.issues))
    total = len(files)

    existing: dict[str, tuple[int, float, int, str, bool]] = {
        path: (pk, mtime, size, content_id, active)
        for pk, path, mtime, size, content_id, active in Document.objects.filter(
            collection=collection
        ).values_list("id", "path", "mtime", "size", "content_id", "active")
    }
    seen: set[str] = set()
    batch = _Batch(collection)

    for done, (rel, abspath) in enumerate(files, start=1):
        if progress and (done % 50 == 0 or done == total):
            progress(done, total, rel)
        known = existing.get(rel)
        try:
            st = os.stat(abspath)
        except FileNotFoundError:
            report.issues.append(FileIssue(rel, "vanished during the scan"))
            continue
        except OSError as exc:
            report.issues.append(FileIssue(rel, f"cannot stat: {exc.strerror}", "error"))
            if known:
                seen.add(rel)  # keep what we have rather than hide it
            continue
        if not stat_module.S_ISREG(st.st_mode):
            continue
        seen.add(rel)
        if known and known[1] == st.st_mtime and known[2] == st.st_size:
            if known[4]:
                report.unchanged += 1
            else:
                batch.reactivate.append(known[0])
                report.reactivated += 1
            continue
        if st.st_size > limit:
            report.skipped += 1
            report.issues.append(FileIssue(
                rel, f"{st.st_size:,} bytes is over the {limit:,}-byte limit (PMD_MAX_FILE_BYTES): skipped"
            ))
            continue
        try:
            with open(abspath, "rb") as handle:
                raw = handle.read(limit + 1)
        except FileNotFoundError:
            seen.discard(rel)
            report.issues.append(FileIssue(rel, "vanished during the scan"))
            continue
        except OSError as exc:
            report.issues.append(FileIssue(rel, f"cannot read: {exc.strerror}", "error"))
            continue
        try:
            parsed = parse_markdown(raw, rel)
        except BinaryFile as exc:
            report.skipped += 1
            report.issues.append(FileIssue(rel, str(exc)))
            if known:
                seen.discard(rel)  # it is no longer a markdown document
            continue
        for warning in parsed.warnings:
            report.issues.append(FileIssue(rel, warning))
        digest = parsed.hash
        if known and known[3] == digest:
            batch.touch(known[0], st.st_mtime, st.st_size, reactivate=not known[4])
            if known[4]:
                report.unchanged += 1
            else:
                report.reactivated += 1
            continue
        batch.put(known[0] if known else None, rel, parsed, digest, st.st_mtime, st.st_size)
        if known:
            report.updated += 1
        else:
            report.added += 1
        if batch.size >= FLUSH_EVERY:
            batch.flush(report)

    missing = [v[0] for path, v in existing.items() if v[4] and path not in seen]
    batch.deactivate = missing
    report.removed = len(missing)
    batch.flush(report, final=True)
    from search.keyword_index import keyword_index_update  # the BM25 index follows every scan

    keyword_index_update(changed_document_ids=report.changed_document_ids,
                         removed_document_ids=report.removed_document_ids)
    report.elapsed = time.perf_counter() - started
    return report


class _Batch:
    """Collects writes so a scan costs a handful of statements per few hundred files."""

    def __init__(self, collection: Collection):
        self.collection = collection
        self.contents: dict[str, Content] = {}
        self.new_docs: list[Document] = []
        self.changed_docs: list[Document] = []
        self.touched: list[Document] = []
        self.reactivate: list[int] = []
        self.deactivate: list[int] = []
        self._problems_cleared = False

    @property
    def size(self) -> int:
        return len(self.new_docs) + len(self.changed_docs) + len(self.touched)

    def touch(self, pk: int, mtime: float, size: int, *, reactivate: bool) -> None:
        self.touched.append(Document(id=pk, mtime=mtime, size=size, active=True))
        if reactivate:
            self.reactivate.append(pk)

    def put(self, pk, rel, parsed, digest, mtime, size) -> None:
        if digest not in self.contents:
            self.contents[digest] = Content(hash=digest, body=parsed.body, size=len(parsed.body.encode("utf-8", "surrogatepass")))
        doc = Document(
            id=pk, collection=self.collection, path=rel, title=parsed.title, content_id=digest,
            docid=digest[:6], active=True, mtime=mtime, size=size, frontmatter=parsed.frontmatter,
        )
        (self.changed_docs if pk else self.new_docs).append(doc)

    def flush(self, report: ScanReport, *, final: bool = False) -> None:
        now = timezone.now()
        with transaction.atomic():
            if self.contents:
                Content.objects.bulk_create(self.contents.values(), ignore_conflicts=True, batch_size=500)
            if self.new_docs:
                for doc in self.new_docs:
                    doc.created_at = doc.updated_at = now
                created = Document.objects.bulk_create(self.new_docs, batch_size=500)
                report.changed_document_ids.extend(d.id for d in created)
            if self.changed_docs:
                for doc in self.changed_docs:
                    doc.updated_at = now
                Document.objects.bulk_update(
                    self.changed_docs,
                    ["title", "content", "docid", "active", "mtime", "size", "frontmatter", "updated_at"],
                    batch_size=500,
                )
                report.changed_document_ids.extend(d.id for d in self.changed_docs)
            if self.touched:
                Document.objects.bulk_update(self.touched, ["mtime", "size", "active"], batch_size=500)
            if final:
                if self.reactivate:
                    Document.objects.filter(id__in=self.reactivate).update(active=True, updated_at=now)
                    report.changed_document_ids.extend(self.reactivate)
                if self.deactivate:
                    Document.objects.filter(id__in=self.deactivate).update(active=False, updated_at=now)
                    report.removed_document_ids.extend(self.deactivate)
                FileProblem.objects.filter(collection=self.collection).delete()
                FileProblem.objects.bulk_create(
                    [FileProblem(collection=self.collection, path=i.path, severity=i.severity, message=i.message[:2000])
                     for i in report.issues],
                    batch_size=500,
                )
                Collection.objects.filter(pk=self.collection.pk).update(last_indexed_at=now)
        self.contents, self.new_docs, self.changed_docs, self.touched = {}, [], [], []
