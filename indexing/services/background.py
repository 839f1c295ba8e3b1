"""Starting indexing and embedding work: in a worker, or in this process. Decided here, once.

Every face (CLI, web UI, API, admin actions, the watcher, `pmd up`) asks for work through
`embedding_request` or `index_request`; none of them looks at the broker or the workers.

* A worker answers (or tasks are eager): the task is queued for it.
* No worker, and the caller's process lives on (a web server, an index job running in a
  thread): the task's body runs in a background thread here.
* The caller is about to exit (the CLI) or must not do the work itself (the watcher, a
  task): `no_worker="queue"`, the request is queued on the broker when one is reachable
  (a worker takes it now, or once it starts), else nothing is recorded and None is
  returned: `pmd embed` or `pmd up` embeds whatever is pending later (pending work is
  derived from the database).

The celery tasks (pmd_site/tasks.py) register themselves here, with the celery app's questions
"does a broker answer?" and "does a worker answer?", so services queue tasks without importing the
layer above them. Django's loading of the pmd_site app hands over how to import that module
(`task_loader`): it is imported, with celery, the first time work is asked for, not by every
command that only reads.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from django.conf import settings
from django.db import connection

from indexing.models import Collection, Job
from indexing.services.jobs import job_create, job_fail

log = logging.getLogger(__name__)

NoWorker = Literal["thread", "queue", "caller"]

_TASKS: dict[str, object] = {}
_load_tasks = None  # set by PmdSiteConfig.ready()


# Until the task module registers celery's answers: no broker, no worker (work runs here).
def _broker_reachable() -> bool:
    return False


def _workers_available() -> bool:
    return False


def task_register(task):
    """Make a celery task available to the services by its short name (a decorator)."""
    _TASKS[task.name.rsplit(".", 1)[-1]] = task
    return task


def workers_register(*, broker_reachable, workers_available) -> None:
    """How to ask whether a broker and a worker answer (the celery app's own checks)."""
    global _broker_reachable, _workers_available
    _broker_reachable, _workers_available = broker_reachable, workers_available


def task_loader(load) -> None:
    """How to import the task module (which registers the tasks): called once, when a task is first needed."""
    global _load_tasks
    _load_tasks = load


def _task(name: str):
    if name not in _TASKS and _load_tasks is not None:
        _load_tasks()
    return _TASKS[name]


def embedding_request(
    *,
    collections: list[str] | None = None,
    collection: Collection | None = None,
    force: bool = False,
    created_by=None,
    no_worker: NoWorker = "thread",
) -> Job | None:
    """Ask for the embedding of whatever has no vectors yet (in `collections`, default all).

    Returns the request's Job (follow it), or None when nothing could take it (see the module
    docstring)."""
    return _embedding(collections, collection, force, created_by, no_worker)[0]


def embedding_request_here(
    *, collections: list[str] | None = None, collection: Collection | None = None, force: bool = False
) -> tuple[Job, bool]:
    """`embedding_request` for a caller that can do the work itself (`pmd embed`, with its progress
    bar): (job, queued). Not queued means no worker runs: the caller runs `embed_pending(job=job)`."""
    return _embedding(collections, collection, force, None, "caller")


def _embedding(collections, collection, force, created_by, no_worker) -> tuple[Job | None, bool]:
    names = collections or ([collection.name] if collection else None)
    return _start(
        _task("embed_pending"),
        Job.Kind.EMBED,
        {"collections": names, "force": force},
        collection=collection,
        created_by=created_by,
        no_worker=no_worker,
    )


def index_request(*, collection: Collection, created_by=None) -> Job:
    """Ask for a re-scan of one collection (then embedding of what changed); returns its Job."""
    return _start(
        _task("collection_index_task"),
        Job.Kind.INDEX,
        {"collection_pk": collection.pk},
        collection=collection,
        created_by=created_by,
        no_worker="thread",
    )[0]


def _start(
    task, kind: str, kwargs: dict, *, collection: Collection | None, created_by, no_worker: NoWorker
) -> tuple[Job | None, bool]:
    """(the job, whether it was handed to a worker or the broker)."""

    def new_job() -> Job:
        return job_create(kind=kind, collection=collection, message="queued", created_by=created_by)

    if no_worker == "queue":  # no need to ask the workers: a worker takes it now or once it starts
        if not (settings.CELERY_TASK_ALWAYS_EAGER or _broker_reachable()):
            return None, False
        return _queue(task, kwargs, new_job()), True
    if _workers_available():
        return _queue(task, kwargs, new_job()), True
    job = new_job()
    if no_worker == "thread":
        _in_thread(task, {**kwargs, "job_id": str(job.pk)})
    return job, False


def _queue(task, kwargs: dict, job: Job) -> Job:
    try:
        task.apply_async(kwargs={**kwargs, "job_id": str(job.pk)}, retry=False)
    except Exception as exc:  # noqa: BLE001 - a broker hiccup must not break the caller
        log.warning("could not queue %s: %s", task.name, exc)
        job_fail(job, message=f"could not queue the work: {exc}")
    return job


def _in_thread(task, kwargs: dict) -> None:
    """Run a task's body in this process without blocking the caller (no worker running)."""

    def run():
        try:
            task.run(**kwargs)
        except Exception:  # the service already marked its job failed
            log.exception("background %s failed", task.name)
        finally:
            connection.close()

    threading.Thread(target=run, daemon=True, name=f"pmd-{task.name.rsplit('.', 1)[-1]}").start()
