"""Celery tasks: thin adapters that fetch what they need by id and call one service.

Every task records its progress in a Job row (created by whoever queues it, or
here), so the CLI, the web UI and the API follow the same record.
"""

from __future__ import annotations

import logging
import threading

from celery import shared_task

from indexing.models import Collection, Job

log = logging.getLogger(__name__)


def _job(job_id: str | None, *, kind: str, collection: Collection | None = None) -> Job:
    from indexing.services.jobs import job_create

    job = Job.objects.filter(pk=job_id).first() if job_id else None
    return job or job_create(kind=kind, collection=collection)


@shared_task(name="indexing.tasks.embed_pending", acks_late=True)
def embed_pending(collections: list[str] | None = None, force: bool = False, job_id: str | None = None) -> dict:
    """Embed whatever has no vectors yet (a duplicate delivery finds nothing to do). While the
    LLM backend is away the request waits (indexing/services/embedding_queue.py); the one
    request chosen to check again is re-queued here."""
    from django.conf import settings

    from indexing.services.embedding_queue import embedding_job_run

    job = _job(job_id, kind=Job.Kind.EMBED)
    outcome = embedding_job_run(job=job, collections=collections, force=force)
    if outcome.get("check_again_in") and not settings.CELERY_TASK_ALWAYS_EAGER:  # eager would not wait
        try:
            embed_pending.apply_async(kwargs={"collections": collections, "force": force, "job_id": str(job.pk)},
                                      countdown=outcome["check_again_in"], retry=False)
        except Exception as exc:  # noqa: BLE001 - the next request or `pmd up` resumes it instead
            log.warning("could not re-queue the waiting embedding request: %s", exc)
    return outcome


@shared_task(name="indexing.tasks.embed_collection_task", acks_late=True)
def embed_collection_task(collection_pk: int, job_id: str | None = None, force: bool = False) -> dict:
    collection = Collection.objects.filter(pk=collection_pk).first()
    if collection is None:
        return {"skipped": f"collection {collection_pk} no longer exists"}
    return embed_pending(collections=[collection.name], force=force, job_id=job_id)


@shared_task(name="indexing.tasks.collection_index_task", acks_late=True)
def collection_index_task(collection_pk: int, job_id: str | None = None) -> dict:
    """Re-scan one collection, then queue embedding of what changed."""
    from indexing.services.jobs import JobProgress, job_fail, job_finish, job_start
    from indexing.services.scanning import collection_index

    collection = Collection.objects.filter(pk=collection_pk).first()
    if collection is None:
        return {"skipped": f"collection {collection_pk} no longer exists"}
    job = _job(job_id, kind=Job.Kind.INDEX, collection=collection)
    job_start(job)
    try:
        report = collection_index(collection, progress=JobProgress(job))
    except FileNotFoundError as exc:
        job_fail(job, message=str(exc))
        return {"error": str(exc)}
    job_finish(job, result=report.as_dict(), message=f"{report.added} added, {report.updated} updated, "
                                                     f"{report.removed} removed, {report.errors} errors")
    if report.changed_document_ids:
        embed_pending.delay()
    return report.as_dict()


@shared_task(name="indexing.tasks.reconcile")
def reconcile() -> dict:
    """Periodic safety net (PMD_RECONCILE_INTERVAL): re-index everything, embed what changed."""
    from django.conf import settings

    from indexing.watcher import reindex

    return reindex(None, pull=settings.PMD_PULL_ON_RECONCILE)


# --- starting work from adapters (CLI, web, API) ------------------------------------------------


def workers_available() -> bool:
    from pmd_site.celery import workers_available as available

    return available()


def queue_embedding(*, job: Job, collections: list[str] | None = None, force: bool = False) -> None:
    embed_pending.apply_async(kwargs={"collections": collections, "force": force, "job_id": str(job.pk)},
                              retry=False)


def start_embed_job(*, collection: Collection | None = None, collections: list[str] | None = None,
                    force: bool = False, created_by=None) -> Job:
    """Queue embedding for a worker, or run it in a background thread when none is running."""
    from indexing.services.jobs import job_create

    names = collections or ([collection.name] if collection else None)
    job = job_create(kind=Job.Kind.EMBED, collection=collection, message="queued", created_by=created_by)
    if workers_available():
        queue_embedding(job=job, collections=names, force=force)
    else:
        _in_thread(embed_pending, names, force, str(job.pk))
    return job


def start_index_job(*, collection: Collection, created_by=None) -> Job:
    from indexing.services.jobs import job_create

    job = job_create(kind=Job.Kind.INDEX, collection=collection, message="queued", created_by=created_by)
    if workers_available():
        collection_index_task.apply_async(args=[collection.pk], kwargs={"job_id": str(job.pk)}, retry=False)
    else:
        _in_thread(collection_index_task, collection.pk, str(job.pk))
    return job


def _in_thread(task, *args) -> None:
    """Run a task's body in this process without blocking the caller (no worker running)."""
    from django.db import connection

    def run():
        try:
            task.run(*args)
        except Exception:  # noqa: BLE001 - the service already marked its job failed
            log.exception("background %s failed", task.name)
        finally:
            connection.close()

    threading.Thread(target=run, daemon=True, name=f"pmd-{task.name.rsplit('.', 1)[-1]}").start()
