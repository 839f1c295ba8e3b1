"""Commands started at the same moment on a fresh index (two `pmd collection add`, `pmd up` beside a
CLI command): each found the database missing, or unmigrated, and both created it; one failed with
"database already exists" or "relation … already exists". Both must succeed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pmd_site.pgserver import EmbeddedPostgres
from tests.support.paths import ROOT
from tests.support.servers import child_database_url

pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="embedded server only")


@pytest.fixture
def session_server():
    """The session's embedded server (tests/plugin.py), and the databases a test made on it dropped after."""
    server = EmbeddedPostgres(Path(os.environ["PMD_HOME"]))
    made: list[str] = []
    yield server, made
    from psycopg import sql

    with server._connect("postgres") as conn:
        for name in made:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_commands_started_together_create_the_database_once(session_server):
    server, made = session_server
    name = "pmd_started_together_create"
    made.append(name)
    starters = 4
    barrier = threading.Barrier(starters)
    errors: list[BaseException] = []

    def start():
        barrier.wait(10)
        try:
            server.ensure_database(name)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with server._connect(name):
        pass


# A child that sets up Django, says so, waits for the go and migrates: both children's migrations
# run at once (a migration run takes seconds, the go reaches both within milliseconds).
_MIGRATE_ON_GO = """
import sys
from pmd_site.runtime import setup_django
setup_django()
print("ready", flush=True)
sys.stdin.readline()
from pmd_site.runtime import migrate_if_needed
print("applied" if migrate_if_needed() else "up to date", flush=True)
"""


def test_commands_started_together_migrate_a_fresh_database_once(session_server, tmp_path):
    server, made = session_server
    name = "pmd_started_together_migrate"
    made.append(name)
    server.ensure_database(name)
    env = {**os.environ, "DATABASE_URL": child_database_url(name), "PMD_HOME": str(tmp_path)}
    children = [subprocess.Popen([sys.executable, "-c", _MIGRATE_ON_GO], cwd=ROOT, env=env, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(2)]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", child.communicate()[1]
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    for child, (_, err) in zip(children, results):
        assert child.returncode == 0, err
    assert sorted(out.strip() for out, _ in results) == ["applied", "up to date"]
