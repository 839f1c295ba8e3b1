"""Writing notes: the one service behind the MCP write tools and /api/notes.

Allowed, not assumed: only in a collection made writable, by whom `writable_collections` lets
write there. Safe on disk: paths stay inside the collection and its mask (indexing.notefiles), one
writer per note at a time (an advisory lock on the note), and an edit names the version it was based
on: a note changed since (by a person in their editor, another agent) is refused with its current
hash, never overwritten. Attributed and reversible: every change is in the audit trail, committed as
its author in a collection that is a git work tree (never pushed), and a deleted note goes to the
collection's `.trash/`, from where it is restored. Searchable at once: the collection is scanned
before the call returns, and the embedding of what changed is asked for.
"""

from __future__ import annotations

import getpass
import logging
import zlib
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.conf import settings

from indexing import errors
from indexing.access import Access, collection_writable, visible_collections
from indexing.convert import is_converted
from indexing.git import git_run
from indexing.locks import advisory_lock
from indexing.models import Collection, Document
from indexing.noteedits import NoteEdit, edit_apply
from indexing.notefiles import (
    TRASH,
    NoteFile,
    note_exists,
    note_folder,
    note_move,
    note_read,
    note_replace,
    split_note_path,
)
from indexing.paths import Selection
from indexing.services.audit import audit_record
from indexing.services.background import embedding_request
from indexing.services.history import GitFailed, history_index, repository_of
from indexing.services.scanning import collection_index, collection_root_moved, nested_collections

log = logging.getLogger("pmd.notes")

_NOTE_LOCKS = 0x706D6E  # "pmn": the second key is a note's (collection, path)
MIN_HASH_PREFIX = 6  # a docid: the shortest version name an edit may give


@dataclass
class NoteChange:
    """What one write did: where the note is now, its hashes before and after, the commit made."""

    action: str
    collection: str
    path: str
    old_hash: str = ""
    new_hash: str = ""
    old_path: str = ""
    trash_path: str = ""
    commit: str = ""
    indexed: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"pmd://{self.collection}/{self.path}"

    @property
    def docid(self) -> str:
        return self.new_hash[:6]

    def as_dict(self) -> dict:
        return {
            "action": self.action,
            "collection": self.collection,
            "path": self.path,
            "uri": self.uri,
            "docid": self.docid,
            "old_hash": self.old_hash,
            "new_hash": self.new_hash,
            "old_path": self.old_path,
            "trash_path": self.trash_path,
            "commit": self.commit,
            "indexed": self.indexed,
            "warnings": list(self.warnings),
        }


# --- the entry points --------------------------------------------------------------------------


def note_write(
    *,
    access: Access,
    collection: str,
    path: str,
    content: str,
    replace: bool = False,
    base_hash: str | None = None,
    message: str = "",
) -> NoteChange:
    """Create a note; an existing one is refused unless `replace` (and then, with `base_hash`, only
    the version named)."""
    target = _Target.of(access, collection, path)
    _refuse_unwritable(content)
    with target.locked():
        with note_folder(target.root, target.parts, create=True) as folder:
            current = note_read(folder, target.name, target.path)
            if current is not None and not replace:
                raise errors.NoteExists(
                    f"'{target.path}' already exists in '{target.collection.name}': edit it, or replace it "
                    f"naming the version read (its hash is {current.hash})"
                )
            if current is not None and base_hash:
                _refuse_stale(current, base_hash, target)
            new_hash = note_replace(
                folder,
                target.name,
                content,
                mode=current.mode if current else None,
                expected=current.hash if current else None,
            )
        change = NoteChange(
            "note.replace" if current else "note.create",
            target.collection.name,
            target.path,
            old_hash=current.hash if current else "",
            new_hash=new_hash,
        )
        return _after(access, target, change, message or f"{'Replace' if current else 'Add'} {target.path}")


