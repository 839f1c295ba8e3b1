"""A command that only reads, on an index made by an older pmd (its migrations behind this pmd's):
one line saying how to bring it forward, no traceback, and the index left as it was."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest
from django.db import connection, connections
from psycopg import sql

from tests.support.paths import ROOT
from tests.support.servers import child_database_url, scratch_database

OLDER = "0028_oauth"  # the index of a pmd before the index's settings could be chosen automatically


def _pmd(database_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"PMD_HOME", "PMD_INDEX", "PMD_DEBUG"}}
    env.update(DATABASE_URL=database_url, PMD_CLIENT="never", PMD_LOG_LEVEL="WARNING", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _applied(database_url: str) -> set[str]:
    with psycopg.connect(database_url) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM django_migrations WHERE app = 'indexing'")}


@pytest.fixture
def older_index(django_db_blocker, tmp_path):
    """A copy of the migrated test database, its indexing migrations taken back to OLDER."""
    name = f"pmd_older_index_{os.getpid()}"
    template = connection.settings_dict["NAME"]
    server = child_database_url("postgres")
    with django_db_blocker.unblock():
        connections.close_all()  # a template may have no other session
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
    url = child_database_url(name)
    back = subprocess.run(
        [sys.executable, "manage.py", "migrate", "indexing", OLDER, "--verbosity", "0"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "PMD_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert back.returncode == 0, back.stderr
    try:
        yield url
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.mark.django_db(transaction=True)  # no transaction held open: the test database is the template
@pytest.mark.parametrize("command", [("search", "x"), ("status",), ("collection", "list")])
def test_a_read_command_on_an_older_index_says_to_migrate_in_one_line_and_migrates_nothing(older_index, command):
    before = _applied(older_index)
    assert max(before) == OLDER
    done = _pmd(older_index, *command)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: this index was made by an older pmd: run `pmd migrate` (or start `pmd up`, which migrates)"
    ]
    assert "Traceback" not in done.stdout + done.stderr
    assert _applied(older_index) == before


@pytest.mark.django_db(transaction=True)
def test_a_command_that_writes_brings_an_older_index_forward_without_a_traceback(older_index, tmp_path):
    (tmp_path / "notes").mkdir()
    done = _pmd(older_index, "collection", "add", str(tmp_path / "notes"), "--name", "notes")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "could not read the index's configuration" not in done.stderr
    assert max(_applied(older_index)) > OLDER
    assert _pmd(older_index, "collection", "list").returncode == 0


@pytest.mark.django_db(transaction=True)
def test_a_read_command_on_an_empty_database_creates_no_index_and_says_so(django_db_blocker):
    with django_db_blocker.unblock(), scratch_database("empty") as url:
        done = _pmd(url, "search", "x")
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            "error: this database holds no pmd index yet: run `pmd migrate` (or start `pmd up`, which migrates)"
        ]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('django_migrations')").fetchone()[0] is None
