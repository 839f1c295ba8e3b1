"""Files of the embedded servers pmd manages (PostgreSQL, Redis): private directories, the lock that
serialises their start/stop, log tails, and the error a failed setup raises."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from indexing.errors import ServerSetupError

PG_PORT = 5432
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; leave room for ".s.PGSQL.5432"

# Written into $PMD_HOME when pmd creates it: only then may pmd set that folder's permissions.
HOME_MARKER = ".created-by-pmd"


def private_dir(path: Path, *, group: int | None = None, create_marker: bool = False) -> Path:
    """Create, or check, a folder that only pmd's user (and optionally one group) may enter.

    A folder pmd creates gets mode 0700, or 0710 with `group` (enter, not list: how the
    PostgreSQL server's user reaches its socket folder when pmd runs as root). An existing
    folder must be a real folder owned by pmd's user; with `create_marker` (for $PMD_HOME)
    its mode is only changed when pmd created it, never for a folder the user made.
    """
    path = Path(path)
    created = False
    if not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
            created = True
        except FileExistsError:
            pass
        if created and create_marker:
            (path / HOME_MARKER).write_text("this folder was created by pmd, which manages its permissions\n")
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ServerSetupError(
            f"{path} is not a real folder (a symbolic link or a file): pmd keeps its "
            "sockets and data only in folders it owns; remove it and try again"
        )
    if info.st_uid != os.geteuid():
        raise ServerSetupError(
            f"{path} belongs to another user (uid {info.st_uid}), not to pmd's user "
            f"(uid {os.geteuid()}): remove it, or set PMD_HOME to a folder of your own"
        )
    if create_marker and not created and not (path / HOME_MARKER).exists():
        return path  # the user's folder: used as it is
    mode = stat.S_IMODE(info.st_mode)
    if group is not None:
        if info.st_gid != group:
            os.chown(path, -1, group)
        wanted = 0o710
    else:
        wanted = (mode & 0o010) | 0o700  # keep a group "enter" bit given before, drop the rest
    if wanted != mode:
        os.chmod(path, wanted)
    return path


@contextlib.contextmanager
def exclusive_lock(path: Path):
    """Serialise start/stop of one server across processes (`pmd up`, CLI calls, tests)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def hold_lock(path: Path, note: str):
    """Lock `path` for as long as the returned file stays open, writing `note` (who holds it) into it.

    Returns (file, None), or (None, the holder's note) when another process holds it: one `pmd up`
    and one scheduler per index. The lock goes with the process, however it ends."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    handle = os.fdopen(os.open(path, flags, 0o600), "r+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = handle.read().strip()
        handle.close()
        return None, holder or "another process"
    handle.truncate(0)
    handle.write(note + "\n")
    handle.flush()
    return handle, None


def log_tail(path: Path, lines: int = 6) -> str:
    """The last lines of a server log, for error messages that say why it did not start."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_dir_for(home: Path) -> Path:
    """pmd's private folder for sockets and run files, short enough for the kernel's limit.

    Here, not in pgserver, so the CLI's client mode finds its socket without importing psutil."""
    preferred = home / "run"
    if len(str(preferred / "pg" / f".s.PGSQL.{PG_PORT}")) <= _SOCKET_PATH_MAX:
        return preferred
    return _short_run_dir(Path(home))


RUN_DIR_POINTER = "run-dir"  # in a long $PMD_HOME: the path of its run folder under /tmp


def _legacy_short_run_dir(home: Path) -> Path:
    return Path("/tmp") / f"pmd-{hashlib.sha256(str(home).encode()).hexdigest()[:12]}"


def _ours(path: Path | None) -> Path | None:
    """`path` when it is a real folder of pmd's user that nobody else may write or list, else None."""
    if path is None:
        return None
    try:
        info = os.lstat(path)
    except OSError:
        return None
    private = stat.S_IMODE(info.st_mode) & 0o067 == 0  # a group "enter" bit is pmd's own (0710 as root)
    return path if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and private else None


def _read_pointer(pointer: Path) -> Path | None:
    try:
        fd = os.open(pointer, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd) as handle:
        if os.fstat(handle.fileno()).st_uid != os.geteuid():
            return None
        text = handle.read().strip()
    return Path(text) if text.startswith("/") else None


def _short_run_dir(home: Path) -> Path:
    """The run folder of a long $PMD_HOME: a folder under /tmp with an unguessable name, its path kept
    in $PMD_HOME/run-dir.

    A name derived from $PMD_HOME alone could be made first by any other user, and pmd (which never
    uses a folder it does not own) could then not start. A folder of the old fixed name is kept when
    it is pmd's own and private (servers started before may have their sockets there)."""
    pointer = home / RUN_DIR_POINTER
    found = _ours(_read_pointer(pointer))
    if found is not None:
        return found
    legacy = _legacy_short_run_dir(home)
    try:
        private_dir(home, create_marker=True)
        with exclusive_lock(home / f".{RUN_DIR_POINTER}.lock"):
            found = _ours(_read_pointer(pointer))
            if found is None:
                found = _ours(legacy) or Path(tempfile.mkdtemp(prefix="pmd-", dir="/tmp"))
                scratch = home / f".{RUN_DIR_POINTER}.{os.getpid()}"
                fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(f"{found}\n")
                os.replace(scratch, pointer)
            return found
    except (OSError, ServerSetupError):
        # $PMD_HOME is not ours to write (another user's pmd, a read-only mount): the fixed name;
        # private_dir() refuses it there if it is not pmd's user's own.
        return legacy
