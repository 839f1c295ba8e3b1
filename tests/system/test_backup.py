"""`pmd backup` and `pmd restore` for real: PostgreSQL's own pg_dump and pg_restore on a database
of notes, vectors, accounts and tokens, for DATABASE_URL's server and for the embedded one."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from pmd_site.runtime.server_files import hold_lock, run_dir_for
from tests.support.ollama_server import OllamaTestServer
from tests.support.paths import FIXTURES, ROOT
from tests.support.servers import free_port, scratch_database

NOTES = FIXTURES / "upgrade" / "notes"
EMBED_MODEL = "backup-embed"
# What a backup must bring back as it was.
KEPT = {
    "collections": "SELECT string_agg(name, ',' ORDER BY name) FROM indexing_collection",
    "documents": "SELECT string_agg(path || ':' || content_hash, ',' ORDER BY path) FROM indexing_document",
    "vectors": "SELECT count(*) || ':' || md5(string_agg(embedding::text, ',' ORDER BY id)) FROM indexing_chunk",
    "accounts": "SELECT string_agg(username || ':' || password, ',' ORDER BY username) FROM auth_user",
    "tokens": "SELECT string_agg(digest, ',' ORDER BY digest) FROM search_apitoken",
}


def _kept(url: str) -> dict:
    with psycopg.connect(url) as connection:
        return {name: connection.execute(sql).fetchone()[0] for name, sql in KEPT.items()}


def _env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DATABASE_URL", "PMD_INDEX", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(PMD_CLIENT="never", NO_COLOR="1", PYTHONUNBUFFERED="1", COLUMNS="200", **extra)
    return env


def _pmd(env: dict, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", *arguments],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _ok(env: dict, *arguments: str, stdin: str | None = None) -> str:
    done = _pmd(env, *arguments, stdin=stdin)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def model_server():
    server = OllamaTestServer().start()
    server.add_model(EMBED_MODEL, dims=32)
    yield server
    server.stop()


@pytest.fixture
def database(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), scratch_database("backup") as url:
        yield url


def test_a_backup_restored_over_a_destroyed_database_brings_back_notes_accounts_tokens_and_vectors(
    database, model_server, tmp_path
):
    env = _env(
        DATABASE_URL=database,
        PMD_HOME=str(tmp_path / "home"),
        PMD_TASKS_EAGER="1",  # adding the notes embeds them, here
        OLLAMA_URL=model_server.url,
        PMD_LLM_BACKEND="ollama",
        PMD_EMBED_MODEL=EMBED_MODEL,
    )
    _ok(env, "collection", "add", str(NOTES), "--name", "notes")
    _ok(env, "user", "create", "reader", "--password-stdin", stdin="a long enough password\n")
    _ok(env, "token", "create", "--user", "reader")
    before = _kept(database)
    assert before["vectors"].split(":")[0] != "0" and "reader" in before["accounts"] and before["tokens"]

    file = tmp_path / "index.dump"
    report = json.loads(_ok(env, "backup", str(file), "--json"))
    assert stat.S_IMODE(file.stat().st_mode) == 0o600  # password hashes and every note's text
    assert report["counts"]["documents"] == 3 and report["counts"]["API tokens"] == 1 and report["entries"] > 0
    assert any("notes and files themselves" in line for line in report["not_included"])
    again = _pmd(env, "backup", str(file))
    assert again.returncode == 1 and "exists already" in again.stderr  # never overwritten

    # Refused while something else uses the database; named, and nothing touched.
    with psycopg.connect(database, application_name="another-pmd") as other:
        other.execute("SELECT 1")
        refused = _pmd(env, "restore", str(file))
    assert refused.returncode == 1 and "another-pmd" in refused.stderr and "other connection" in refused.stderr
    # A file that breaks off midway changes nothing; a file that is no backup is refused.
    broken = tmp_path / "broken.dump"
    broken.write_bytes(file.read_bytes()[: file.stat().st_size * 2 // 3])
    assert _pmd(env, "restore", str(broken)).returncode == 1
    (tmp_path / "notes.md").write_text("# not a backup\n")
    not_a_backup = _pmd(env, "restore", str(tmp_path / "notes.md"))
    assert not_a_backup.returncode == 1 and "not a PostgreSQL backup" in not_a_backup.stderr
    assert _kept(database) == before
    # A restore that fails late (here at its indexes, after the old schema was dropped and the
    # rows loaded) is rolled back whole.
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("CREATE SCHEMA guard")
        connection.execute(
            "CREATE FUNCTION guard.no_indexes() RETURNS event_trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RAISE EXCEPTION 'no new indexes here'; END $$"
        )
        connection.execute(
            "CREATE EVENT TRIGGER no_indexes ON ddl_command_end WHEN TAG IN ('CREATE INDEX') "
            "EXECUTE FUNCTION guard.no_indexes()"
        )
    failed = _pmd(env, "restore", str(file))
    assert failed.returncode == 1 and "rolled back" in failed.stderr and "no new indexes here" in failed.stderr
    assert _kept(database) == before
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("DROP EVENT TRIGGER no_indexes")
        connection.execute("DROP SCHEMA guard CASCADE")

    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")
    restored = _pmd(env, "restore", str(file))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "documents: 3" in restored.stdout and "API tokens: 1" in restored.stdout
    assert "not in the backup:" in restored.stdout and "the notes and files themselves" in restored.stdout
    assert _kept(database) == before

    assert "pmd://notes/tomatoes.md" in _ok(env, "search", "tomatoes", "--files")
    inputs = model_server.embedded_inputs
    hits = json.loads(_ok(env, "vsearch", "compost heap greens browns", "--json"))["results"]
    assert hits[0]["path"] == "compost.md" and model_server.embedded_inputs == inputs + 1  # the query alone


@pytest.fixture
def home():
    # Not under tmp_path: pytest resets /tmp/pytest-of-<user> to 0700 at each session, which locks
    # the (unprivileged) embedded PostgreSQL out of its data when the tests run as root.
    base = Path(tempfile.mkdtemp(prefix="pmd-backup-test-"))
    base.chmod(0o755)
    yield base / "home"
    _pmd(_env(PMD_HOME=str(base / "home")), "db", "stop")
    shutil.rmtree(base, ignore_errors=True)


def test_the_embedded_database_is_backed_up_and_not_restored_under_a_running_pmd_up(home, tmp_path):
    env = _env(PMD_HOME=str(home), OLLAMA_URL=f"http://127.0.0.1:{free_port()}")
    _ok(env, "collection", "add", str(NOTES), "--name", "notes")
    file = tmp_path / "embedded.dump"
    assert "backed up to" in _ok(env, "backup", str(file))
    _ok(env, "collection", "remove", "notes")
    assert "notes" not in _ok(env, "collection", "list")

    lock, _ = hold_lock(run_dir_for(home) / "up-default.lock", "pid 4242, http://127.0.0.1:8000/")
    try:
        refused = _pmd(env, "restore", str(file))
    finally:
        lock.close()
    assert refused.returncode == 1 and "pmd up is running" in refused.stderr and "pid 4242" in refused.stderr

    assert "documents: 3" in _ok(env, "restore", str(file))
    assert "pmd://notes/compost.md" in _ok(env, "search", "compost", "--files")


def test_postgresql_programs_come_from_path_when_they_match_the_server_and_are_refused_by_name_otherwise(
    db, monkeypatch, tmp_path
):
    from django.db import connection

    from indexing.errors import BackupFailed
    from pmd_site.runtime import backup

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        major = int(cursor.fetchone()[0]) // 10000
    monkeypatch.setattr(backup, "installed_bin_dir", lambda: None)  # installed without the embedded extra
    monkeypatch.setenv("PATH", str(tmp_path))
    on_path = tmp_path / "pg_dump"
    on_path.write_text(f"#!/bin/sh\necho 'pg_dump (PostgreSQL) {major - 3}.4'\n")
    on_path.chmod(0o755)
    with pytest.raises(BackupFailed) as refused:
        backup._tool("pg_dump")
    assert f"{on_path} is PostgreSQL {major - 3}" in refused.value.message
    assert f"postgresql-client-{major}" in refused.value.message
    on_path.write_text(f"#!/bin/sh\necho 'pg_dump (PostgreSQL) {major}.1'\n")
    assert backup._tool("pg_dump") == str(on_path)
