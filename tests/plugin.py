"""pytest plugin (loaded with `-p tests.plugin` before pytest-django).

It points PMD_HOME at a throwaway folder *before* Django reads its settings, starts a
real embedded PostgreSQL there for the session and stops it afterwards, also on
SIGTERM. Servers left behind by a test run that was SIGKILLed are reaped at the next
start (their owner pid is dead). With DATABASE_URL set, that server is used instead.

Under pytest-xdist (`-n N`, as ./scripts/test runs the suite) every worker is a pytest process
that imports this plugin itself, so each gets its own PMD_HOME and server; the controller, which
runs no tests, starts none.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import psutil

# Reads no settings or environment when imported, so it may come before PMD_HOME is chosen below.
from pmd_site.runtime.postgres_server import EmbeddedPostgres

_TEST_PREFIX = "pmd-test-"
_home: Path | None = None

if not os.environ.get("DATABASE_URL"):
    _home = Path(tempfile.mkdtemp(prefix=_TEST_PREFIX))
    os.environ["PMD_HOME"] = str(_home)
    (_home / "owner.pid").write_text(str(os.getpid()))
    # Created here for pmd: it may set this folder's permissions (see processes.private_dir).
    (_home / ".created-by-pmd").write_text("throwaway test PMD_HOME\n")
    (_home / "static").mkdir()  # STATIC_ROOT: static files are served from the finders in tests
os.environ.setdefault("PMD_SECRET_KEY", "test-only-secret-key-not-for-production")
# Tests run the packaged model file as it is: an int8 copy takes seconds to make, and each test has
# its own PMD_HOME. tests/indexing/test_local_int8.py makes one and tests that path.
os.environ.setdefault("PMD_LOCAL_PRECISION", "fp32")


def _reap_orphans() -> None:
    for folder in Path(tempfile.gettempdir()).glob(_TEST_PREFIX + "*"):
        if folder == _home:
            continue
        try:
            owner = int((folder / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if psutil.pid_exists(owner):
            continue
        EmbeddedPostgres(folder).destroy()
        shutil.rmtree(folder, ignore_errors=True)


def _shutdown() -> None:
    global _home
    if _home is None:
        return
    home, _home = _home, None
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: BLE001 - shutting down regardless
        pass
    EmbeddedPostgres(home).destroy()
    shutil.rmtree(home, ignore_errors=True)


def _on_sigterm(signum, frame):
    _shutdown()
    raise SystemExit(128 + signum)


def _runs_tests(config) -> bool:
    """False in pytest-xdist's controller: it hands the tests to its workers (xdist registers its
    "dsession" plugin only there, and only when it distributes)."""
    return not config.pluginmanager.hasplugin("dsession")


def pytest_sessionstart(session):
    if _home is None:
        return
    atexit.register(_shutdown)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if not _runs_tests(session.config):
        return
    _reap_orphans()
    EmbeddedPostgres(_home).start()


def pytest_sessionfinish(session, exitstatus):
    _shutdown()
