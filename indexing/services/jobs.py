"""Progress records for long work, written by whoever does the work (task or CLI).

A job records the process working on it (host and pid) and a heartbeat that a thread of that
process refreshes while it works. A worker can die without a word (SIGKILL, out of memory, a
machine switched off), so `jobs_recover` marks the jobs of processes that are gone as failed
("worker stopped") instead of leaving them `running` forever: on this machine a dead pid is
noticed at once, elsewhere a heartbeat older than PMD_JOB_STALE_SECONDS.

Recovered jobs are failed, not re-queued: celery already redelivers the task of a worker it lost
(acks_late, reject_on_worker_lost), and that delivery runs the same job again; embedding work is
derived from the database, so nothing a failed embed job was doing is lost, the next run does it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from indexing.models import Collection, Job

log = logging.getLogger(__name__)

WORKER_STOPPED = "worker stopped"


def job_create(
    *, kind: str, collection: Collection | None = None, total: int = 0, message: str = "", created_by=None
) -> Job:
    """A queued job; `created_by` is the web/API user who started it (they may follow it)."""
    return Job.objects.create(kind=kind, collection=collection, total=total, message=message, created_by=created_by)


def job_start(job: Job, *, total: int | None = None) -> None:
    job.state = Job.State.RUNNING
    job.started_at = timezone.now()
    fields = ["state", "started_at", *_claim(job)]
    if total is not None:
        job.total = total
        fields.append("total")
    job.save(update_fields=fields)
    _Heartbeat.keep(job)


def job_wait(job: Job, *, message: str) -> None:
    """The job stays queued while this process waits to do it (e.g. for another embedding run):
    say why, and record the waiting process so that the job is recovered if that process dies."""
    job.message = message
    job.save(update_fields=["message", *_claim(job)])
    _Heartbeat.keep(job)


def _claim(job: Job) -> list[str]:
    job.worker_host, job.worker_pid, job.heartbeat_at = _HOST, os.getpid(), timezone.now()
    return ["worker_host", "worker_pid", "heartbeat_at"]


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
        Job.objects.filter(pk=self.job.pk).update(
            done=done, total=total, message=message[:500], heartbeat_at=timezone.now()
        )


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
    _Heartbeat.stop(job)


def job_fail(job: Job, *, message: str) -> None:
    job.state = Job.State.FAILED
    job.finished_at = timezone.now()
    job.message = message[:5000]
    job.save(update_fields=["state", "finished_at", "message"])
    _Heartbeat.stop(job)


def job_release(job: Job) -> None:
    """This process stops working on a job that stays queued for someone else (it is not its runner any more)."""
    _Heartbeat.stop(job)
    Job.objects.filter(pk=job.pk).update(worker_host="", worker_pid=None, heartbeat_at=None)


def jobs_recover(*, exclude: Job | None = None, embedding_run_held: bool = False) -> int:
    """Mark failed the jobs whose process is gone (see the module docstring); how many.

    `embedding_run_held`: the caller holds the embedding run lock, so no other embed job can be
    running, whatever its heartbeat says (its process died before the lock could tell)."""
    claimed = Q(state=Job.State.RUNNING) | Q(state=Job.State.QUEUED, worker_pid__isnull=False)
    candidates = Job.objects.filter(claimed)
    if exclude is not None:
        candidates = candidates.exclude(pk=exclude.pk)
    stale_before = timezone.now() - timedelta(seconds=settings.PMD_JOB_STALE_SECONDS)
    recovered = 0
    for job in candidates.only(
        "id", "kind", "state", "worker_host", "worker_pid", "heartbeat_at", "started_at", "created_at"
    ):
        why = _gone(job, stale_before)
        if why is None and embedding_run_held and job.kind == Job.Kind.EMBED and job.state == Job.State.RUNNING:
            why = "its process no longer holds the embedding run"
        if why is None:
            continue
        message = f"{WORKER_STOPPED}: {why}"
        if job.kind == Job.Kind.EMBED:
            message += "; what it had not embedded stays pending and the next embedding run does it"
        # Only if nothing changed meanwhile (it may have finished, or been taken again).
        recovered += Job.objects.filter(
            pk=job.pk, state=job.state, worker_pid=job.worker_pid, heartbeat_at=job.heartbeat_at
        ).update(state=Job.State.FAILED, finished_at=timezone.now(), message=message)
    if recovered:
        log.warning("%d job(s) whose worker stopped marked failed", recovered)
    return recovered


def _gone(job: Job, stale_before) -> str | None:
    """Why the job's process is gone, or None if it may still be working."""
    runner = f"process {job.worker_pid} on {job.worker_host}" if job.worker_pid else "its process"
    if job.worker_pid and job.worker_host == _HOST and not _pid_alive(job.worker_pid):
        return f"{runner} has exited"
    last = job.heartbeat_at or job.started_at or job.created_at
    if last < stale_before:
        return f"no heartbeat from {runner} since {last:%Y-%m-%d %H:%M:%S %Z}"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:  # a killed child its parent has not reaped yet is a zombie: dead all the same
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _this_host() -> str:
    """The machine, and its PID namespace: containers sharing a host name do not share pids."""
    try:
        namespace = f"[{os.stat('/proc/self/ns/pid').st_ino}]"
    except OSError:
        namespace = ""
    return f"{socket.gethostname()[:200]}{namespace}"


_HOST = _this_host()


class _Heartbeat:
    """A thread refreshing `heartbeat_at` of the jobs this process works on, while they are claimed by it."""

    _jobs: set = set()
    _lock = threading.Lock()
    _thread: threading.Thread | None = None
    _wake = threading.Event()  # a job just claimed beats at once, not one (maybe long) interval later

    @classmethod
    def interval(cls) -> float:
        return max(1.0, min(30.0, settings.PMD_JOB_STALE_SECONDS / 10))

    @classmethod
    def keep(cls, job: Job) -> None:
        with cls._lock:
            cls._jobs.add(job.pk)
            cls._wake.set()
            if cls._thread is None or not cls._thread.is_alive():
                cls._thread = threading.Thread(target=cls._run, daemon=True, name="pmd-job-heartbeat")
                cls._thread.start()

    @classmethod
    def stop(cls, job: Job) -> None:
        with cls._lock:
            cls._jobs.discard(job.pk)

    @classmethod
    def _run(cls) -> None:
        while True:
            cls._wake.wait(cls.interval())
            cls._wake.clear()
            with cls._lock:
                jobs = set(cls._jobs)
                if not jobs:
                    cls._thread = None
                    return
            try:
                # A job no longer claimed by this process (finished, failed, taken again) drops out.
                mine = Q(worker_host=_HOST, worker_pid=os.getpid(), state__in=[Job.State.QUEUED, Job.State.RUNNING])
                beating = set(Job.objects.filter(mine, pk__in=jobs).values_list("pk", flat=True))
                Job.objects.filter(pk__in=beating).update(heartbeat_at=timezone.now())
                with cls._lock:
                    cls._jobs -= jobs - beating
            except Exception:  # a database hiccup: beat again next time
                log.debug("job heartbeat failed", exc_info=True)
            finally:
                connection.close()
