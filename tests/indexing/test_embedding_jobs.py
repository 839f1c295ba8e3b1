"""Embed jobs wait for the run in progress instead of failing; jobs of a killed worker do not stay running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from indexing.chunking import chunk_markdown
from indexing.models import Chunk, Content, Job
from indexing.services import jobs as job_service
from indexing.services.embedding import chunk_params_from_settings, embed_pending
from indexing.services.embedding_queue import embedding_job_run
from indexing.services.jobs import job_create, job_start, jobs_recover
from indexing.services.scanning import collection_index
from tests.support.factories import make_user
from tests.support.paths import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def expected_chunks() -> int:
    params = chunk_params_from_settings()
    contents = Content.objects.filter(documents__active=True).distinct()
    return sum(len(chunk_markdown(c.body, params)) for c in contents)


def wait_for(predicate, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def small_batches(settings):
    settings.PMD_EMBED_BATCH = 2
    settings.PMD_CHUNK_TOKENS = 40
    return settings


def test_an_embed_job_started_during_another_run_waits_then_embeds_what_that_run_missed(
    indexed_collection, ollama, small_batches, corpus_dir
):
    first, second = job_create(kind=Job.Kind.EMBED), job_create(kind=Job.Kind.EMBED)
    in_first_run, let_go = threading.Event(), threading.Event()

    def hold_the_first_batch(call, texts):
        if call == 1:
            in_first_run.set()
            let_go.wait(timeout=8)  # under the client's timeout

    ollama.on_embed = hold_the_first_batch
    outcomes: dict[str, object] = {}

    def run(job: Job) -> None:
        try:
            outcomes[job.pk] = embedding_job_run(job=job)
        except Exception as exc:  # noqa: BLE001 - reported by the asserts below
            outcomes[job.pk] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(first,))]
    threads[0].start()
    assert in_first_run.wait(timeout=20)
    # A note written after the first run listed what was pending: only a later run can embed it.
    (corpus_dir / "late.md").write_text("# Late\n\nWritten while the first run was embedding.\n")
    collection_index(indexed_collection)
    threads.append(threading.Thread(target=run, args=(second,)))
    threads[1].start()

    def second_waits_or_ends():
        second.refresh_from_db()
        return second.finished or second.message == "waiting for another embedding to finish"

    wait_for(second_waits_or_ends, "the second job to wait or end")
    assert second.state == Job.State.QUEUED, second.message
    assert (second.worker_pid, second.worker_host) == (os.getpid(), job_service._HOST)
    let_go.set()
    for thread in threads:
        thread.join(timeout=60)

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, second.state) == (Job.State.DONE, Job.State.DONE), (first.message, second.message)
    assert first.result["chunks"] > 0 and second.result["contents"] == 1  # only the late note
    assert Chunk.objects.count() == expected_chunks()
    assert Chunk.objects.values("content", "seq").distinct().count() == expected_chunks()
    assert ollama.embedded_inputs == expected_chunks(), "nothing was embedded twice"


KILLED_WORKER = """
import sys, time
from pmd_site.runtime.process import setup_django
setup_django()
from indexing.models import Job
from indexing.services.jobs import job_start
job_start(Job.objects.get(pk=sys.argv[1]))
print("running", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", [Job.Kind.INDEX, Job.Kind.EMBED])
def test_a_job_whose_worker_is_killed_is_marked_failed_worker_stopped(
    kind, db, database_url, client, django_user_model
):
    job = job_create(kind=kind)
    env = dict(os.environ, DATABASE_URL=database_url)
    worker = subprocess.Popen(
        [sys.executable, "-c", KILLED_WORKER, str(job.pk)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert worker.stdout.readline() == b"running\n", worker.stderr.read().decode()[-2000:]
        job.refresh_from_db()
        assert job.state == Job.State.RUNNING and job.worker_pid == worker.pid
        assert jobs_recover() == 0, "a live worker's job is left alone"
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    assert worker.returncode == -signal.SIGKILL
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING  # the dead worker could not say so

    staff = make_user("staff", password="pw", staff=True)
    client.force_login(staff)
    shown = client.get(f"/api/jobs/{job.pk}").json()  # reading it is enough to find out
    assert shown["state"] == "failed"
    assert shown["message"].startswith(f"worker stopped: process {worker.pid} on ")
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.finished_at is not None


def test_a_worker_starting_recovers_the_jobs_left_running(db):
    from pmd_site.tasks import _recover_jobs_at_start

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    job = job_create(kind=Job.Kind.EMBED)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        started_at=timezone.now(),
        worker_host=job_service._HOST,
        worker_pid=gone.pid,
        heartbeat_at=timezone.now(),
    )
    _recover_jobs_at_start()
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.message.startswith("worker stopped")


def test_another_machines_job_is_recovered_only_when_its_heartbeat_is_stale(db, settings):
    settings.PMD_JOB_STALE_SECONDS = 300
    now = timezone.now()
    fresh, stale, waiting = (job_create(kind=Job.Kind.INDEX) for _ in range(3))
    for job, state, age in (
        (fresh, Job.State.RUNNING, 10),
        (stale, Job.State.RUNNING, 301),
        (waiting, Job.State.QUEUED, 301),
    ):
        Job.objects.filter(pk=job.pk).update(
            state=state,
            started_at=now - timedelta(seconds=age),
            worker_host="another-machine",
            worker_pid=os.getpid(),
            heartbeat_at=now - timedelta(seconds=age),
        )
    queued_for_a_worker = job_create(kind=Job.Kind.EMBED)  # no process has it: the broker's business
    Job.objects.filter(pk=queued_for_a_worker.pk).update(created_at=now - timedelta(days=1))
    assert jobs_recover() == 2
    states = {j.pk: j.state for j in Job.objects.all()}
    assert states[fresh.pk] == Job.State.RUNNING
    assert states[stale.pk] == states[waiting.pk] == Job.State.FAILED
    assert states[queued_for_a_worker.pk] == Job.State.QUEUED


def test_a_running_job_keeps_its_heartbeat_fresh(db, settings, monkeypatch):
    settings.PMD_JOB_STALE_SECONDS = 30
    monkeypatch.setattr(job_service._Heartbeat, "interval", classmethod(lambda cls: 0.05))
    job = job_create(kind=Job.Kind.INDEX)
    job_start(job)
    old = timezone.now() - timedelta(seconds=31)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=old)
    wait_for(lambda: Job.objects.get(pk=job.pk).heartbeat_at > old, "a heartbeat")
    assert jobs_recover() == 0
    job_service.job_finish(job)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=old)
    time.sleep(0.3)
    assert Job.objects.get(pk=job.pk).heartbeat_at == old, "a finished job is not kept alive"


def test_a_run_holding_the_lock_recovers_embed_jobs_left_running(indexed_collection, ollama, small_batches):
    dead = job_create(kind=Job.Kind.EMBED)
    Job.objects.filter(pk=dead.pk).update(state=Job.State.RUNNING, started_at=timezone.now())
    report = embed_pending()
    dead.refresh_from_db()
    assert report.interrupted_jobs == 1 and dead.state == Job.State.FAILED
    assert dead.message.startswith("worker stopped")
