"""Starting a real `pmd serve` for a test: a free loopback port, the process, and the wait for
its /healthz, in one place (the process tests in tests/system/ share it)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.paths import ROOT


def child_database_url(name: str | None = None) -> str:
    """The test database (or the database `name` on its server) as a DATABASE_URL, for child
    processes that must neither start nor stop a server (once django_db_setup has made it; the
    `database_url` fixture for one test)."""
    from urllib.parse import quote

    from django.db import connection

    db_ = connection.settings_dict
    password = f":{quote(db_['PASSWORD'], safe='')}" if db_["PASSWORD"] else ""
    return (
        f"postgresql://{quote(db_['USER'], safe='')}{password}@/{name or db_['NAME']}"
        f"?host={quote(db_['HOST'], safe='/')}&port={db_['PORT'] or 5432}"
    )


def free_port() -> int:
    """A loopback port nothing listens on right now (also usable as a closed address)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    """Until /healthz answers 200; fails with the server's log if it exits or stays away."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"pmd serve exited:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        assert time.monotonic() < deadline, f"pmd serve did not come up:\n{log.read_text()}"
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> None:
    """Terminate, and kill if it does not end in time."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def pmd_serve(*, env: dict, log: Path, timeout: float, cwd: Path = ROOT):
    """`pmd serve` on a free port, healthy: yields (process, port), stopped afterwards."""
    port = free_port()
    with open(log, "w") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pmd_site.cli", "serve", "--port", str(port)],
            env=env,
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_healthy(port, proc, log, timeout)
        yield proc, port
    finally:
        stop(proc)


@contextlib.contextmanager
def scratch_database(prefix: str = "scratch"):
    """A new, empty database on the test server for one test, dropped afterwards: its URL (for a
    test whose pmd processes replace or migrate a whole database). Needs django_db_setup."""
    import uuid

    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    server = child_database_url("postgres")
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield child_database_url(name)
    finally:
        with psycopg.connect(server, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
