"""The status page: the status report (pmd_site.reports.status) written for people
(pmd_site.reports.readable, which `pmd status` prints too).

Each section says first whether it works and, if not, why and what to do; then its values under
readable labels (times relative, durations and sizes in units); the raw report behind a <details>.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from indexing.errors import InvalidSetting, ReplacesVectors
from indexing.selectors import search_log_report
from indexing.services.index_config import index_config_effective, index_config_set
from pmd_site.reports.readable import section_view
from pmd_site.reports.status import status_report
from pmd_site.web.pages import access_of, page, staff_required


def _status(request, *, confirm: dict | None = None, status: int = 200):
    report = status_report(internals=request.user.is_staff, access=access_of(request))
    context = {"sections": [section_view(n, d) for n, d in report.items()]}
    if request.user.is_staff:  # the index's configuration, which every process reads: staff change it here
        context["config"] = index_config_effective()
        context["confirm"] = confirm
    return page(request, "web/status.html", context, status=status)


@login_required
@require_GET
def status_page(request):
    return _status(request)


@staff_required
@require_POST
def index_config_change(request):
    """One setting of the index's configuration; a change that replaces the vectors is asked about first."""
    name, value = request.POST.get("name", ""), request.POST.get("value", "")
    try:
        change = index_config_set(values={name: value}, replace_vectors=request.POST.get("replace") == "yes")
    except ReplacesVectors as exc:
        return _status(request, confirm={"name": name, "value": value, "what": str(exc)}, status=409)
    except InvalidSetting as exc:
        messages.error(request, str(exc))
        return redirect("search:status")
    if change.changed:
        messages.success(
            request,
            f"{name} is now {value.strip() or '(empty)'} for every process of this index"
            + (": embedding everything again" if change.replaces_vectors else ""),
        )
    else:
        messages.info(request, f"{name} was already {value.strip() or '(empty)'}")
    return redirect("search:status")


@login_required
@require_GET
def searches_page(request):
    """Status → Searches: the search log over a chosen period (staff: everyone's; a member: their own)."""
    try:
        days = max(1, min(3650, int(request.GET.get("days") or 30)))
    except ValueError:
        days = 30
    report = search_log_report(access=access_of(request), days=days, limit=20)
    lists = [
        ("Top queries", report["top"]),
        ("No results: what the notes do not answer", report["zero_results"]),
        ("Weak results", report["weak"]),
        ("Slow", report["slow"]),
    ]
    return page(
        request, "web/searches.html", {"report": report, "lists": lists, "days": days, "periods": (1, 7, 30, 90)}
    )