def note_edit(*, access: Access, note: str, base_hash: str, edit: NoteEdit, message: str = "") -> NoteChange:
    """Change part of a note (see indexing.noteedits), based on the version whose hash the caller read."""
    collection, path = note_reference(note, access)
    target = _Target.of(access, collection, path)
    if not base_hash:
        raise errors.InvalidRequest("an edit names the hash of the version it is based on (from reading the note)")
    with target.locked():
        with note_folder(target.root, target.parts, create=False) as folder:
            current = _existing(note_read(folder, target.name, target.path), target)
            _refuse_stale(current, base_hash, target)
            text = edit_apply(current.text, edit)
            _refuse_unwritable(text)
            if text == current.text:
                return NoteChange("note.edit", collection, target.path, current.hash, current.hash)
            new_hash = note_replace(folder, target.name, text, mode=current.mode, expected=current.hash)
        change = NoteChange("note.edit", target.collection.name, target.path, current.hash, new_hash)
        return _after(access, target, change, message or f"Edit {target.path} ({edit.operation})")


def note_move_to(
    *, access: Access, collection: str, path: str, new_path: str, base_hash: str | None = None, message: str = ""
) -> NoteChange:
    """Move or rename a note inside its collection (never over another)."""
    source = _Target.of(access, collection, path)
    target = _Target.of(access, collection, new_path, checked=source.collection)
    if source.path == target.path:
        raise errors.InvalidRequest("the new path is the note's path")
    with source.locked(target):
        current = _moved(source, target, base_hash)
        change = NoteChange(
            "note.move", source.collection.name, target.path, current.hash, current.hash, old_path=source.path
        )
        return _after(access, target, change, message or f"Move {source.path} to {target.path}")


def note_delete(
    *, access: Access, collection: str, path: str, base_hash: str | None = None, message: str = ""
) -> NoteChange:
    """Move a note to the collection's `.trash/` folder (Obsidian's), which no search reads;
    `note_restore` brings it back."""
    source = _Target.of(access, collection, path)
    trash_path = _free_trash_path(source)
    trash = _Target(source.collection, trash_path, split_note_path(trash_path, allow_trash=True))
    with source.locked(trash):
        current = _moved(source, trash, base_hash)
        change = NoteChange("note.delete", source.collection.name, source.path, current.hash, "", trash_path=trash_path)
        return _after(access, source, change, message or f"Delete {source.path} (kept in {trash_path})")


def note_restore(
    *, access: Access, collection: str, trash_path: str, path: str | None = None, message: str = ""
) -> NoteChange:
    """Bring a note back from the trash, to `path` or to where it was deleted from."""
    owner = collection_writable(collection, access)
    parts = split_note_path(trash_path, allow_trash=True)
    if parts[0] != TRASH:
        raise errors.NotePathRefused(f"'{trash_path}' is not in the collection's {TRASH}/ folder")
    trash = _Target(owner, "/".join(parts), parts)
    target = _Target.of(access, collection, path or _original_path(parts[1:]), checked=owner)
    with trash.locked(target):
        current = _moved(trash, target, None)
        change = NoteChange(
            "note.restore", owner.name, target.path, "", current.hash, old_path=trash.path, trash_path=trash.path
        )
        return _after(access, target, change, message or f"Restore {target.path} from {trash.path}")


def note_reference(note: str, access: Access) -> tuple[str, str]:
    """(collection, path) of `pmd://collection/path`, `collection/path` or `#docid` (a docid among the
    notes the caller may write: one note only)."""
    text = (note or "").strip()
    if text.startswith("#"):
        docs = list(
            Document.objects.filter(
                docid=text[1:].lower(), active=True, collection__in=visible_collections(access)
            ).values_list("collection__name", "path")[:2]
        )
        if len(docs) != 1:
            raise errors.NoteNotFound(
                f"no note with docid {text}" if not docs else f"{text} names several notes: give pmd://collection/path"
            )
        return docs[0]
    collection, _, path = text.removeprefix("pmd://").partition("/")
    if not collection or not path:
        raise errors.NotePathRefused(f"'{text}' names no note: give pmd://collection/path")
    return collection, path


# --- how -----------------------------------------------------------------------------------------


