"""Embedding requests run by the worker, and what becomes of them while the LLM backend is away.

Every scan that changes something queues an embedding request, so an Ollama that is
down (or a model not pulled) used to fail each of them, each with its retries and its
log line. Now:

* the first request that finds the backend away logs it once; its job waits (state
  `queued`, the message says why) and it alone is re-queued to check again, at
  growing intervals (`check_again_in` in its outcome, acted on by the task);
* requests arriving meanwhile ask the backend once, without retries, and wait
  silently, their jobs queued too: nothing is lost and nothing is marked failed;
* the first run that succeeds after that logs once that the backend is back, then
  completes the waiting requests (what is pending is derived from the database, so
  one run usually covers them all).

The outage is recorded in the waiting jobs themselves (`result["waiting"]`), so every
worker process and machine sees it through the database; an advisory lock makes the
"went away" and "came back" decisions one process at a time.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from indexing.locks import EMBEDDING_QUEUE, advisory_lock
from indexing.models import Job
from indexing.services.embedding import embed_pending, embedding_config
from indexing.services.jobs import job_finish, job_release
from indexing.errors import LLMBackendError
from indexing.llm import get_backend

logger = logging.getLogger(__name__)

FIRST_CHECK_SECONDS = 30  # the waiting request checks again after this, then twice as long each time
LONGEST_CHECK_SECONDS = 600


def embedding_job_run(*, job: Job, collections: list[str] | None = None, force: bool = False) -> dict:
    """Run one queued embedding request; while the backend is away it waits instead of failing.

    The outcome is the run's report, or {"skipped": why}, or {"waiting": why, "check_again_in":
    seconds or None} (seconds only for the one request that is to be re-queued)."""
    if job.state == Job.State.DONE:
        return {"skipped": "already done"}  # a duplicate delivery, or resumed by another run
    waited = "waiting" in (job.result or {})
    if waited or embedding_waiting().exists():
        problem = _backend_problem()  # one quick question, no retries, nothing logged
        if problem:
            return _wait(job, collections=collections, force=force, problem=problem)
    try:  # waits its turn if another run embeds right now
        report = embed_pending(collections=collections, force=force, job=job)
    except LLMBackendError as exc:
        return _wait(job, collections=collections, force=force, problem=str(exc))
    with advisory_lock(key=EMBEDDING_QUEUE):
        others = list(embedding_waiting().exclude(pk=job.pk).order_by("created_at"))
        for other in others:  # claimed: no other process resumes them too
            Job.objects.filter(pk=other.pk).update(result={}, message="resuming")
    if waited or others:
        logger.info("the LLM backend answers again: embedding resumed (%d waiting request(s))", len(others) + waited)
    for other in others:
        _resume(other, done_by=job, done_scope=collections, report=report.as_dict())
    return report.as_dict()


def embedding_waiting():
    """Jobs of embedding requests waiting for the LLM backend (a queryset)."""
    return Job.objects.filter(kind=Job.Kind.EMBED, state=Job.State.QUEUED, result__has_key="waiting")


def _backend_problem() -> str | None:
    """Why the backend cannot embed now (None if it can), asked once and quietly."""
    try:
        get_backend(retries=0).embedding_dims(embedding_config().model)
    except LLMBackendError as exc:
        return str(exc)
    return None


def _wait(job: Job, *, collections: list[str] | None, force: bool, problem: str) -> dict:
    """Park the request until the backend answers; log only when the outage is new."""
    with advisory_lock(key=EMBEDDING_QUEUE):
        job.refresh_from_db(fields=["result"])
        mine = (job.result or {}).get("waiting") or {}
        waiting = embedding_waiting().exclude(pk=job.pk)
        new_outage = not mine and not waiting.exists()
        checker = mine.get("checks") is not None or not waiting.filter(result__waiting__has_key="checks").exists()
        marker = {"collections": collections, "force": force,
                  "since": mine.get("since") or timezone.now().isoformat()}
        check_again_in = None
        if checker:  # the one request that is re-queued to check again
            marker["checks"] = mine.get("checks", -1) + 1
            check_again_in = min(FIRST_CHECK_SECONDS * 2 ** marker["checks"], LONGEST_CHECK_SECONDS)
        job_release(job)  # parked: no process works on it until the backend answers
        Job.objects.filter(pk=job.pk).update(
            state=Job.State.QUEUED, finished_at=None, result={"waiting": marker},
            message=f"waiting for the LLM backend: {problem}"[:5000],
        )
    if new_outage:
        logger.warning("embedding waits: %s (queued requests resume once it answers)", problem)
    return {"waiting": problem, "check_again_in": check_again_in}


def _resume(job: Job, *, done_by: Job, done_scope: list[str] | None, report: dict) -> None:
    """Complete a request that waited: done by the run that just succeeded if that covered it."""
    marker = job.result.get("waiting") or {}
    wanted, force = marker.get("collections"), bool(marker.get("force"))
    if not force and (done_scope is None or (wanted and set(wanted) <= set(done_scope))):
        job_finish(job, result={**report, "done_by": str(done_by.pk)},
                   message="embedded once the LLM backend answered again")
        return
    job.refresh_from_db()
    embedding_job_run(job=job, collections=wanted, force=force)
