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
  one run usually covers them all);
* the checks never stop (every FIRST_CHECK_SECONDS, doubling, at most LONGEST_CHECK_SECONDS
  apart), and they do not depend on one delayed broker message arriving: the waiting request
  records when its next check is due (`next_check_at`) and a periodic task
  (`embedding_check_due`) runs a check that is overdue (its message lost with a restarted
  worker or broker), or starts the checks when no request holds them;
* a worker that starts tidies what an earlier run left: waiting or queued requests nobody works
  on are merged into one request, and whatever is pending gets one (`embedding_jobs_tidy`).

The outage is recorded in the waiting jobs themselves (`result["waiting"]`), so every
worker process and machine sees it through the database; an advisory lock makes the
"went away" and "came back" decisions one process at a time.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from indexing.errors import EmbeddingStopped, LLMBackendError
from indexing.llm import get_backend
from indexing.locks import EMBEDDING_QUEUE, advisory_lock
from indexing.models import Job
from indexing.services.embedding import (
    embed_pending,
    embedding_config,
    embedding_waiting,
    fingerprint_configured,
    pending_contents,
    wanted_contents,
)
from indexing.services.jobs import job_create, job_finish, job_release

logger = logging.getLogger(__name__)

FIRST_CHECK_SECONDS = 15  # the waiting request checks again after this, then twice as long each time
LONGEST_CHECK_SECONDS = 120  # and never less often: a check is one small request
OVERDUE_GRACE_SECONDS = 30  # a check this late lost its message: the periodic task runs it
MERGED = "merged into the embedding request {job} (an earlier run left it queued)"


def embedding_job_run(
    *, job: Job, collections: list[str] | None = None, force: bool = False, check: int | None = None
) -> dict:
    """Run one queued embedding request; while the backend is away it waits instead of failing.

    `check`: the delivery is the waiting request's check number `check` (a re-queued message, or
    the periodic task's): an older one than the request's own (the periodic task ran it
    meanwhile) is skipped, so only one chain of checks goes on.

    The outcome is the run's report, or {"skipped": why}, or {"stopped": why} (the worker shuts
    down), or {"waiting": why, "check_again_in": seconds or None, "check": its number} (seconds
    only for the one request that is to be re-queued)."""
    if job.state == Job.State.DONE:
        return {"skipped": "already done"}  # a duplicate delivery, or resumed by another run
    marker = (job.result or {}).get("waiting") or {}
    if check is not None and marker.get("checks") is not None and marker["checks"] != check:
        return {"skipped": "a newer check of the LLM backend is scheduled"}
    waited = "waiting" in (job.result or {})
    if waited or embedding_waiting().exists():
        problem = _backend_problem()  # one quick question, no retries, nothing logged
        if problem:
            return _wait(job, collections=collections, force=force, problem=problem)
    try:  # waits its turn if another run embeds right now
        report = embed_pending(collections=collections, force=force, job=job)
    except LLMBackendError as exc:
        return _wait(job, collections=collections, force=force, problem=str(exc))
    except EmbeddingStopped as exc:  # the worker is shutting down: the job says so, the rest waits for the next run
        return {"stopped": str(exc)}
    with advisory_lock(key=EMBEDDING_QUEUE):
        others = list(embedding_waiting().exclude(pk=job.pk).order_by("created_at"))
        for other in others:  # claimed: no other process resumes them too
            Job.objects.filter(pk=other.pk).update(result={}, message="resuming")
    if waited or others:
        logger.info("the LLM backend answers again: embedding resumed (%d waiting request(s))", len(others) + waited)
    for other in others:
        _resume(other, done_by=job, done_scope=collections, report=report.as_dict())
    return report.as_dict()


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
        marker = {"collections": collections, "force": force, "since": mine.get("since") or timezone.now().isoformat()}
        check_again_in = None
        if checker:  # the one request that is re-queued to check again
            marker["checks"] = mine.get("checks", -1) + 1
            check_again_in = check_delay(marker["checks"])
            marker["next_check_at"] = (timezone.now() + timedelta(seconds=check_again_in)).isoformat()
        job_release(job)  # parked: no process works on it until the backend answers
        Job.objects.filter(pk=job.pk).update(
            state=Job.State.QUEUED,
            finished_at=None,
            result={"waiting": marker},
            message=f"waiting for the LLM backend: {problem}"[:5000],
        )
    if new_outage:
        logger.warning("embedding waits: %s (queued requests resume once it answers)", problem)
    return {"waiting": problem, "check_again_in": check_again_in, "check": marker.get("checks")}


def check_delay(checks: int) -> int:
    """Seconds until check number `checks` + 1: growing, bounded, never giving up."""
    return min(FIRST_CHECK_SECONDS * 2 ** min(checks, 16), LONGEST_CHECK_SECONDS)


def embedding_check_due() -> tuple[Job, int | None] | None:
    """The waiting request whose check of the backend should run now, with its check number
    (periodic: a check whose message was lost is run late instead of never), or None.

    No request holding the checks (its job failed or was recovered) makes the oldest one the checker."""
    with advisory_lock(key=EMBEDDING_QUEUE):
        waiting = list(embedding_waiting().order_by("created_at"))
        if not waiting:
            return None
        checkers = [job for job in waiting if job.result["waiting"].get("checks") is not None]
        if not checkers:
            return waiting[0], None
        checker = checkers[0]
        marker = checker.result["waiting"]
        due = marker.get("next_check_at")
        due_at = datetime.fromisoformat(due) if due else None
        if due_at is not None and timezone.now() < due_at + timedelta(seconds=OVERDUE_GRACE_SECONDS):
            return None  # its own message comes in time
        return checker, marker["checks"]


def embedding_jobs_tidy() -> Job | None:
    """A worker starting: the embedding requests an earlier run left queued (waiting for a backend
    that was away, or queued while no worker ran) are merged into one, and if anything is pending
    and no request covers it, one is made. Returns the request to hand to the worker, or None."""
    with advisory_lock(key=EMBEDDING_QUEUE):
        left = list(
            Job.objects.filter(kind=Job.Kind.EMBED, state=Job.State.QUEUED, worker_pid__isnull=True).order_by(
                "created_at"
            )
        )
        forced = [job for job in left if ((job.result or {}).get("waiting") or {}).get("force")]
        fingerprint = fingerprint_configured()
        pending = wanted_contents().exists() if fingerprint is None else pending_contents(fingerprint).exists()
        if not left and not pending:
            return None
        keep = job_create(kind=Job.Kind.EMBED, message="queued")
        for job in left:
            if job in forced:
                continue  # `pmd embed -f` asked for more than what is pending: it runs as asked
            Job.objects.filter(pk=job.pk, state=Job.State.QUEUED).update(
                state=Job.State.DONE,
                finished_at=timezone.now(),
                result={"merged_into": str(keep.pk)},
                message=MERGED.format(job=keep.pk),
            )
    if left:
        logger.info("%d embedding request(s) left queued by an earlier run merged into one", len(left) - len(forced))
    return keep


def _resume(job: Job, *, done_by: Job, done_scope: list[str] | None, report: dict) -> None:
    """Complete a request that waited: done by the run that just succeeded if that covered it."""
    marker = job.result.get("waiting") or {}
    wanted, force = marker.get("collections"), bool(marker.get("force"))
    if not force and (done_scope is None or (wanted and set(wanted) <= set(done_scope))):
        job_finish(
            job, result={**report, "done_by": str(done_by.pk)}, message="embedded once the LLM backend answered again"
        )
        return
    job.refresh_from_db()
    embedding_job_run(job=job, collections=wanted, force=force)
