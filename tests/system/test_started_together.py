"""Commands started at the same moment on a fresh index (two `pmd collection add`, `pmd up` beside a
CLI command, two `pmd up` with their own PMD_HOME on one DATABASE_URL): each found the database
missing, unmigrated or without its admin, and both created it; one failed with "database already
exists", "relation … already exists" or a duplicate admin. Both must succeed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pmd_site.runtime.postgres_server import EmbeddedPostgres
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


def _all_at_once(action, starters: int = 4) -> list[object]:
    """Run `action` in `starters` threads released together; what each returned or raised."""
    barrier = threading.Barrier(starters)
    outcomes: list[object] = []

    def start():
        barrier.wait(10)
        try:
            outcomes.append(action())
        except BaseException as exc:  # noqa: BLE001 - the caller looks at them
            outcomes.append(exc)

    threads = [threading.Thread(target=start) for _ in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def test_commands_started_together_create_the_database_once(session_server):
    server, made = session_server
    name = "pmd_started_together_create"
    made.append(name)
    outcomes = _all_at_once(lambda: server.ensure_database(name))
    assert [o for o in outcomes if isinstance(o, BaseException)] == []
    with server._connect(name):
        pass


# A child that sets up Django, says so, waits for the go and migrates: the go reaches both within
# milliseconds, long before either has loaded the migrations and created a table.
_MIGRATE_ON_GO = """
import sys
from pmd_site.runtime.process import setup_django
setup_django()
print("ready", flush=True)
sys.stdin.readline()
from pmd_site.runtime.process import migrate_if_needed
print("applied" if migrate_if_needed() else "up to date", flush=True)
"""


@pytest.fixture
def database_missing_a_migration(session_server, django_db_blocker):
    """A copy of the migrated test database without the sessions app's table and migration (a full
    migration run takes seconds; one small migration shows the race as well)."""
    from django.db import connection, connections
    from psycopg import sql

    server, made = session_server
    name = "pmd_started_together_migrate"
    made.append(name)
    template = connection.settings_dict["NAME"]  # the migrated test database (the test's django_db mark)
    with django_db_blocker.unblock():
        connections.close_all()  # a template may have no other session
    with server._connect("postgres") as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
    with server._connect(name) as conn:
        conn.execute("DROP TABLE django_session")
        conn.execute("DELETE FROM django_migrations WHERE app = 'sessions'")
    return name


@pytest.mark.django_db(transaction=True)  # no transaction held open: the test database is the template
def test_commands_started_together_migrate_a_database_once(database_missing_a_migration, tmp_path):
    env = {**os.environ, "DATABASE_URL": child_database_url(database_missing_a_migration), "PMD_HOME": str(tmp_path)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATE_ON_GO],
            cwd=ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
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


@pytest.mark.django_db(transaction=True)  # each thread commits on its own connection
def test_two_pmd_up_on_one_database_create_the_admin_once():
    from django.contrib.auth import get_user_model
    from django.db import connection

    from indexing.access import Access
    from indexing.services.accounts import admin_ensure

    def start():
        try:
            return admin_ensure(username="admin", access=Access.local_user())
        finally:
            connection.close()  # this thread's own

    outcomes = _all_at_once(start)
    assert [o for o in outcomes if isinstance(o, BaseException)] == []
    assert sum(o.password is not None for o in outcomes) == 1  # one generated password, shown by one of them
    assert get_user_model().objects.filter(username="admin").count() == 1


@pytest.mark.django_db(transaction=True)  # the waiting thread's connection must see the lock's holder
def test_a_process_waiting_for_anothers_migrations_says_so(caplog):
    import psycopg

    from indexing.locks import MIGRATIONS
    from pmd_site.runtime.process import _one_migration_at_a_time

    entered = threading.Event()

    def migrating():
        from django.db import connection

        try:
            with _one_migration_at_a_time():
                entered.set()
        finally:
            connection.close()

    with psycopg.connect(child_database_url(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATIONS)  # another process migrating
        thread = threading.Thread(target=migrating)
        with caplog.at_level("WARNING", logger="pmd_site.runtime.process"):
            thread.start()
            deadline = time.monotonic() + 60  # the thread connects first, slowly on a loaded machine
            while "waiting for another process to finish migrating" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "waiting for another process to finish migrating" in caplog.text
            assert not entered.is_set(), "went ahead while another process held the migrations"
    thread.join(30)  # the lock went with the other connection
    assert entered.is_set()
