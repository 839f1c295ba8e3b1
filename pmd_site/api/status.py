"""/api/status: the status report of `pmd status --json` (where things run: staff only)."""

from ninja import Query, Router

from pmd_site.api.auth import is_staff
from pmd_site.reports.status import status_report

router = Router(tags=["status"])


@router.get("", response=dict, summary="Database, index, workers, models, problems (where things run: staff only)")
def status(request, section: list[str] = Query(default_factory=list)):
    return status_report(section or None, internals=is_staff(request), access=request.auth)
