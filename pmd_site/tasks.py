"""Celery tasks: thin adapters that fetch what they need by id and call one service.

Every task records its progress in a Job row (created by whoever queues it, or here), so
the CLI, the web UI and the API follow the same record. Services start tasks through
indexing/services/background.py (a worker, or a thread here), where each task registers
itself: the services never import this module, which imports them.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings

from indexing.access import Access
from indexing.models import Collection, Job
from indexing.services.background import task_register, workers_register
from indexing.services.embedding import embedding_stop
from indexing.services.embedding_queue import embedding_check_due, embedding_job_run, embedding_jobs_tidy
from indexing.services.jobs import job_create, jobs_recover
from indexing.services.refresh import collections_refresh
from pmd_site.celery import EMBED_QUEUE, broker_reachable, workers_available
from search import saved_searches_digest

log = logging.getLogger(__name__)
workers_register(broker_reachable=broker_reachable, workers_available=workers_available)


def _job(job_id: str | None, *, kind: str, collection: Collection | None = None) -> Job:
    job = Job.objects.filter(pk=job_id).first() if job_id else None
    return job or job_create(kind=kind, collection=collection)


@task_register
@shared_task(name="pmd_site.tasks.embed_pending", acks_late=True)
def embed_pending(
    collections: list[str] | None = None, force: bool = False, job_id: str | None = None, check: int | None = None
) -> dict:
    """Embed whatever has no vectors yet (a duplicate delivery finds nothing to do). While the
    LLM backend is away the request waits (indexing/services/embedding_queue.py); the one
    request chosen to check again is re-queued here."""
    job = _job(job_id, kind=Job.Kind.EMBED)
    outcome = embedding_job_run(job=job, collections=collections, force=force, check=check)
    if outcome.get("check_again_in") and not settings.CELERY_TASK_ALWAYS_EAGER:  # eager would not wait
        try:
            embed_pending.apply_async(
                kwargs={
                    "collections": collections,
                    "force": force,
                    "job_id": str(job.pk),
                    "check": outcome.get("check"),
                },
                countdown=outcome["check_again_in"],
                retry=False,
            )
        except Exception as exc:  # noqa: BLE001 - the next request or `pmd up` resumes it instead
            log.warning("could not re-queue the waiting embedding request: %s", exc)
    return outcome


@task_register
@shared_task(name="pmd_site.tasks.embed_collection_task", acks_late=True)
def embed_collection_task(collection_pk: int, job_id: str | None = None, force: bool = False) -> dict:
    collection = Collection.objects.filter(pk=collection_pk).first()
    if collection is None:
        return {"skipped": f"collection {collection_pk} no longer exists"}
    return embed_pending(collections=[collection.name], force=force, job_id=job_id)


@task_register
@shared_task(name="pmd_site.tasks.collection_index_task", acks_late=True)
def collection_index_task(collection_pk: int, job_id: str | None = None) -> dict:
    """Re-scan one collection, then queue embedding of what changed."""
    collection = Collection.objects.filter(pk=collection_pk).first()
    if collection is None:
        return {"skipped": f"collection {collection_pk} no longer exists"}
    [refreshed] = collections_refresh(
        names=[collection.name],
        job=_job(job_id, kind=Job.Kind.INDEX, collection=collection),
        access=Access.local_user(),
    ).collections
    return {"error": refreshed.problem} if refreshed.problem else refreshed.report.as_dict()


@task_register
@shared_task(name="pmd_site.tasks.recover_jobs")
def recover_jobs() -> dict:
    """Periodic: jobs whose worker died (killed, out of memory) are marked failed, not left running."""
    return {"recovered": jobs_recover()}


@shared_task(name="pmd_site.tasks.saved_digest")
def saved_digest() -> dict:
    """Periodic (PMD_DIGEST_INTERVAL): new matches of saved searches, to their webhooks and owners' email."""
    return saved_searches_digest()


@worker_ready.connect
def _recover_jobs_at_start(**_) -> None:
    """A worker starting after a crash finds the jobs the dead one left `running`."""
    try:
        jobs_recover()
    except Exception:  # the periodic task tries again; the worker must start
        log.warning("could not recover the jobs of stopped workers", exc_info=True)


@worker_shutting_down.connect
def _embedding_stop_at_shutdown(**_) -> None:
    """SIGTERM (`pmd up` stopping): an embedding in progress ends now instead of the warm shutdown
    waiting for the model server's batch; what is stored stays, the next run embeds the rest."""
    embedding_stop()


@task_register
@shared_task(name="pmd_site.tasks.embedding_check")
def embedding_check() -> dict:
    """Periodic: a waiting embedding request whose check of the LLM backend is overdue (its
    delayed message was lost) checks now; the checks never stop while requests wait."""
    due = embedding_check_due()
    if due is None:
        return {"skipped": "no check due"}
    job, check = due
    marker = job.result["waiting"]
    return embed_pending(
        collections=marker.get("collections"), force=bool(marker.get("force")), job_id=str(job.pk), check=check
    )


@worker_ready.connect
def _embedding_at_start(sender=None, **_) -> None:
    """The worker that embeds, starting: what an earlier run left queued is merged, and what is
    pending is queued (a collection indexed by `pmd up` before any worker ran has no request)."""
    try:
        queues = {queue.name for queue in sender.task_consumer.queues} if sender is not None else {EMBED_QUEUE}
    except Exception:  # noqa: BLE001 - cannot tell: assume it embeds
        queues = {EMBED_QUEUE}
    if EMBED_QUEUE not in queues:
        return
    try:
        job = embedding_jobs_tidy()
        if job is not None:
            embed_pending.apply_async(kwargs={"job_id": str(job.pk)}, retry=False)
    except Exception:  # the periodic reconcile queues it later; the worker must start
        log.warning("could not queue the pending embedding at start", exc_info=True)


@task_register
@shared_task(name="pmd_site.tasks.reconcile")
def reconcile() -> dict:
    """Periodic safety net (PMD_RECONCILE_INTERVAL): re-index everything, embed what changed."""
    return collections_refresh(pull=settings.PMD_PULL_ON_RECONCILE, access=Access.local_user()).logged_summary()
