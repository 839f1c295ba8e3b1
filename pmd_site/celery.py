"""The celery app. Broker: CELERY_BROKER_URL, else the embedded Redis under PMD_HOME
(pmd_site/runtime/redis_server.py; `pmd up` starts it). Tasks live in pmd_site/tasks.py and
only call services; progress and results go to Job rows, not to a result backend.
"""

from __future__ import annotations

import os

import redis
from celery import Celery
from django.conf import settings

from pmd_site.runtime.redis_server import EmbeddedRedis, redis_client

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmd_site.settings")

# Two queues, so that indexing never waits behind bulk embedding: `pmd up` runs one worker for
# each (`pmd worker` alone takes both).
DEFAULT_QUEUE = "pmd"
EMBED_QUEUE = "pmd-embed"
EMBED_TASKS = ("pmd_site.tasks.embed_pending", "pmd_site.tasks.embed_collection_task", "pmd_site.tasks.embedding_check")

app = Celery("pmd")
app.config_from_object("django.conf:settings", namespace="CELERY")


def _configure() -> None:
    broker = settings.CELERY_BROKER_URL or EmbeddedRedis(settings.PMD_HOME).url()
    schedule = {}
    if settings.PMD_RECONCILE_INTERVAL:
        schedule["reconcile"] = {"task": "pmd_site.tasks.reconcile", "schedule": float(settings.PMD_RECONCILE_INTERVAL)}
    # Jobs of workers that died are marked failed, not left `running` (indexing/services/jobs.py).
    schedule["recover_jobs"] = {
        "task": "pmd_site.tasks.recover_jobs",
        "schedule": float(max(30, settings.PMD_JOB_STALE_SECONDS // 2)),
    }
    # Waiting embedding requests check the LLM backend even when a delayed message is lost.
    schedule["embedding_check"] = {"task": "pmd_site.tasks.embedding_check", "schedule": 20.0}
    # The digest of new matches of saved searches with a webhook or an email (search.pipeline.saved).
    if settings.PMD_DIGEST_INTERVAL:
        schedule["saved_digest"] = {
            "task": "pmd_site.tasks.saved_digest",
            "schedule": float(settings.PMD_DIGEST_INTERVAL),
        }
    app.conf.update(
        broker_url=broker,
        result_backend=settings.CELERY_RESULT_BACKEND or None,
        task_ignore_result=not settings.CELERY_RESULT_BACKEND,
        # Embedding is idempotent and resumable: acknowledge after the work, and put a
        # task back on the queue when its worker process dies, so nothing is dropped.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": 6 * 3600},
        task_default_queue=DEFAULT_QUEUE,
        task_routes={name: {"queue": EMBED_QUEUE} for name in EMBED_TASKS},
        beat_schedule=schedule,
        timezone=settings.TIME_ZONE,
    )


_configure()
app.autodiscover_tasks(["pmd_site"])


def workers_available(timeout: float = 1.0) -> bool:
    """Is a worker listening? False without a reachable broker (checked quickly first)."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return True
    if not broker_reachable(timeout=timeout):
        return False
    try:
        replies = app.control.inspect(timeout=timeout).ping() or {}
    except Exception:  # noqa: BLE001 - any broker trouble means "no worker to hand work to"
        return False
    return bool(replies)


def broker_url() -> str:
    """The broker the celery app uses (the embedded Redis when CELERY_BROKER_URL is empty)."""
    return str(app.conf.broker_url or "")


def broker_reachable(timeout: float = 1.0) -> bool:
    client = redis_client(broker_url(), timeout=timeout)
    if client is None:
        return True  # another transport: let kombu find out
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()