@dataclass
class _Target:
    """A note's place: its collection (one the caller may write in) and its checked path."""

    collection: Collection
    path: str
    parts: list[str]

    @classmethod
    def of(cls, access: Access, collection: str, path: str, *, checked: Collection | None = None) -> _Target:
        owner = checked or collection_writable(collection, access)
        parts = split_note_path(path)
        rel = "/".join(parts)
        selection = Selection.of(owner)
        if not selection.selects(rel):
            raise errors.NotePathRefused(
                f"'{rel}' is not a note of collection '{owner.name}': it is outside its mask ({owner.mask}) "
                "or in a folder it ignores"
            )
        if is_converted(rel):
            raise errors.NotePathRefused(f"'{rel}': pmd writes text notes, not files it converts (PDF, Word …)")
        for folder, name in nested_collections(owner).items():
            inner = PurePosixPath(folder).relative_to(owner.root_path).as_posix()
            if rel.startswith(inner + "/"):
                raise errors.NotePathRefused(f"'{rel}' is in the folder of collection '{name}': write it there")
        if collection_root_moved(owner):
            raise errors.NotePathRefused(f"the folder of collection '{owner.name}' is now reached through a link")
        return cls(owner, rel, parts)

    @property
    def root(self) -> str:
        return self.collection.root_path

    @property
    def name(self) -> str:
        return self.parts[-1]

    def lock_key(self) -> tuple[int, int]:
        return (_NOTE_LOCKS, zlib.crc32(f"{self.collection.pk}\x00{self.path}".encode()) % 2**31)

    def locked(self, *others: _Target) -> ExitStack:
        """The note's lock (and the others', in one order for everyone: no deadlock)."""
        stack = ExitStack()
        for key in sorted({t.lock_key() for t in (self, *others)}):
            stack.enter_context(advisory_lock(key=key))
        return stack


def _existing(current: NoteFile | None, target: _Target) -> NoteFile:
    if current is None:
        raise errors.NoteNotFound(f"no note at '{target.path}' in collection '{target.collection.name}'")
    return current


def _refuse_stale(current: NoteFile, base_hash: str, target: _Target) -> None:
    wanted = base_hash.strip().lower().lstrip("#")
    if len(wanted) < MIN_HASH_PREFIX or not current.hash.startswith(wanted):
        raise errors.NoteChanged(
            f"'{target.path}' changed since it was read (its hash is now {current.hash}): read it again, "
            "then edit that version",
            current_hash=current.hash,
        )


