"""Progress records for long work, written by whoever does the work (task or CLI)."""

from __future__ import annotations

import time

from django.utils import timezone

from indexing.models import Collection, Job


def job_create(*, kind: str, collection: Collection | None = None, total: int = 0, message: str = "",
               created_by=None) -> Job:
    """A queued job; `created_by` is the web/API user who started it (they may follow it)."""
    return Job.objects.create(kind=kind, collection=collection, total=total, message=message, created_by=created_by)


def job_start(job: Job, *, total: int | None = None) -> None:
    job.state = Job.State.RUNNING
    job.started_at = timezone.now()
    fields = ["state", "started_at"]
    if total is not None:
        job.total = total
        fields.append("total")
    job.save(update_fields=fields)


class JobProgress:
    """A progress callback that writes to the job at most every `interval` seconds."""

    def __init__(self, job: Job, *, interval: float = 0.5):
        self.job = job
        self.interval = interval
        self._last = 0.0

    def __call__(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last < self.interval and done < total:
            return
        self._last = now
        Job.objects.filter(pk=self.job.pk).update(done=done, total=total, message=message[:500])


def job_finish(job: Job, *, result: dict | None = None, message: str = "") -> None:
    # Progress is written straight to the row (JobProgress); start from what is stored.
    job.refresh_from_db(fields=["done", "total"])
    job.state = Job.State.DONE
    job.finished_at = timezone.now()
    job.result = result or {}
    job.message = message
    if job.total:
        job.done = job.total
    job.save(update_fields=["state", "finished_at", "result", "message", "done"])


def job_fail(job: Job, *, message: str) -> None:
    job.state = Job.State.FAILED
    job.finished_at = timezone.now()
    job.message = message[:5000]
    job.save(update_fields=["state", "finished_at", "message"])
