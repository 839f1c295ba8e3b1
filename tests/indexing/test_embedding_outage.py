"""The worker while the LLM backend is away: one log line when it goes, one when it is back,
and the queued embedding requests wait (not failed, not lost) and complete afterwards."""

from __future__ import annotations

import logging

import pytest

from indexing.models import ContentEmbedding, EmbeddingFingerprint, Job
from indexing.services.embedding import pending_contents
from indexing.services.jobs import job_create
from pmd_site import tasks
from pmd_site.celery import EMBED_QUEUE

pytestmark = pytest.mark.django_db

OURS = ("indexing", "search", "pmd")  # our loggers (not kombu's, which the in-memory broker wakes)


@pytest.fixture
def broker():
    """Celery publishing into an in-memory broker; `broker.drain()` takes what was queued."""
    from pmd_site.celery import app

    def reset_pools():
        app._pool = None
        app.amqp._producer_pool = None

    class Broker:
        @staticmethod
        def drain() -> list[tuple[dict, str | None]]:
            """(task kwargs, eta) of every queued message, oldest first."""
            taken = []
            with app.connection_for_read() as conn:
                queue = conn.SimpleQueue(EMBED_QUEUE)  # embedding has its own queue
                try:
                    while queue.qsize():
                        message = queue.get(timeout=1)
                        taken.append((message.payload[1], message.headers.get("eta")))
                        message.ack()
                finally:
                    queue.close()
            return taken

    old = app.conf.broker_url
    app.conf.broker_url = "memory://"
    reset_pools()
    Broker.drain()
    yield Broker
    Broker.drain()
    app.conf.broker_url = old
    reset_pools()


def our_lines(caplog) -> list[str]:
    return [f"{r.levelname} {r.getMessage()}" for r in caplog.records if r.name.startswith(OURS)]


@pytest.mark.parametrize("outage", ["stopped", "failing"])
def test_backend_away_logs_once_and_queued_requests_wait_then_resume(
    indexed_collection, ollama, broker, caplog, settings, outage
):
    settings.PMD_LLM_RETRIES = 3  # the worker's default: every request used to retry three times
    port = ollama.port
    if outage == "stopped":
        ollama.stop()
    else:
        ollama.fail_always = 500
    caplog.set_level(logging.INFO)

    jobs = [job_create(kind=Job.Kind.EMBED, message="queued") for _ in range(10)]
    outcomes = [tasks.embed_pending(job_id=str(job.pk)) for job in jobs]

    lines = our_lines(caplog)
    assert len(lines) == 1 and lines[0].startswith("WARNING embedding waits:"), lines
    states = set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("state", "message"))
    assert {state for state, _ in states} == {Job.State.QUEUED}
    assert all(message.startswith("waiting for the LLM backend: ") for _, message in states)
    assert all("waiting" in outcome for outcome in outcomes)
    # one request, the first, is queued again to check later; the others just wait
    queued = broker.drain()
    assert [kwargs["job_id"] for kwargs, _ in queued] == [str(jobs[0].pk)]
    assert queued[0][1] is not None  # with a countdown
    assert ContentEmbedding.objects.count() == 0

    # the check comes while the backend is still away: silent, and it is queued once more
    caplog.clear()
    tasks.embed_pending(**queued[0][0])
    assert our_lines(caplog) == []
    again = broker.drain()
    assert [kwargs["job_id"] for kwargs, _ in again] == [str(jobs[0].pk)]
    assert again[0][1] > queued[0][1]

    if outage == "stopped":
        ollama.start(port)
    else:
        ollama.fail_always = None
    caplog.clear()
    tasks.embed_pending(**again[0][0])

    lines = our_lines(caplog)
    assert len(lines) == 1 and "answers again" in lines[0], lines
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("state", flat=True)) == {Job.State.DONE}
    assert not pending_contents(EmbeddingFingerprint.objects.get()).exists()
    assert ContentEmbedding.objects.count() > 0
    assert broker.drain() == []


def test_a_request_arriving_after_the_backend_is_back_resumes_the_waiting_ones(
    indexed_collection, ollama, broker, caplog
):
    ollama.stop()
    port = ollama.port
    waiting = [job_create(kind=Job.Kind.EMBED) for _ in range(3)]
    for job in waiting:
        tasks.embed_pending(job_id=str(job.pk))
    ollama.start(port)
    caplog.set_level(logging.INFO)

    fresh = job_create(kind=Job.Kind.EMBED)
    report = tasks.embed_pending(job_id=str(fresh.pk))
    assert report["contents"] > 0
    assert [line for line in our_lines(caplog) if "answers again" in line] != []
    assert set(Job.objects.values_list("state", flat=True)) == {Job.State.DONE}
    # the check that was queued for the first one finds its work done
    ((kwargs, _eta),) = broker.drain()
    assert tasks.embed_pending(**kwargs) == {"skipped": "already done"}


