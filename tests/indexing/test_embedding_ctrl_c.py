"""Ctrl-C during `pmd embed` stops it at once: it does not wait for the batch the model server is
still embedding (a real process, a real SIGINT, a model server that does not answer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def test_ctrl_c_during_embedding_stops_without_waiting_for_the_batch_in_flight(
    indexed_collection, ollama, database_url
):
    asked, answer = threading.Event(), threading.Event()

    def hold(call, texts):  # the model server takes the batch and does not answer until told
        asked.set()
        answer.wait(120)

    ollama.on_embed = hold
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        OLLAMA_URL=ollama.url,
        PMD_LLM_BACKEND="ollama",
        PMD_EMBED_MODEL="embeddinggemma",
        PMD_EMBED_BATCH="2",
        PMD_LLM_RETRIES="0",
        PMD_LLM_TIMEOUT="300",
        PMD_CLIENT="never",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "pmd_site.cli", "embed"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert asked.wait(60), "the embedding never reached the model server"
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)  # the server still holds the batch: only an exit that does not wait ends here
        except subprocess.TimeoutExpired:
            pytest.fail("pmd embed waited for the batch in flight after Ctrl-C")
        assert not answer.is_set()
        assert process.returncode == 130, process.stderr.read().decode()[-2000:]
        assert "interrupted" in process.stderr.read().decode()
    finally:
        answer.set()
        ollama.on_embed = None
        if process.poll() is None:
            process.kill()
            process.wait()
