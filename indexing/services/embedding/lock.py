"""The run lock (one embedding run at a time per database) and the jobs a dead run left behind."""

from __future__ import annotations

from django.utils import timezone

from indexing.locks import (
    EMBEDDING,
    advisory_lock_release,
    advisory_lock_taken,
    advisory_lock_try,
)
from indexing.models import Job


def run_lock_try() -> bool:
    # A session lock even inside a transaction: batches commit as they go, the run is what it guards.
    return advisory_lock_try(key=EMBEDDING, session=True)


def run_lock_release() -> None:
    advisory_lock_release(key=EMBEDDING, session=True)


def embedding_running() -> bool:
    """Is some process (here or elsewhere) inside `embed_pending` right now?"""
    return advisory_lock_taken(key=EMBEDDING)


def mark_interrupted_jobs(current: Job | None) -> int:
    """Jobs left `running` by a worker that died: we hold the lock, so they are not running."""
    stale = Job.objects.filter(kind=Job.Kind.EMBED, state__in=[Job.State.RUNNING])
    if current is not None:
        stale = stale.exclude(pk=current.pk)
    return stale.update(state=Job.State.FAILED, finished_at=timezone.now(),
                        message="interrupted: the process stopped before finishing; the next run resumed it")
