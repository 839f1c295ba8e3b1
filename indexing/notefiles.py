"""A note's file on disk, reached and replaced without ever leaving its collection's folder.

Every folder on the way is opened relative to the one above it with O_NOFOLLOW, from the
collection's (resolved) root down: a symbolic link anywhere on the path is refused, not followed,
even one planted between a check and a write. A note is replaced atomically (a temporary file
beside it, fsync, rename) keeping its mode, and owned like the file it replaces (or the folder, for
a new one) when pmd runs as root. Nothing here knows who asks: indexing.services.notes decides that.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from indexing import errors
from indexing.text import content_hash, decode

TRASH = ".trash"  # Obsidian's trash folder; pmd skips dot folders, so neither indexes it
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_MAX_NAME_BYTES = 255
_MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class NoteFile:
    """What a note's file holds now: its text, the hash pmd indexes it by, and its mode."""

    text: str
    hash: str
    mode: int


def split_note_path(path: str, *, allow_trash: bool = False) -> list[str]:
    """The parts of a path relative to a collection, refused when it could lead anywhere else: empty,
    absolute, with a backslash, `.`/`..` or any part starting with a dot (`.git`, `.obsidian`)."""
    text = path.strip() if isinstance(path, str) else ""
    if not text:
        raise errors.NotePathRefused("a note needs a path inside its collection, e.g. meetings/2026-01-05.md")
    if len(text) > _MAX_PATH_CHARS:
        raise errors.NotePathRefused(f"a note's path has at most {_MAX_PATH_CHARS} characters")
    if text.startswith("/") or "\\" in text or "\x00" in text:
        raise errors.NotePathRefused(f"'{text}' is not a path inside the collection: use a relative path with '/'")
    parts = text.split("/")
    for i, part in enumerate(parts):
        if part == "" or part.strip() != part:
            raise errors.NotePathRefused(f"'{text}' has an empty part or one that starts or ends with a space")
        if part.startswith(".") and not (allow_trash and i == 0 and part == TRASH and len(parts) > 1):
            raise errors.NotePathRefused(
                f"'{text}': '{part}' is a hidden name ('..', '.git', '.obsidian' …): notes are not written there"
            )
        if len(part.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
            raise errors.NotePathRefused(f"'{text}': a name has at most {_MAX_NAME_BYTES} bytes")
    return parts


def _refused_link(path: str) -> errors.NotePathRefused:
    return errors.NotePathRefused(f"'{path}' goes through a symbolic link or something that is not a folder")


@contextmanager
def note_folder(root: str, parts: list[str], *, create: bool) -> Iterator[int]:
    """A descriptor of the folder holding the note at `parts` (its last part is the file), opened
    part by part without following links; missing folders are made with `create` (owned like the
    folder above them when pmd runs as root), else the note is not found."""
    path = "/".join(parts)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise errors.CollectionPathMissing(f"the collection's folder {root} cannot be opened: {exc.strerror}") from None
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise errors.NoteNotFound(f"no note at '{path}'") from None
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                _own_like(inner, os.fstat(fd))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refused_link(path) from None
                raise
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _own_like(fd: int, model: os.stat_result) -> None:
    """As root, give what pmd made the owner of `model` (a folder's files stay its owner's)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.fchown(fd, model.st_uid, model.st_gid)


def note_read(folder: int, name: str, path: str) -> NoteFile | None:
    """The note `name` in `folder` as pmd indexes it; None when there is none."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused_link(path) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat_module.S_ISREG(st.st_mode):
            raise errors.NotePathRefused(f"'{path}' is not a regular file")
        raw = handle.read()
    text, _ = decode(raw)
    return NoteFile(text=text, hash=content_hash(text), mode=stat_module.S_IMODE(st.st_mode))


def note_replace(folder: int, name: str, text: str, *, mode: int | None, expected: str | None) -> str:
    """Write `text` as the note `name` in `folder` atomically; returns its hash. `mode` is the mode of
    the file it replaces (kept), None for a new note (the umask's). `expected` is the hash of the
    version read (None: there was none): checked again just before the rename, so an edit made
    meanwhile in an editor (which takes no lock of pmd's) is refused, not overwritten."""
    data = text.encode("utf-8", "surrogatepass")
    temporary = f".{name[:200]}.{uuid.uuid4().hex}.pmd-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(temporary, flags, 0o666, dir_fd=folder)
    try:
        try:
            old = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and not stat_module.S_ISREG(old.st_mode):
            raise errors.NotePathRefused(f"'{name}' is not a regular file")
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(fd)
        if mode is not None:
            os.fchmod(fd, mode)
        _own_like(fd, old if old is not None else os.fstat(folder))
        os.close(fd)
        fd = -1
        now = note_read(folder, name, name)
        if (now.hash if now else None) != expected:
            if now is None:
                raise errors.NoteNotFound(f"'{name}' was removed while it was written")
            if expected is None:
                raise errors.NoteExists(f"'{name}' was created meanwhile (its hash is {now.hash})")
            raise errors.NoteChanged(
                f"'{name}' changed while it was written (its hash is now {now.hash}): read it again",
                current_hash=now.hash,
            )
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temporary, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise
    os.fsync(folder)
    return content_hash(text)


def note_move(source: int, source_name: str, target: int, target_name: str, target_path: str) -> None:
    """Move a note between folders, never over another file: a hard link that fails when the target
    exists, then the old name removed (a rename after a check where links are not possible)."""
    try:
        os.link(source_name, target_name, src_dir_fd=source, dst_dir_fd=target, follow_symlinks=False)
    except FileExistsError:
        raise errors.NoteExists(f"'{target_path}' already exists") from None
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
            raise
        try:
            os.stat(target_name, dir_fd=target, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(source_name, target_name, src_dir_fd=source, dst_dir_fd=target)
        else:
            raise errors.NoteExists(f"'{target_path}' already exists") from None
    else:
        os.unlink(source_name, dir_fd=source)
    os.fsync(target)
    if source != target:
        os.fsync(source)


def note_exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
