"""/api/jobs: follow the index and embed jobs (staff see all; others the jobs they started)."""

import uuid
from typing import Literal

from ninja import Router
from ninja.pagination import LimitOffsetPagination, paginate

from indexing.errors import JobNotFound
from indexing.models import Job
from indexing.selectors import jobs_visible_to
from indexing.services.jobs import jobs_recover
from pmd_site.api.schemas import ErrorOut, JobOut, job_row

router = Router(tags=["jobs"])

JobState = Literal["queued", "running", "done", "failed"]


@router.get("", response=list[JobOut], summary="Recent jobs, newest first (staff: all; others: the jobs they started)")
@paginate(LimitOffsetPagination)
def jobs_list(request, state: JobState | None = None):
    jobs_recover()  # a job whose worker died reads as failed, not running
    qs = jobs_visible_to(request.auth)
    if state:
        qs = qs.filter(state=state)
    return [job_row(j) for j in qs[:1000]]


@router.get("/{job_id}", response={200: JobOut, 404: ErrorOut}, summary="Progress of one job")
def job_detail(request, job_id: str):
    jobs_recover()
    try:  # someone else's job is as absent as a job that never existed
        job = jobs_visible_to(request.auth).get(pk=uuid.UUID(job_id))
    except (ValueError, Job.DoesNotExist):
        raise JobNotFound(f"no job {job_id}") from None
    return job_row(job)
