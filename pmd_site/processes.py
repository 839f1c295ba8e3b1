"""Small helpers shared by the embedded servers pmd manages (PostgreSQL, Redis)."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path


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


def log_tail(path: Path, lines: int = 6) -> str:
    """The last lines of a server log, for error messages that say why it did not start."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
