"""The worker while the LLM backend is away: one log line when it goes, one when it is back,
and the queued embedding requests wait (not failed, not lost) and complete afterwards."""

from __future__ import annotations

import logging

import pytest

from pmd_site import tasks
from indexing.models import ContentEmbedding, EmbeddingFingerprint, Job
from indexing.services.embedding import pending_contents
from indexing.services.jobs import job_create

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
                queue = conn.SimpleQueue(app.conf.task_default_queue)
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
def test_backend_away_logs_once_and_queued_requests_wait_then_resume(indexed_collection, ollama, broker,
                                                                      caplog, settings, outage):
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


def test_a_request_arriving_after_the_backend_is_back_resumes_the_waiting_ones(indexed_collection, ollama,
                                                                                broker, caplog):
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
    (kwargs, _eta), = broker.drain()
    assert tasks.embed_pending(**kwargs) == {"skipped": "already done"}
