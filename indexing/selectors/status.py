"""Reads: what the status report counts, and the jobs someone may follow."""

from __future__ import annotations

from django.db.models import Count, Q

from indexing.access import Access
from indexing.models import Collection, Content, FileProblem, Job, PathContext
from indexing.selectors.documents import _visible_documents


def jobs_visible_to(access: Access):
    """Jobs `access` may see: staff every job, a member only the jobs they started; and of the
    jobs about a collection, only those of collections they see.

    Jobs of the CLI, the watcher and periodic tasks have no owner (their messages can name
    server paths), so only staff see them. Anything else answers "no such job" (404), never 403.
    """
    jobs = Job.objects.select_related("collection")
    if not access.active:
        return jobs.none()
    if not access.is_staff:
        jobs = jobs.filter(created_by=access.user)
    ids = access.collection_ids()
    if ids is not None:
        jobs = jobs.filter(Q(collection__isnull=True) | Q(collection_id__in=ids))
    return jobs


def index_jobs_running(*, access: Access, limit: int = 10) -> list[dict]:
    """Indexing under way that `access` may see, with its progress line ("converting report.pdf
    (3 of 40 files, 120 of 800 pages)"): for the status report."""
    jobs = jobs_visible_to(access).filter(kind__in=[Job.Kind.INDEX, Job.Kind.UPDATE], state=Job.State.RUNNING)
    return [
        {
            "collection": job.collection.name if job.collection else "",
            "done": job.done,
            "total": job.total,
            "message": job.message,
        }
        for job in jobs.order_by("-started_at")[:limit]
    ]


def index_counts(*, access: Access) -> dict:
    """Counts for the status report, of what `access` sees only."""
    ids = access.collection_ids()
    docs = _visible_documents(access).aggregate(
        n_active=Count("id", filter=Q(active=True)), n_inactive=Count("id", filter=Q(active=False))
    )
    if ids is None:
        collections, contents = Collection.objects.count(), Content.objects.count()
        contexts, problems = PathContext.objects.count(), FileProblem.objects.count()
    else:
        collections = len(ids)
        contents = Content.objects.filter(documents__collection_id__in=ids).distinct().count()
        contexts = PathContext.objects.filter(Q(collection__isnull=True) | Q(collection_id__in=ids)).count()
        problems = FileProblem.objects.filter(collection_id__in=ids).count()
    return {
        "collections": collections,
        "documents": docs["n_active"],
        "inactive_documents": docs["n_inactive"],
        "contents": contents,
        "contexts": contexts,
        "problems": problems,
    }