def _refuse_unwritable(text: str) -> None:
    """A note is text: no NUL byte (PostgreSQL stores none, so it could never be indexed) and no lone
    surrogate (not UTF-8); and no larger than PMD_NOTE_MAX_BYTES."""
    if "\x00" in text:
        raise errors.InvalidRequest("the note contains a NUL byte: a note is text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise errors.InvalidRequest(f"the note is not valid text (at character {exc.start:,})") from None
    size = len(text.encode("utf-8"))
    if size > settings.PMD_NOTE_MAX_BYTES:
        raise errors.NoteTooLarge(f"the note has {size:,} bytes, more than the {settings.PMD_NOTE_MAX_BYTES:,} allowed")


def _moved(source: _Target, target: _Target, base_hash: str | None) -> NoteFile:
    with note_folder(source.root, source.parts, create=False) as from_folder:
        current = _existing(note_read(from_folder, source.name, source.path), source)
        if base_hash:
            _refuse_stale(current, base_hash, source)
        with note_folder(target.root, target.parts, create=True) as to_folder:
            note_move(from_folder, source.name, to_folder, target.name, target.path)
    return current


def _free_trash_path(source: _Target) -> str:
    """`.trash/<path>`, or `.trash/<path> (2)…` when an earlier deletion holds that name."""
    stem, suffix = PurePosixPath(source.path).stem, PurePosixPath(source.path).suffix
    folder = PurePosixPath(source.path).parent
    for n in range(1, 1000):
        name = f"{stem}{suffix}" if n == 1 else f"{stem} ({n}){suffix}"
        candidate = str(PurePosixPath(TRASH) / folder / name)
        parts = candidate.split("/")
        try:
            with note_folder(source.root, parts, create=False) as folder_fd:
                if not note_exists(folder_fd, parts[-1]):
                    return candidate
        except errors.NoteNotFound:
            return candidate
    raise errors.Conflict(f"the trash holds too many deleted copies of '{source.path}': empty it first")


def _original_path(parts: list[str]) -> str:
    """Where a note in the trash came from: its path there without the ` (2)` of a later copy."""
    path = PurePosixPath(*parts)
    stem = path.stem
    if stem.endswith(")") and " (" in stem and stem.rsplit(" (", 1)[1][:-1].isdigit():
        stem = stem.rsplit(" (", 1)[0]
    return str(path.with_name(stem + path.suffix))


def _after(access: Access, target: _Target, change: NoteChange, message: str) -> NoteChange:
    """Attributed (audit, git commit), then searchable (scanned now, embedding asked for)."""
    change.commit = _commit(access, target.collection, change, message)
    audit_record(
        access,
        change.action,
        f"{change.collection}/{change.path}",
        collection=change.collection,
        path=change.path,
        old_path=change.old_path,
        trash_path=change.trash_path,
        token=access.token.prefix if access.token is not None else "",
        old_hash=change.old_hash,
        new_hash=change.new_hash,
        commit=change.commit,
    )
    _index(target.collection, change)
    return change


def _author(access: Access) -> tuple[str, str]:
    if access.local or access.user is None:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "pmd"
        return name, f"{name}@localhost"
    user = access.user
    name = (user.get_full_name() or user.get_username()).strip() or "pmd"
    email = (user.email or f"{user.get_username()}@pmd.invalid").strip()

    def clean(text: str) -> str:
        return "".join(c for c in text if c not in "<>\n\r\x00").strip() or "pmd"

    return clean(name), clean(email)


def _commit(access: Access, collection: Collection, change: NoteChange, message: str) -> str:
    """In a collection inside a git work tree: one commit of the paths changed, authored and
    committed as the caller, never pushed. A failure is logged: the note is written either way."""
    root = collection.root_path
    try:
        repo = repository_of(root)
    except GitFailed:
        return ""
    if repo is None:
        return ""
    paths = [p for p in (change.old_path, change.path) if p and not p.startswith(TRASH + "/")]
    name, email = _author(access)
    title = " ".join(message.split())[:200] or change.action
    via = f"through {access.label}" if not access.local else "through pmd"
    body = f"{title}\n\nWritten {via}."
    identity = ("-c", f"user.name={name}", "-c", f"user.email={email}", "-c", "commit.gpgsign=false")
    try:
        # a path git never knew and that is gone (a note written and deleted between commits): nothing to record
        paths = [path for path in paths if git_run(root, "add", "-A", "--", path).returncode == 0]
        if not paths:
            return ""
        staged = git_run(root, "diff", "--cached", "--quiet", "--", *paths)
        if staged.returncode == 0:
            return ""
        done = git_run(
            root, *identity, "commit", "-q", "--no-verify", "--author", f"{name} <{email}>", "-m", body, "--", *paths
        )
        if done.returncode != 0:
            log.warning("git commit in %s failed: %s", root, done.stderr.decode("utf-8", "replace").strip())
            return ""
        head = git_run(root, "rev-parse", "HEAD", text=True)
        return head.stdout.strip() if head.returncode == 0 else ""
    except OSError as exc:
        log.warning("git in %s failed: %s", root, exc)
        return ""


def _index(collection: Collection, change: NoteChange) -> None:
    """Scan the collection now (the note is in the keyword index when the call returns), read the
    new commit, and ask for the embedding of what changed."""
    report = collection_index(collection)
    change.warnings += [str(i) for i in report.issues if i.path in (change.path, change.old_path)]
    change.indexed = (
        not change.new_hash
        or Document.objects.filter(
            collection=collection, path=change.path, active=True, content_id=change.new_hash
        ).exists()
    )
    if change.commit:
        try:
            history_index(collection)
        except Exception:  # noqa: BLE001 - the history is a bonus; the note is written and indexed
            log.warning("reading the history of %s failed", collection.name, exc_info=True)
    if report.changed_document_ids:
        embedding_request(collection=collection, no_worker="queue")
