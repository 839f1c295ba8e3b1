"""compose.scale.yaml, pmd on several hosts, checked without a Docker engine: valid against the
compose-spec schema, and per host role (compose profile) the services compose.yaml + the override
start, the queues their workers take, what they share."""

from __future__ import annotations

import copy
import re
from argparse import Namespace

import pytest
import yaml

from tests.support.paths import ROOT
from tests.system.test_deploy import _documented, _validate

BASE = ROOT / "compose.yaml"
SCALE = ROOT / "compose.scale.yaml"
APP = {"migrate", "web-replica", "worker", "embedder", "beat", "watcher"}


def _merge(base, override):
    """Compose's merge of an override: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


@pytest.fixture(scope="module")
def merged() -> dict:
    return _merge(yaml.safe_load(BASE.read_text()), yaml.safe_load(SCALE.read_text()))


def _host(merged: dict, profile: str) -> dict:
    """The services `docker compose --profile PROFILE up` starts."""
    return {name: s for name, s in merged["services"].items() if not s.get("profiles") or profile in s["profiles"]}


def test_the_override_is_valid_against_the_compose_spec_schema():
    result = _validate(SCALE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_host_runs_its_role(merged):
    assert set(_host(merged, "main")) == {"db", "redis", "migrate", "web-replica", "proxy", "worker", "beat", "watcher"}
    assert set(_host(merged, "index")) == {"worker"}
    assert set(_host(merged, "gpu")) == {"ollama", "ollama-pull", "embedder"}
    assert set(_host(merged, "replica")) == {"db-replica"}
    assert all(s.get("profiles") for s in merged["services"].values()), "a service without a profile runs on every host"


def test_embedding_runs_next_to_the_gpu_and_indexing_elsewhere(merged):
    from pmd_site.celery import DEFAULT_QUEUE, EMBED_QUEUE, EMBED_TASKS, app

    gpu, main = _host(merged, "gpu"), _host(merged, "main")
    assert gpu["ollama"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert gpu["embedder"]["environment"]["PMD_WORKER_QUEUES"] == "embed"
    assert gpu["embedder"]["command"][-2:] == ["--queues", "embed"]
    assert main["worker"]["environment"]["PMD_WORKER_QUEUES"] == "index"
    assert main["worker"]["command"][-2:] == ["--queues", "index"]
    routes = app.conf.task_routes
    assert {routes[name]["queue"] for name in EMBED_TASKS} == {EMBED_QUEUE}
    assert "pmd_site.tasks.collection_index_task" not in routes and app.conf.task_default_queue == DEFAULT_QUEUE


def test_pmd_worker_takes_the_queues_of_pmd_worker_queues(settings):
    from pmd_site.celery import DEFAULT_QUEUE, EMBED_QUEUE
    from pmd_site.cli.services import _queues, celery_queues

    settings.PMD_WORKER_QUEUES = "embed"
    assert _queues(Namespace(queues=None)) == "embed"
    assert _queues(Namespace(queues="index")) == "index"  # the command line wins
    assert celery_queues("embed") == [EMBED_QUEUE] and celery_queues("index") == [DEFAULT_QUEUE]


def test_web_replicas_sit_behind_the_proxy(merged):
    main = _host(merged, "main")
    replicas = main["web-replica"]
    assert "ports" not in replicas and replicas["deploy"]["replicas"] == "${PMD_WEB_REPLICAS:-2}"
    assert main["proxy"]["ports"] == ["${PMD_BIND:-127.0.0.1}:${PMD_PORT:-8000}:8000"]
    caddyfile = merged["configs"]["caddyfile"]["content"]
    assert re.search(r"dynamic a web-replica 8000", caddyfile) and "health_uri /healthz" in caddyfile


def test_every_host_shares_the_database_the_broker_and_the_notes_read_only(merged):
    for profile in ("main", "index", "gpu"):
        for name, service in _host(merged, profile).items():
            if name not in APP:
                continue
            env = service["environment"]
            assert env["DATABASE_URL"].endswith("@${PMD_DB_HOST:-db}:5432/pmd"), name
            assert env["CELERY_BROKER_URL"] == "redis://:${REDIS_PASSWORD:-pmd}@${PMD_REDIS_HOST:-redis}:6379/0", name
            assert env["OLLAMA_URL"] == "http://${PMD_OLLAMA_HOST:-ollama}:11434", name
            assert "${PMD_NOTES_DIR:-./notes}:/notes:ro" in service["volumes"], name
            for dependency in (service.get("depends_on") or {}).values():
                if profile != "main":
                    assert dependency.get("required") is False, name  # on another host


def test_the_replica_host_streams_from_the_primary(merged):
    replica = merged["services"]["db-replica"]
    assert "pg_basebackup" in replica["command"][0] and " -R " in replica["command"][0]
    assert "wal_level=replica" in merged["services"]["db"]["command"]
    assert "host replication pmd" in merged["configs"]["allow-replication"]["content"]


def test_every_pmd_command_of_the_override_exists(merged):
    from pmd_site.cli import build_parser

    parser = build_parser()
    for name in APP:
        service = merged["services"][name]
        for argv in (
            service["command"],
            service["healthcheck"]["test"][2:]
            if "healthcheck" in service and service["healthcheck"].get("test", [None, None])[:2] == ["CMD", "pmd"]
            else None,
        ):
            if argv:
                assert callable(parser.parse_args(argv).func), argv


def test_every_variable_the_override_interpolates_is_documented_in_env_example():
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", SCALE.read_text().replace("$$", "")))
    assert {"PMD_DB_HOST", "PMD_OLLAMA_HOST", "PMD_WEB_REPLICAS"} <= used
    assert not sorted(used - _documented())


def test_the_override_says_how_each_host_starts_it():
    text = SCALE.read_text()
    for profile in ("main", "index", "gpu", "replica"):
        assert f"docker compose -f compose.yaml -f compose.scale.yaml --profile {profile} up -d" in text
