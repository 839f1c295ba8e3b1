"""`pmd embed`, `pmd models`, the embedded Redis and a real celery worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from indexing.models import Chunk, Job
from pmd_site.runtime.redis_server import EmbeddedRedis
from tests.support.paths import ROOT

# --- embedded Redis ---------------------------------------------------------------------------


def test_embedded_redis_start_status_stop(tmp_path):
    server = EmbeddedRedis(tmp_path)
    assert not server.status().running
    try:
        assert server.start() is True
        state = server.status()
        assert state.running and state.pid
        assert server.start() is False, "already running"
        assert server.ping()
        assert oct(server.socket_path.stat().st_mode & 0o777) == "0o700"
        import redis

        client = redis.Redis.from_url(server.redis_url())
        client.set("k", "v")
        assert client.get("k") == b"v"
        client.close()
    finally:
        assert server.stop() is True
    assert not server.status().running and not server.socket_path.exists()
    assert server.stop() is False


def test_embedded_redis_ignores_a_stale_pid_file(tmp_path):
    server = EmbeddedRedis(tmp_path)
    server.root.mkdir(parents=True)
    server.pid_file.write_text(str(os.getpid()))  # a live pid that is not redis
    state = server.status()
    assert not state.running and state.stale_pid
    try:
        assert server.start() is True
        assert server.status().pid != os.getpid()
    finally:
        server.stop()


# --- pmd embed / pmd models (in-process, no worker) ----------------------------------------------


@pytest.mark.django_db
def test_pmd_embed_runs_in_process_without_a_worker(indexed_collection, ollama, run_cli, settings):
    settings.PMD_CHUNK_TOKENS = 60
    code, out, err = run_cli("embed")
    assert code == 0, err
    assert out.startswith("embedded ") and "with embeddinggemma (768d)" in out
    assert Job.objects.get(kind=Job.Kind.EMBED).state == Job.State.DONE
    code, out, err = run_cli("embed", "--json")
    assert code == 0 and json.loads(out)["pending_before"] == 0
    code, out, err = run_cli("embed")
    assert "nothing to embed" in out
    code, out, err = run_cli("embed", "-f", "--json")
    assert json.loads(out)["chunks"] == Chunk.objects.count()


@pytest.mark.django_db
def test_pmd_embed_errors_are_one_line(indexed_collection, ollama, run_cli, settings):
    code, out, err = run_cli("embed", "-c", "nope")
    assert code == 1 and "nope" in err
    settings.PMD_EMBED_MODEL = "missing-model"
    code, out, err = run_cli("embed")
    assert code == 1
    assert "model missing-model is not pulled (`ollama pull missing-model`): pull it with `pmd models pull`" in err
    assert "Traceback" not in err


@pytest.mark.django_db
def test_pmd_status_shows_embeddings(indexed_collection, ollama, run_cli):
    code, out, _ = run_cli("status", "--json")
    section = json.loads(out)["embeddings"]
    assert section["model"] == "embeddinggemma" and section["embedded"] == 0
    assert section["pending"] == section["contents"] > 0 and "pmd embed" in section["hint"]
    run_cli("embed")
    section = json.loads(run_cli("status", "--json")[1])["embeddings"]
    assert section["pending"] == 0 and section["fingerprint"]["dims"] == 768 and section["hnsw_index"]
    assert section["job"]["state"] == "done"


def test_pmd_models_list_and_pull(ollama, run_cli, settings):
    settings.PMD_RERANK_MODEL = "reranker-x"
    code, out, err = run_cli("models", "list", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["models"]}
    assert rows["embeddinggemma:latest"]["roles"] == ["embed"]
    assert rows["qwen3:0.6b"]["roles"] == ["generate"]
    assert rows["reranker-x"]["present"] is False
    ollama.offer_for_pull("reranker-x", kind="completion")
    code, out, err = run_cli("models", "pull")
    assert code == 0, err
    assert "pulled reranker-x" in out
    assert ollama.model("reranker-x") is not None
    code, out, _ = run_cli("models", "pull")
    assert "every configured model is present" in out
    code, out, err = run_cli("models", "pull", "no-such-model")
    assert code == 1 and "cannot pull no-such-model" in err


def test_pmd_models_with_ollama_down(ollama_down, run_cli):
    code, out, err = run_cli("models", "list")
    assert code == 1 and f"Ollama is not reachable at {ollama_down}" in err


# --- a real worker over the embedded Redis -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_pmd_embed_hands_the_work_to_a_running_worker(indexed_collection, ollama, run_cli, settings, database_url):
    from django.conf import settings as live

    from pmd_site.celery import app, workers_available

    redis_server = EmbeddedRedis(live.PMD_HOME)
    assert app.conf.broker_url == redis_server.url()
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        OLLAMA_URL=ollama.url,
        PMD_LLM_BACKEND="ollama",
        PMD_EMBED_MODEL="embeddinggemma",
    )
    redis_server.start()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "pmd_site.celery",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "--queues=pmd,pmd-embed",
            "--hostname=test-worker@%h",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(120):
            if workers_available(timeout=0.5) or worker.poll() is not None:
                break
            time.sleep(0.5)
        assert worker.poll() is None, worker.stderr.read().decode()[-2000:]
        code, out, err = run_cli("embed")
        assert code == 0, err
        # The worker queues what is pending when it starts: `pmd embed` may find it done.
        assert out.startswith(("embedded ", "nothing to embed"))
        jobs = Job.objects.filter(kind=Job.Kind.EMBED)
        assert {job.state for job in jobs} == {Job.State.DONE}
        assert sum(job.result.get("chunks", 0) for job in jobs) == Chunk.objects.count() > 0
        assert all(job.worker_pid != os.getpid() for job in jobs)  # done by the worker, not here
        code, out, err = run_cli("embed", "--no-wait")
        assert code == 0 and out.startswith("embedding queued; `pmd status` follows it")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        redis_server.stop()
