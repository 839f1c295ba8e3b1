"""The status page: the status report (pmd_site.status) as sections of values and tables."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_GET

from pmd_site.status import status_report
from pmd_site.web.pages import access_of, page


@login_required
@require_GET
def status_page(request):
    report = status_report(internals=request.user.is_staff, access=access_of(request))
    sections = []
    for name, data in report.items():
        scalars, tables = [], []
        for key, value in data.items():
            if key in {"ok", "error"}:
                continue
            if isinstance(value, list):
                if value and isinstance(value[0], dict):
                    columns = list(value[0].keys())
                    tables.append({"name": key, "columns": columns,
                                   "rows": [[row.get(c) for c in columns] for row in value]})
                elif value:
                    scalars.append((key, ", ".join(str(v) for v in value)))
            elif isinstance(value, dict):
                scalars.append((key, ", ".join(f"{k}={v}" for k, v in value.items())))
            else:
                scalars.append((key, value))
        sections.append({"name": name, "ok": data.get("ok", True), "error": data.get("error"),
                         "wide": any(len(t["columns"]) > 3 for t in tables),
                         "scalars": scalars, "tables": tables})
    return page(request, "search/status.html", {"sections": sections})


@login_required
@require_GET
def searches_page(request):
    """Status → Searches: the search log over a chosen period (staff: everyone's; a member: their own)."""
    from indexing.selectors import search_log_report

    try:
        days = max(1, min(3650, int(request.GET.get("days") or 30)))
    except ValueError:
        days = 30
    report = search_log_report(access=access_of(request), days=days, limit=20)
    lists = [("Top queries", report["top"]), ("No results: what the notes do not answer", report["zero_results"]),
             ("Weak results", report["weak"]), ("Slow", report["slow"])]
    return page(request, "search/searches.html", {"report": report, "lists": lists, "days": days,
                                                  "periods": (1, 7, 30, 90)})
