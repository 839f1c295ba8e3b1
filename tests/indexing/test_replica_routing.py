"""Which reads may go to a read replica and which stay on the primary (indexing/replicas.py), without
a server: the decisions only. tests/system/test_read_replica.py runs them against a real replica."""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError

from indexing import replicas
from indexing.models import ApiToken, Chunk, Document, Job, LLMCache, SearchLogEntry

REPLICA = "replica_x"  # never connected to: these tests only ask where a read would go


@pytest.fixture(autouse=True)
def one_replica(settings):
    settings.DATABASE_REPLICAS = [REPLICA]
    settings.PMD_DB_REPLICA_PIN_SECONDS = 5.0
    settings.PMD_DB_REPLICA_RETRY_SECONDS = 30.0
    replicas.request_started()
    replicas._state.last_change = float("-inf")
    replicas._state.down_until.clear()
    yield
    replicas.request_started()
    replicas._state.last_change = float("-inf")
    replicas._state.down_until.clear()


router = replicas.ReplicaRouter()


@replicas.replica_reads
def where(model=Document):
    return replicas.read_alias(), router.db_for_read(model)


def test_outside_a_replica_read_everything_reads_the_primary():
    assert replicas.read_alias() == DEFAULT_DB_ALIAS
    assert router.db_for_read(Document) == DEFAULT_DB_ALIAS


def test_without_replicas_replica_reads_read_the_primary(settings):
    settings.DATABASE_REPLICAS = []
    assert where() == (DEFAULT_DB_ALIAS, DEFAULT_DB_ALIAS)


def test_searches_gets_and_listings_read_a_replica_but_not_what_must_be_current():
    assert where() == (REPLICA, REPLICA)
    for model in (LLMCache, Job, ApiToken):
        assert where(model)[1] == DEFAULT_DB_ALIAS, model


def test_every_write_goes_to_the_primary_and_bookkeeping_does_not_pin():
    assert router.db_for_write(SearchLogEntry) == DEFAULT_DB_ALIAS
    assert router.db_for_write(ApiToken) == DEFAULT_DB_ALIAS  # a token's last use, on every request
    assert where() == (REPLICA, REPLICA)


def test_after_changing_notes_the_request_and_for_a_while_the_process_read_the_primary(settings):
    assert router.db_for_write(Chunk) == DEFAULT_DB_ALIAS
    assert where() == (DEFAULT_DB_ALIAS, DEFAULT_DB_ALIAS)  # the same request (or CLI run)
    replicas.request_started()
    assert where() == (DEFAULT_DB_ALIAS, DEFAULT_DB_ALIAS)  # another request of this process, seconds later
    settings.PMD_DB_REPLICA_PIN_SECONDS = 0.0
    assert where() == (REPLICA, REPLICA)


def test_a_write_inside_a_replica_read_sends_its_later_reads_to_the_primary():
    @replicas.replica_reads
    def refresh_then_read():
        before = replicas.read_alias()
        router.db_for_write(Document)
        return before, replicas.read_alias()

    assert refresh_then_read() == (REPLICA, DEFAULT_DB_ALIAS)


def test_a_replica_that_fails_is_read_again_on_the_primary_and_left_alone_for_a_while(settings):
    calls = []

    @replicas.replica_reads
    def search():
        calls.append(replicas.read_alias())
        if replicas.read_alias() == REPLICA:
            raise OperationalError("server closed the connection unexpectedly")
        return "results"

    assert search() == "results"
    assert calls == [REPLICA, DEFAULT_DB_ALIAS]
    assert search() == "results" and calls[2:] == [DEFAULT_DB_ALIAS]  # no new attempt meanwhile
    settings.PMD_DB_REPLICA_RETRY_SECONDS = 0.0
    replicas._state.down_until[REPLICA] = 0.0  # its retry time has come: one read tries it
    assert search() == "results" and calls[3:] == [REPLICA, DEFAULT_DB_ALIAS]


def test_errors_that_are_not_the_replica_failing_reach_the_caller():
    class Bad(Exception):
        pass

    @replicas.replica_reads
    def broken():
        raise Bad()

    with pytest.raises(Bad):
        broken()
    assert REPLICA not in replicas._state.down_until


def test_threads_of_a_search_read_where_the_search_reads():
    from search.pipeline.deadline import run_concurrently

    @replicas.replica_reads
    def hybrid():
        return run_concurrently({"vector": replicas.read_alias}, timeout=5).results["vector"]

    assert hybrid() == REPLICA


def test_database_replica_urls_become_replica_aliases_of_the_same_database(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from tests.support.paths import ROOT

    script = (
        "import django, json; django.setup(); from django.conf import settings; "
        "print(json.dumps([settings.DATABASE_REPLICAS, {a: [d['HOST'], d['PORT'], d['NAME'], d['TEST'], "
        "{k: str(v) for k, v in d['OPTIONS'].items()}] for a, d in settings.DATABASES.items()}]))"
    )
    env = {
        **os.environ,
        "PMD_HOME": str(tmp_path),
        "DATABASE_URL": "postgres://pmd:pw@primary/pmd",
        "DATABASE_REPLICA_URLS": "postgres://pmd:pw@r1:5433/pmd, postgres://pmd:pw@r2/pmd",
        "PMD_INDEX": "work",
        "DJANGO_SETTINGS_MODULE": "pmd_site.settings",
        "PMD_DB_POOL": "true",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    aliases, databases = json.loads(done.stdout)
    assert aliases == ["replica_1", "replica_2"]
    assert databases["replica_1"][:3] == ["r1", "5433", "pmd_work"] and databases["replica_2"][0] == "r2"
    assert databases["replica_1"][3]["MIRROR"] == "default"  # tests read the test database through it
    options = databases["replica_1"][4]
    assert options["connect_timeout"] == "2" and "'timeout': 2" in options["pool"] and "check" in options["pool"]