def make_overdue(job: Job) -> None:
    """As if the check's time came and went (its delayed message lost with a restarted worker)."""
    from datetime import timedelta

    from django.utils import timezone

    job.refresh_from_db()
    marker = dict(job.result["waiting"], next_check_at=(timezone.now() - timedelta(minutes=5)).isoformat())
    Job.objects.filter(pk=job.pk).update(result={"waiting": marker})


def test_checks_grow_but_never_stop():
    from indexing.services.embedding_queue import LONGEST_CHECK_SECONDS, check_delay

    delays = [check_delay(n) for n in range(200)]
    assert delays == sorted(delays) and delays[0] > 0
    assert delays[-1] == LONGEST_CHECK_SECONDS <= 120  # a model back is noticed within two minutes


def test_a_lost_check_is_run_by_the_periodic_task_and_embedding_resumes_when_the_server_is_back(
    indexed_collection, ollama, broker
):
    port = ollama.port
    ollama.stop()
    job = job_create(kind=Job.Kind.EMBED, message="queued")
    outcome = tasks.embed_pending(job_id=str(job.pk))
    assert outcome["check_again_in"] and outcome["check"] == 0
    ((lost, _eta),) = broker.drain()  # the delayed check is lost (a restarted worker, a flushed broker)
    assert tasks.embedding_check() == {"skipped": "no check due"}  # not late yet: its message may still come

    make_overdue(job)
    assert "waiting" in tasks.embedding_check()  # still down: checked, waiting again, the next check queued
    ((again, _eta),) = broker.drain()
    assert again["check"] == 1
    assert tasks.embed_pending(**lost) == {"skipped": "a newer check of the LLM backend is scheduled"}

    ollama.start(port)
    make_overdue(job)
    report = tasks.embedding_check()
    assert report["contents"] > 0
    job.refresh_from_db()
    assert job.state == Job.State.DONE
    assert not pending_contents(EmbeddingFingerprint.objects.get()).exists()
    assert tasks.embed_pending(**again) == {"skipped": "already done"}


def test_a_waiting_request_without_a_checker_gets_one(indexed_collection, ollama, broker):
    ollama.stop()
    port = ollama.port
    job = job_create(kind=Job.Kind.EMBED)
    tasks.embed_pending(job_id=str(job.pk))
    broker.drain()
    job.refresh_from_db()
    marker = {k: v for k, v in job.result["waiting"].items() if k not in {"checks", "next_check_at"}}
    Job.objects.filter(pk=job.pk).update(result={"waiting": marker})  # the checker's job was failed meanwhile
    ollama.start(port)
    assert tasks.embedding_check()["contents"] > 0


def test_a_starting_worker_merges_what_an_outage_left_and_queues_the_pending(indexed_collection, ollama, broker):
    """`pmd up` indexes before its worker runs: nothing was queued. Requests of an earlier outage
    wait in the database with no message left."""
    ollama.stop()
    port = ollama.port
    left = [job_create(kind=Job.Kind.EMBED) for _ in range(3)]
    for job in left:
        tasks.embed_pending(job_id=str(job.pk))
    broker.drain()
    ollama.start(port)

    tasks._embedding_at_start(sender=None)

    ((kwargs, _eta),) = broker.drain()
    merged = Job.objects.filter(pk__in=[j.pk for j in left])
    assert set(merged.values_list("state", flat=True)) == {Job.State.DONE}
    assert all(m.startswith("merged into the embedding request") for m in merged.values_list("message", flat=True))
    assert tasks.embed_pending(**kwargs)["contents"] > 0
    assert not pending_contents(EmbeddingFingerprint.objects.get()).exists()


def test_a_fresh_index_gets_its_embedding_queued_when_the_worker_starts(indexed_collection, ollama, broker):
    assert not Job.objects.filter(kind=Job.Kind.EMBED).exists()  # indexed with no worker: nothing queued
    tasks._embedding_at_start(sender=None)
    ((kwargs, _eta),) = broker.drain()
    assert tasks.embed_pending(**kwargs)["contents"] > 0
    tasks._embedding_at_start(sender=None)  # nothing pending any more: nothing queued
    assert broker.drain() == []


def test_indexing_and_embedding_take_separate_queues():
    from pmd_site.celery import DEFAULT_QUEUE, app

    def queue(name):
        return app.amqp.router.route({}, name)["queue"].name

    assert queue("pmd_site.tasks.collection_index_task") == queue("pmd_site.tasks.reconcile") == DEFAULT_QUEUE
    assert queue("pmd_site.tasks.embed_pending") == queue("pmd_site.tasks.embedding_check") == EMBED_QUEUE
