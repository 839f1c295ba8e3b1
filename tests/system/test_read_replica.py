"""Read replicas against a real streaming replica: this worker's embedded PostgreSQL is the primary,
a second embedded server made from it by `pg_basebackup -R` (primary_conninfo, standby.signal)
streams from it and answers on a loopback port as `replica_1`. Which server answered is read from
each server's own statistics (pg_stat_user_tables of the keyword index, pg_stat_database)."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from pmd_site.runtime.postgres_server import HBA_PASSWORD, PG_USER, EmbeddedPostgres
from pmd_site.runtime.server_files import PG_PORT
from tests.support.servers import free_port

pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="the embedded server's own replica")

ALIAS = "replica_1"
replica_db = pytest.mark.django_db(transaction=True, databases=["default", ALIAS])


class Pair:
    def __init__(self, primary: EmbeddedPostgres, data: Path, sockets: Path, port: int, dbname: str, password: str):
        self.primary, self.data, self.sockets, self.port = primary, data, sockets, port
        self.dbname, self.password = dbname, password

    def replica_conn(self, dbname: str | None = None):
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=PG_USER,
            password=self.password,
            dbname=dbname or self.dbname,
            autocommit=True,
            connect_timeout=5,
        )

    def primary_conn(self, dbname: str | None = None):
        return psycopg.connect(
            host=str(self.primary.socket_dir),
            port=PG_PORT,
            user=PG_USER,
            password=self.password,
            dbname=dbname or self.dbname,
            autocommit=True,
        )

    def pg_ctl(self, *args: str) -> None:
        done = subprocess.run(
            [self.primary._pg("pg_ctl"), "-D", str(self.data), *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **self.primary._run_kwargs(),
        )
        log = self.data / "server.log"
        assert done.returncode == 0, done.stderr + (log.read_text()[-2000:] if log.exists() else "")

    def caught_up(self, timeout: float = 20.0) -> None:
        """Until the replica has replayed everything the primary has written so far."""
        with self.primary_conn("postgres") as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        with self.replica_conn("postgres") as conn:
            while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()[0]:
                assert time.monotonic() < deadline, "the replica did not catch up"
                time.sleep(0.02)

    def set_apply_delay(self, value: str) -> None:
        with self.replica_conn("postgres") as conn:
            conn.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{value}'")
            conn.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker, tmp_path_factory):
    """This worker's server as the primary, a streaming replica of it, and Django's `replica_1` alias."""
    from django.db import connections
    from django.test import override_settings

    from indexing import replicas

    primary = EmbeddedPostgres(Path(os.environ["PMD_HOME"]))
    default = connections["default"].settings_dict
    password = default["PASSWORD"]
    primary._write_hba(HBA_PASSWORD + "local replication all scram-sha-256\n")
    primary._reload()
    data, sockets = primary.root / "replica-test", primary.root / "replica-run"
    for folder in (data, sockets):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700)
        ids = primary._server_ids()
        if ids is not None:
            os.chown(folder, *ids)
    port = free_port()
    subprocess.run(
        [
            primary._pg("pg_basebackup"),
            "-D",
            str(data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
            "-h",
            str(primary.socket_dir),
            "-p",
            str(PG_PORT),
            "-U",
            PG_USER,
            "-w",
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PGPASSWORD": password},
        **primary._run_kwargs(),
    )
    (data / "pg_hba.conf").write_text(HBA_PASSWORD + "host all all 127.0.0.1/32 scram-sha-256\n")
    state = Pair(primary, data, sockets, port, default["NAME"], password)
    state.pg_ctl(
        "-l",
        str(data / "server.log"),
        "-w",
        "-t",
        "60",
        "-o",
        f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c unix_socket_permissions=0700 "
        "-c max_connections=200 -c fsync=off",
        "start",
    )
    connections.settings[ALIAS] = {
        **copy.deepcopy(default),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "OPTIONS": {**default["OPTIONS"], "connect_timeout": "2"},
        "TEST": {**default["TEST"], "MIRROR": "default"},
    }
    overridden = override_settings(DATABASE_REPLICAS=[ALIAS])
    overridden.enable()
    try:
        with state.replica_conn("postgres") as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        yield state
    finally:
        overridden.disable()
        with django_db_blocker.unblock():
            connections[ALIAS].close()
        if hasattr(connections._connections, ALIAS):
            delattr(connections._connections, ALIAS)
        del connections.settings[ALIAS]
        replicas._state.down_until.clear()
        subprocess.run(
            [primary._pg("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            **primary._run_kwargs(),
        )
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(sockets, ignore_errors=True)
        primary._write_hba(HBA_PASSWORD)
        primary._reload()


def _new_request() -> None:
    """As a new request (or a new `pmd` run) long after the last change: reads may go to a replica."""
    from indexing import replicas

    replicas.request_started()
    replicas._state.last_change = float("-inf")


def _flush_stats() -> None:
    """Both servers' pending statistics of this thread's connections, to shared memory now."""
    from django.db import connections

    for alias in ("default", ALIAS):
        if connections[alias].connection is not None:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT pg_stat_force_next_flush()")


KEYWORD_SCANS = (
    "SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables "
    "WHERE relname LIKE 'search_keyword_%%'"
)


def _scans(pair: Pair) -> tuple[int, int]:
    """Scans of the keyword index tables so far: (on the primary, on the replica)."""
    _flush_stats()
    with pair.primary_conn() as primary, pair.replica_conn() as replica:
        return primary.execute(KEYWORD_SCANS).fetchone()[0], replica.execute(KEYWORD_SCANS).fetchone()[0]


def _indexed(corpus_dir, pair: Pair):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    collection = collection_create(path=corpus_dir, name="notes")
    collection_index(collection)
    pair.caught_up()
    _new_request()
    return collection


def _search(words: str):
    from indexing.access import Access
    from search.pipeline.dispatch import search_run
    from search.request import SearchRequest

    return search_run(SearchRequest(query=words, mode="keyword", face="cli", access=Access.local_user()))


@replica_db
def test_search_get_and_listings_read_from_the_replica_and_writes_go_to_the_primary(pair, corpus_dir):
    from indexing.access import Access
    from indexing.models import SearchLogEntry
    from indexing.selectors import collections_overview, document_page, documents_list

    _indexed(corpus_dir, pair)
    with pair.replica_conn() as replica:
        returned_before = replica.execute(
            "SELECT tup_returned + tup_fetched FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    primary_before, replica_before = _scans(pair)
    response = _search("postgres")
    assert response.results, "the replica has the notes"
    primary_after, replica_after = _scans(pair)
    assert replica_after > replica_before, "the replica answered the search"
    assert primary_after == primary_before, "the primary did not search"

    access = Access.local_user()
    page = document_page(f"{response.results[0].collection}/{response.results[0].path}", access=access)
    assert page.lines
    assert documents_list("notes", access=access)
    assert [c.name for c in collections_overview(access=access)] == ["notes"]
    _flush_stats()
    with pair.replica_conn() as replica:
        returned_after = replica.execute(
            "SELECT tup_returned + tup_fetched FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    assert returned_after > returned_before
    # The search's own write (the search log) went to the primary: a standby takes no writes.
    assert SearchLogEntry.objects.using("default").filter(query="postgres").exists()


@replica_db
def test_status_shows_each_replica_whether_it_answers_and_its_lag(pair):
    from indexing.access import Access
    from pmd_site.reports.status import status_headlines, status_report

    database = status_report(["database"], internals=True, access=Access.local_user())["database"]
    [replica] = database["replicas"]
    assert replica["alias"] == ALIAS and replica["port"] == str(pair.port)
    assert replica["answers"] is True and replica["standby"] is True and replica["lag_seconds"] is not None
    assert status_headlines("database", database) == []
    member = status_report(["database"], internals=False, access=Access.local_user())["database"]
    assert "replicas" not in member  # where things run is for staff


@replica_db
def test_a_note_just_indexed_is_found_by_its_writer_while_the_replica_lags(pair, corpus_dir):
    from indexing.access import Access
    from indexing.services.refresh import collections_refresh

    _indexed(corpus_dir, pair)
    pair.set_apply_delay("1h")  # the replica receives the changes but applies none of them
    try:
        (corpus_dir / "fresh.md").write_text("# Fresh\n\nzanzibar quokka migration notes\n")
        collections_refresh(access=Access.local_user(), names=["notes"], no_worker="caller")
        with pair.replica_conn() as replica:
            assert replica.execute("SELECT count(*) FROM indexing_document WHERE path = 'fresh.md'").fetchone()[0] == 0
        primary_before, replica_before = _scans(pair)
        assert [(r.collection, r.path) for r in _search("quokka").results] == [("notes", "fresh.md")]
        primary_after, replica_after = _scans(pair)
        assert primary_after > primary_before and replica_after == replica_before, "the writer read the primary"

        # A new request in another process (no pin) reads the lagging replica: eventual, by design.
        _new_request()
        assert _search("quokka").results == []
    finally:
        pair.set_apply_delay("0")
    pair.caught_up()


@replica_db
def test_a_replica_stopped_mid_test_leaves_reads_on_the_primary_without_an_error(pair, corpus_dir, run_cli):
    import logging

    from indexing import replicas

    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())

    _indexed(corpus_dir, pair)
    assert _search("postgres").results
    pair.pg_ctl("-m", "fast", "-w", "stop")
    logging.getLogger("pmd.database").addHandler(handler)
    try:
        code, out, err = run_cli("search", "postgres")
        assert code == 0, err
        assert "postgres-tuning.md" in out and "rror" not in err
        assert ALIAS in replicas._state.down_until
        assert [w for w in warnings if w.startswith("read replica replica_1 is not answering")]
        # Marked down: the next reads go straight to the primary, with no attempt to connect.
        started = time.monotonic()
        code, out, _ = run_cli("get", "notes/guides/postgres-tuning.md")
        assert code == 0 and out
        assert time.monotonic() - started < 2

        from indexing.access import Access
        from pmd_site.reports.status import status_headlines, status_report

        database = status_report(["database"], internals=True, access=Access.local_user())["database"]
        assert database["ok"] and database["replicas"][0]["answers"] is False
        assert status_headlines("database", database)[0].startswith(
            f"read replica {ALIAS} (127.0.0.1:{pair.port}) does not answer"
        )
    finally:
        logging.getLogger("pmd.database").removeHandler(handler)
        pair.pg_ctl(
            "-l",
            str(pair.data / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {pair.port} -k {pair.sockets} "
            "-c unix_socket_permissions=0700 -c max_connections=200 -c fsync=off",
            "start",
        )
        replicas._state.down_until.clear()
