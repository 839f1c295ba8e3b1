"""Incremental indexing of a collection's folder.

Cheap first: a file whose mtime and size match what we stored is not read at all.
A file that changed on disk but hashes to the same content costs one small UPDATE.
Only new content creates rows. Files that disappear are deactivated (kept, hidden),
and come back as they were when they reappear.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from indexing import errors
from indexing.convert import UNIT_NAMES, ConversionRefused, format_of, formats_of_mask, is_converted, known_format
from indexing.convert.sandbox import Converter
from indexing.folders import collection_folder_refusal, pseudo_mount_points
from indexing.keyword import keyword_index_update  # the BM25 index follows every scan
from indexing.locks import advisory_lock, collection_lock_key
from indexing.models import Collection, Content, Document, DocumentLink, FileProblem
from indexing.paths import Selection
from indexing.services.converting import convert_limits, extractions_prune, file_text_extract
from indexing.services.links import (
    FEW_TARGETS,
    LINK_PROBLEM_PREFIX,
    LinkScope,
    NoteNames,
    links_resolve,
    links_store,
)
from indexing.structure import DATE_MTIME, Link, NoteStructure, frontmatter_names, note_date, note_structure
from indexing.text import BinaryFile, note_reading, parse_markdown
from indexing.userinput import unstorable_reason

ProgressCallback = Callable[[int, int, str], None]
FORMAT_WORDS = {"pdf": "PDF", "docx": "DOCX", "pptx": "PPTX", "xlsx": "XLSX", "html": "HTML", "epub": "EPUB"}
FLUSH_EVERY = 500
CONVERT_PROGRESS_BYTES = 1024 * 1024  # a file this large to convert is named in the progress line


@dataclass
class FileIssue:
    path: str
    message: str
    severity: str = "warning"
    known: bool = False  # the last scan reported it too (`pmd up` does not repeat it at every start)

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
    # Files of a format pmd reads that the collection's mask leaves out, by format: said, not skipped in silence.
    not_read: dict[str, int] = field(default_factory=dict)
    changed_document_ids: list[int] = field(default_factory=list)
    removed_document_ids: list[int] = field(default_factory=list)
    elapsed: float = 0.0

    # The formats that read them too: what the collection reads now and those (`--formats`).
    formats_to_include: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for i in self.issues if i.severity == "error")

    def not_read_line(self) -> str | None:
        """`9 files not read: 5 PDF, 3 HTML, 1 DOCX` (None: every file pmd could read was read)."""
        if not self.not_read:
            return None
        total = sum(self.not_read.values())
        counts = sorted(self.not_read.items(), key=lambda item: (-item[1], item[0]))
        listed = ", ".join(f"{n} {FORMAT_WORDS.get(fmt, fmt)}" for fmt, n in counts)
        return f"{total} file{'s' if total != 1 else ''} not read: {listed}"

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
            "not_read": dict(self.not_read),
            "formats_to_include": list(self.formats_to_include),
            "elapsed_seconds": round(self.elapsed, 3),
        }


def formats_to_include(mask: str, not_read: dict[str, int]) -> list[str]:
    """The formats a collection reads now (its mask's, when it is a formats mask) and those of the
    files it did not read: the `--formats` that reads them too."""
    formats = ["md", *(formats_of_mask(mask) or [])]
    formats += sorted(fmt for fmt in not_read if fmt not in formats)
    return formats


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


ROOT_NOW_A_LINK = "the collection folder is now reached through a symbolic link"


def collection_root_moved(collection: Collection) -> bool:
    """Is the stored (fully resolved) root now a link, or reached through one?

    Roots are stored resolved; resolving them again on every scan would follow a folder
    later replaced by a link to wherever it points.
    """
    root = collection.root_path
    return os.path.islink(root) or os.path.realpath(root) != os.path.normpath(root)


def _nested(collection: Collection) -> dict[str, Collection]:
    real_root = os.path.realpath(collection.root_path)
    inner = {}
    for other in Collection.objects.exclude(pk=collection.pk).only("name", "root_path", "mask", "ignore_patterns"):
        folder = os.path.realpath(other.root_path)
        if folder != real_root and _inside(folder, real_root):
            inner[folder] = other
    return inner


def _around(collection: Collection) -> dict[str, Selection]:
    """Resolved folder → selection of the other collections whose folder holds this one's."""
    real_root = os.path.realpath(collection.root_path)
    outer = {}
    for other in Collection.objects.exclude(pk=collection.pk).only("root_path", "mask", "ignore_patterns"):
        folder = os.path.realpath(other.root_path)
        if folder != real_root and _inside(real_root, folder):
            outer[folder] = Selection.of(other)
    return outer


def nested_collections(collection: Collection) -> dict[str, str]:
    """Resolved folder → name of the other collections inside this one's folder: the files they
    read belong to them (hits and tag counts are not doubled), so this collection skips those, and
    reads the others there as anywhere (a markdown-only collection inside one that reads PDFs
    leaves its PDFs to the one around it: no file is indexed nowhere)."""
    return {folder: other.name for folder, other in _nested(collection).items()}


def collection_files(
    collection: Collection, issues: list[FileIssue], not_read: dict[str, int] | None = None
) -> Iterator[tuple[str, str]]:
    """(relative path, resolved absolute path) of every file the collection's mask selects;
    `not_read` counts, by format, the files pmd could read that the mask leaves out.

    Symbolic links are followed only while they stay inside the collection folder: a link
    out of it (`x.md -> /etc/passwd`, `all -> /`) is recorded as a problem and never read,
    whoever planted it (a `git pull` included). Each folder is walked once, under its own
    path when it has one (links to folders come last), so loops end and a linked folder is
    not indexed twice. The path yielded is the resolved one: reading it follows no link.
    """
    root = Path(collection.root_path)
    if not root.is_dir():
        raise errors.CollectionPathMissing(
            f"collection '{collection.name}': folder {root} does not exist or is not a directory"
        )
    real_root = os.path.realpath(root)
    if collection_root_moved(collection):  # stored resolved: a link now on the way leads elsewhere
        issues.append(FileIssue(".", f"{ROOT_NOW_A_LINK}: not indexed", "error"))
        return
    refusal = collection_folder_refusal(Path(real_root))
    if refusal:  # stored before the rule existed, or by hand: nothing in it is read
        issues.append(FileIssue(".", f"{refusal}: not indexed", "error"))
        return
    pseudo_mounts = pseudo_mount_points()
    nested = {folder: (other.name, Selection.of(other)) for folder, other in _nested(collection).items()}
    selection = Selection.of(collection)

    around = _around(collection) if not_read is not None else {}

    def read_around(target: str) -> bool:
        """Whether a collection whose folder holds this one reads the file (then it is not left out)."""
        return any(outer.selects(os.path.relpath(target, folder)) for folder, outer in around.items())

    def claimed(target: str) -> bool:
        """Whether a collection nested in this one reads the file (then it is indexed there only)."""
        return any(
            _inside(target, folder) and inner.selects(os.path.relpath(target, folder))
            for folder, (_, inner) in nested.items()
        )

    walked: dict[tuple[int, int], str] = {}  # folder identity → where it was walked
    linked: list[tuple[str, str]] = []  # (relative path, resolved target) of links to folders

    def outside(rel: str) -> None:
        issues.append(FileIssue(rel, "points outside the collection: skipped"))

    def walk(top_rel: str, top_real: str) -> Iterator[tuple[str, str]]:
        stack = [(top_rel, top_real)]
        while stack:
            rel_dir, real_dir = stack.pop()
            try:
                st = os.stat(real_dir)
                key = (st.st_dev, st.st_ino)
                if key in walked:
                    first = walked[key]
                    loop = first == "" or rel_dir.startswith(first + "/")
                    issues.append(
                        FileIssue(
                            rel_dir or ".",
                            "symlink loop: folder already visited, skipped"
                            if loop
                            else f"same folder as {first}: skipped",
                        )
                    )
                    continue
                walked[key] = rel_dir
                with os.scandir(real_dir) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as err:
                issues.append(FileIssue(rel_dir or ".", f"cannot read folder: {err.strerror}", "error"))
                continue
            subdirs = []
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if unstorable_reason(name):  # bytes that are not UTF-8 arrive as lone surrogates
                    issues.append(FileIssue(_printable(rel), "the file name is not valid UTF-8: skipped"))
                    continue
                path = os.path.join(real_dir, name)
                try:
                    is_link, is_dir = entry.is_symlink(), entry.is_dir()
                except OSError:
                    is_link, is_dir = False, False
                if is_dir:
                    if selection.folder_skipped(rel):
                        continue
                    target = os.path.realpath(path) if is_link else path
                    if not _inside(target, real_root):
                        outside(rel)
                    elif target in pseudo_mounts:
                        issues.append(FileIssue(rel, "a pseudo file system (like /proc) is mounted here: skipped"))
                    else:
                        if target in nested:  # a note is indexed once: by the collection nearest to it
                            issues.append(
                                FileIssue(
                                    rel,
                                    f"the folder of collection {nested[target][0]}: the files it reads are "
                                    "indexed there, the others here",
                                )
                            )
                        (linked if is_link else subdirs).append((rel, target))
                    continue
                target = os.path.realpath(path) if is_link else path
                if not selection.file_selected(rel):
                    if not_read is not None and not (selection.ignore and selection.ignored(rel)):
                        fmt = known_format(name)
                        if (
                            fmt
                            and _inside(target, real_root)
                            and not (nested and claimed(target))
                            and not (around and read_around(target))
                        ):
                            not_read[fmt] = not_read.get(fmt, 0) + 1
                    continue
                if not _inside(target, real_root):
                    outside(rel)
                    continue
                if nested and claimed(target):
                    continue
                yield rel, target
            stack.extend(reversed(subdirs))

    yield from walk("", real_root)
    while linked:
        yield from walk(*linked.pop(0))


def _printable(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def collection_file_open(collection: Collection, path: str):
    """Open for reading (binary) a file `collection_files` yielded, if it is still inside the collection.

    Between the walk and the read a folder on the way could be swapped for a link: the last
    component is opened without following links, and where the opened file really lies is
    asked of the open descriptor, which no later rename can change.
    """
    root = os.path.normpath(collection.root_path)  # stored resolved: not resolved again
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "became a symbolic link during the scan: skipped", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # no /proc: the file at the resolved path must be the one we opened
            where = os.path.realpath(path)
            again = os.stat(where)
            if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
                raise OSError(errno.EXDEV, "changed during the scan: skipped", path) from None
        if not _inside(where, root):
            raise OSError(errno.EXDEV, "points outside the collection: skipped", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


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
    scan = _Scan(collection, progress=progress, limit=max_file_bytes or settings.PMD_MAX_FILE_BYTES)
    total = len(scan.files)
    for done, (rel, abspath) in enumerate(scan.files, start=1):
        if progress and (done % 50 == 0 or done == total):
            progress(done, total, rel)
        scan.file(done, rel, abspath)
    scan.converter.close()
    scan.finish()
    scan.report.elapsed = time.perf_counter() - started
    return scan.report


class _Known(NamedTuple):
    """What the index holds of a file from an earlier scan."""

    pk: int
    mtime: float
    size: int
    content_id: str
    active: bool
    date_source: str
    extraction_key: str


class _Scan:
    """One scan of a collection's folder: each file compared with what the index holds of it, read,
    converted and parsed only when it changed, and written in batches."""

    def __init__(self, collection: Collection, *, progress: ProgressCallback | None, limit: int):
        self.collection = collection
        self.limit = limit
        self.report = ScanReport(collection=collection.name)
        self.files = list(collection_files(collection, self.report.issues, self.report.not_read))
        if self.report.not_read:
            self.report.formats_to_include = formats_to_include(collection.mask, self.report.not_read)
        self.existing: dict[str, _Known] = {
            row[1]: _Known(row[0], *row[2:])
            for row in Document.objects.filter(collection=collection).values_list(
                "id", "path", "mtime", "size", "content_id", "active", "date_source", "extraction_key"
            )
        }
        self.seen: set[str] = set()
        self.batch = _Batch(collection)
        # Notes read by another pmd, or with another title setting: each is read again, changed or not.
        self.reading = note_reading(collection.title_from)
        self.reread = collection.reading != self.reading
        self.converting = _ConvertingProgress(progress, len(self.files))
        # started by the first file that is not markdown; reports the page a long file is on
        self.converter = Converter(convert_limits(), on_units=self.converting.units if progress else None)

    def file(self, done: int, rel: str, abspath: str) -> None:
        """One file of the folder: unchanged, reactivated, added, updated, or an issue of the report."""
        known = self.existing.get(rel)
        st = self._stat(rel, abspath, known)
        if st is None:
            return
        self.seen.add(rel)
        if known and not self.reread and known.mtime == st.st_mtime and known.size == st.st_size:
            self._unchanged(known)
            return
        read = self._read(done, rel, abspath, st, known)
        if read is None:
            return
        raw, extraction_key = read
        try:
            parsed = parse_markdown(raw, rel, title_from=self.collection.title_from)
        except BinaryFile as exc:
            self.report.skipped += 1
            self.report.issues.append(FileIssue(rel, str(exc)))
            if known:
                self.seen.discard(rel)  # it is no longer a markdown document
            return
        except Exception as exc:  # noqa: BLE001 - MemoryError, RecursionError…: this note only, never the collection
            self.report.issues.append(_unparsable(rel, exc))
            return
        for warning in parsed.warnings:
            self.report.issues.append(FileIssue(rel, warning))
        if known and not self.reread and known.content_id == parsed.hash:
            self.batch.touch(
                known.pk,
                rel,
                st.st_mtime,
                st.st_size,
                reactivate=not known.active,
                dated_by_mtime=known.date_source == DATE_MTIME,
                extraction_key=extraction_key,
            )
            self._unchanged(known, touched=True)
            return
        self._store(rel, parsed, st, known, extraction_key)

    def _stat(self, rel: str, abspath: str, known: _Known | None) -> os.stat_result | None:
        """The file's stat, None for a file gone, unreadable or not a regular file."""
        try:
            st = os.stat(abspath)
        except FileNotFoundError:
            self.report.issues.append(FileIssue(rel, "vanished during the scan"))
            return None
        except OSError as exc:
            self.report.issues.append(FileIssue(rel, f"cannot stat: {exc.strerror}", "error"))
            if known:
                self.seen.add(rel)  # keep what we have rather than hide it
            return None
        return st if stat_module.S_ISREG(st.st_mode) else None

    def _unchanged(self, known: _Known, *, touched: bool = False) -> None:
        if known.active:
            self.report.unchanged += 1
        else:
            if not touched:
                self.batch.reactivate.append(known.pk)
            self.report.reactivated += 1

    def _read(
        self, done: int, rel: str, abspath: str, st: os.stat_result, known: _Known | None
    ) -> tuple[bytes, str] | None:
        """The file's text as bytes (converted for PDF, DOCX, …) and its conversion's key; None when
        it is over its size limit, cannot be read or cannot be converted."""
        converted = is_converted(rel)
        file_limit = settings.PMD_CONVERT_MAX_FILE_BYTES if converted else self.limit
        if st.st_size > file_limit:
            self.report.skipped += 1
            self.report.issues.append(
                FileIssue(
                    rel,
                    f"{st.st_size:,} bytes is over the {file_limit:,}-byte limit "
                    f"({'PMD_CONVERT_MAX_FILE_BYTES' if converted else 'PMD_MAX_FILE_BYTES'}): skipped",
                )
            )
            return None
        try:
            with collection_file_open(self.collection, abspath) as handle:
                raw = handle.read(file_limit + 1)
        except FileNotFoundError:
            self.seen.discard(rel)
            self.report.issues.append(FileIssue(rel, "vanished during the scan"))
            return None
        except OSError as exc:
            self.report.issues.append(FileIssue(rel, f"cannot read: {exc.strerror}", "error"))
            return None
        if not converted:
            return raw, ""
        # PDF, DOCX, …: its text, converted once per content (indexing.convert)
        self.converting.file(done, rel, announce=st.st_size > CONVERT_PROGRESS_BYTES)
        try:
            extracted = file_text_extract(data=raw, fmt=format_of(rel), converter=self.converter)
        except ConversionRefused as exc:
            self.report.skipped += 1
            self.report.issues.append(FileIssue(rel, f"{exc}: skipped", "error"))
            if known:
                self.seen.discard(rel)  # what was indexed of it is no longer its text
            return None
        self.report.issues += [FileIssue(rel, warning) for warning in extracted.warnings]
        return extracted.text.encode("utf-8", "surrogatepass"), extracted.key

    def _store(self, rel: str, parsed, st: os.stat_result, known: _Known | None, extraction_key: str) -> None:
        """A new or changed note into the batch, with its structure (tags, date, links)."""
        try:
            structure = note_structure(parsed.body, parsed.frontmatter, rel, st.st_mtime)
        except Exception as exc:  # noqa: BLE001 - as for parsing: this note only; what was indexed of it stays
            self.report.issues.append(_unparsable(rel, exc))
            return
        self.report.issues += [FileIssue(rel, warning) for warning in structure.warnings]
        self.batch.put(
            known.pk if known else None, rel, parsed, structure, parsed.hash, st.st_mtime, st.st_size, extraction_key
        )
        if known and not known.active:
            self.batch.link_scope.named.add(known.pk)  # back again: its names with it
        if known:
            self.report.updated += 1
        else:
            self.report.added += 1
        if self.batch.size >= FLUSH_EVERY:
            self.batch.flush(self.report)

    def finish(self) -> None:
        """Notes whose files are gone deactivated, the last batch written, the keyword index and
        unused conversions brought in line."""
        collection, report, batch = self.collection, self.report, self.batch
        missing = [known.pk for path, known in self.existing.items() if known.active and path not in self.seen]
        batch.deactivate = missing
        # The conversions of files that changed or went away: deleted below unless another document reads them.
        unused = {
            known.extraction_key
            for path, known in self.existing.items()
            if known.extraction_key and (path not in self.seen or path in batch.read_again)
        }
        report.removed = len(missing)
        transcluding = Collection.objects.filter(pk=collection.pk, transclude=True).exists()  # as stored now
        embedding_missing = _embedders(collection, missing) if transcluding else []  # before their links move
        batch.flush(report, final=True)
        if self.reread:
            Collection.objects.filter(pk=collection.pk).update(reading=self.reading)
            collection.reading = self.reading
        changed = report.changed_document_ids
        if transcluding:
            changed = changed + embedding_missing + _embedders(collection, changed)
        keyword_index_update(changed_document_ids=changed, removed_document_ids=report.removed_document_ids)
        if unused:
            extractions_prune(keys=unused)


class _ConvertingProgress:
    """ "converting report.pdf (3 of 40 files, 120 of 800 pages)": the scan's progress while a
    long file is converted, from the page progress of the converting child."""

    def __init__(self, progress: ProgressCallback | None, total: int):
        self.progress, self.total = progress, total
        self.done, self.rel = 0, ""

    def file(self, done: int, rel: str, *, announce: bool) -> None:
        self.done, self.rel = done, rel
        if self.progress and announce:
            self.progress(done, self.total, f"converting {rel} ({done} of {self.total} files)")

    def units(self, read: int, units: int) -> None:
        if self.progress:
            unit = UNIT_NAMES.get(format_of(self.rel), "page")
            self.progress(
                self.done,
                self.total,
                f"converting {self.rel} ({self.done} of {self.total} files, {read} of {units} {unit}s)",
            )


def _embedders(collection: Collection, document_ids: list[int]) -> list[int]:
    """Active notes that embed one of `document_ids`: their keyword passages hold its words."""
    if not document_ids:
        return []
    return list(
        DocumentLink.objects.filter(
            source__collection=collection, source__active=True, kind=DocumentLink.Kind.EMBED, target_id__in=document_ids
        )
        .values_list("source_id", flat=True)
        .distinct()
    )


def _unparsable(rel: str, exc: Exception) -> FileIssue:
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    return FileIssue(
        rel, f"could not be read as a note ({type(exc).__name__}{': ' + detail if detail else ''}): skipped", "error"
    )


class _Batch:
    """Collects writes so a scan costs a handful of statements per few hundred files."""

    def __init__(self, collection: Collection):
        self.collection = collection
        # Links are written with the target they resolve to among the notes written so far, so the
        # final resolution of the collection changes few rows.
        self.names: NoteNames | None = None
        self.contents: dict[str, Content] = {}
        self.new_docs: list[Document] = []
        self.changed_docs: list[Document] = []
        self.touched: list[Document] = []
        self.touched_dated: list[Document] = []  # unchanged content, but its date is the mtime
        self.links: list[tuple[Document, list[Link]]] = []
        self.reactivate: list[int] = []
        self.deactivate: list[int] = []
        self.link_scope = LinkScope()  # what the final link resolution has to look at
        self.read_again: set[str] = set()  # paths written again: their old conversion may be unused now
        self._problems_cleared = False

    @property
    def size(self) -> int:
        return len(self.new_docs) + len(self.changed_docs) + len(self.touched) + len(self.touched_dated)

    def touch(
        self,
        pk: int,
        rel: str,
        mtime: float,
        size: int,
        *,
        reactivate: bool,
        dated_by_mtime: bool,
        extraction_key: str = "",
    ) -> None:
        self.read_again.add(rel)
        if dated_by_mtime:
            when, source = note_date({}, rel, mtime)  # a date in the name wins over the mtime
            self.touched_dated.append(
                Document(
                    id=pk,
                    mtime=mtime,
                    size=size,
                    active=True,
                    note_date=when,
                    date_source=source,
                    extraction_key=extraction_key,
                )
            )
        else:
            self.touched.append(Document(id=pk, mtime=mtime, size=size, active=True, extraction_key=extraction_key))
        if reactivate:
            self.reactivate.append(pk)

    def put(self, pk, rel, parsed, structure: NoteStructure, digest, mtime, size, extraction_key: str = "") -> None:
        self.read_again.add(rel)
        if digest not in self.contents:
            self.contents[digest] = Content(
                hash=digest, body=parsed.body, size=len(parsed.body.encode("utf-8", "surrogatepass"))
            )
        doc = Document(
            id=pk,
            collection=self.collection,
            path=rel,
            title=parsed.title,
            content_id=digest,
            docid=digest[:6],
            active=True,
            mtime=mtime,
            size=size,
            frontmatter=parsed.frontmatter,
            tags=structure.tags,
            note_date=structure.date,
            date_source=structure.date_source,
            extraction_key=extraction_key,
        )
        (self.changed_docs if pk else self.new_docs).append(doc)
        self.links.append((doc, structure.links))

    def _note_renamed(self, docs: list[Document]) -> None:
        """Changed notes: their links are rewritten; those whose title or aliases changed also
        change which links name them."""
        self.link_scope.sources.update(d.id for d in docs)
        before = {
            pk: frontmatter_names({k: v for k, v in (("title", t), ("aliases", a), ("alias", al)) if v is not None})
            for pk, t, a, al in Document.objects.filter(pk__in=[d.id for d in docs]).values_list(
                "pk", "frontmatter__title", "frontmatter__aliases", "frontmatter__alias"
            )
        }
        for doc in docs:
            fm = doc.frontmatter if isinstance(doc.frontmatter, dict) else {}
            now = frontmatter_names({k: fm[k] for k in ("title", "aliases", "alias") if fm.get(k) is not None})
            if before.get(doc.id) != now:
                self.link_scope.named.add(doc.id)

    def _store_links(self) -> None:
        """The links of the documents this flush wrote (after them), resolved among the notes written so far:
        the active notes the scan started with and the documents of this flush and the earlier ones."""
        if self.names is not None:
            for doc, _ in self.links:
                fm = doc.frontmatter if isinstance(doc.frontmatter, dict) else {}
                self.names.add(doc.id, doc.path, fm.get("title"), fm.get("aliases"), fm.get("alias"))
        with_links = [(doc, links) for doc, links in self.links if links]
        names = self.names
        if with_links and names is None:  # read after this flush's documents were written
            targets = {link.target for _, links in with_links for link in links}
            if len(targets) <= FEW_TARGETS:  # an edit: the notes its links could name, not all of them
                names = NoteNames.for_targets(self.collection.pk, targets)
            else:
                names = self.names = NoteNames.of(self.collection.pk)
        links_store(
            [(doc.id, links) for doc, links in with_links],
            replace=[d.id for d in self.changed_docs],
            names=names,
            paths={doc.id: doc.path for doc, _ in with_links},
        )

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
                self.link_scope.named.update(d.id for d in created)
            if self.changed_docs:
                self._note_renamed(self.changed_docs)
                for doc in self.changed_docs:
                    doc.updated_at = now
                Document.objects.bulk_update(
                    self.changed_docs,
                    [
                        "title",
                        "content",
                        "docid",
                        "active",
                        "mtime",
                        "size",
                        "frontmatter",
                        "tags",
                        "note_date",
                        "date_source",
                        "extraction_key",
                        "updated_at",
                    ],
                    batch_size=500,
                )
                report.changed_document_ids.extend(d.id for d in self.changed_docs)
            if self.links:
                self._store_links()
            if self.touched:
                Document.objects.bulk_update(
                    self.touched, ["mtime", "size", "active", "extraction_key"], batch_size=500
                )
            if self.touched_dated:
                Document.objects.bulk_update(
                    self.touched_dated,
                    ["mtime", "size", "active", "note_date", "date_source", "extraction_key"],
                    batch_size=500,
                )
            if final:
                if self.reactivate:
                    Document.objects.filter(id__in=self.reactivate).update(active=True, updated_at=now)
                    report.changed_document_ids.extend(self.reactivate)
                if self.deactivate:
                    Document.objects.filter(id__in=self.deactivate).update(active=False, updated_at=now)
                    report.removed_document_ids.extend(self.deactivate)
                # Links resolve within the collection: those this scan's changes can have moved are
                # resolved again (LinkScope). Without a change the problems are those of the last scan.
                if report.added or report.updated or report.removed or report.reactivated:
                    self.link_scope.named.update(self.reactivate)
                    self.link_scope.named.update(self.deactivate)
                    link_issues = links_resolve(self.collection, scope=self.link_scope, names=self.names).problems
                else:
                    link_issues = list(
                        FileProblem.objects.filter(
                            collection=self.collection,
                            message__startswith=LINK_PROBLEM_PREFIX,
                        )
                        .order_by("path", "id")
                        .values_list("path", "message")
                    )
                report.issues += [FileIssue(path, message) for path, message in link_issues]
                known = set(FileProblem.objects.filter(collection=self.collection).values_list("path", "message"))
                for issue in report.issues:
                    issue.known = (issue.path, issue.message[:2000]) in known
                FileProblem.objects.filter(collection=self.collection).delete()
                FileProblem.objects.bulk_create(
                    [
                        FileProblem(
                            collection=self.collection, path=i.path, severity=i.severity, message=i.message[:2000]
                        )
                        for i in report.issues
                    ],
                    batch_size=500,
                )
                Collection.objects.filter(pk=self.collection.pk).update(last_indexed_at=now)
        self.contents, self.new_docs, self.changed_docs, self.touched = {}, [], [], []
        self.touched_dated, self.links = [], []
