"""A worker killed in the middle of a batch loses nothing (real SIGKILL of a real process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from indexing.chunking import chunk_markdown
from indexing.models import Chunk, Content, Job
from indexing.services.embedding import chunk_params_from_settings, embed_pending, embedding_running, embedding_status
from tests.support.paths import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = """
from pmd_site.runtime.process import setup_django
setup_django()
from indexing.services.embedding import embed_pending
from indexing.services.jobs import job_create
embed_pending(job=job_create(kind="embed"))
"""


def test_killed_worker_mid_batch_is_resumed_without_duplicates(indexed_collection, ollama, settings, database_url):
    settings.PMD_EMBED_BATCH = 2
    settings.PMD_CHUNK_TOKENS = 40
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        OLLAMA_URL=ollama.url,
        PMD_LLM_BACKEND="ollama",
        PMD_EMBED_MODEL="embeddinggemma",
        PMD_EMBED_BATCH="2",
        PMD_CHUNK_TOKENS="40",
        PMD_LLM_RETRIES="0",
    )
    worker: dict = {}

    def kill_during_third_batch(call, texts):
        if call == 3:
            os.kill(worker["proc"].pid, signal.SIGKILL)
            worker["proc"].wait()

    ollama.on_embed = kill_during_third_batch
    worker["proc"] = subprocess.Popen([sys.executable, "-c", WORKER], env=env, cwd=ROOT, stderr=subprocess.PIPE)
    worker["proc"].wait(timeout=120)
    assert worker["proc"].returncode == -signal.SIGKILL, worker["proc"].stderr.read().decode()[-2000:]

    params = chunk_params_from_settings()
    expected = sum(
        len(chunk_markdown(c.body, params)) for c in Content.objects.filter(documents__active=True).distinct()
    )
    stored = Chunk.objects.count()
    assert 2 <= stored < expected, "some batches were committed before the kill, not all"
    assert Job.objects.get().state == Job.State.RUNNING  # the dead worker could not say so

    # PostgreSQL drops the dead session, and its run lock with it.
    for _ in range(100):
        if not embedding_running():
            break
        time.sleep(0.1)
    assert embedding_status()["job"]["state"] == "interrupted"

    ollama.on_embed = None
    calls_before = ollama.embedded_inputs
    report = embed_pending()
    assert report.interrupted_jobs == 1
    assert Job.objects.get().state == Job.State.FAILED
    assert Chunk.objects.count() == expected
    assert Chunk.objects.values("content", "seq").distinct().count() == expected
    assert ollama.embedded_inputs - calls_before == expected - stored
