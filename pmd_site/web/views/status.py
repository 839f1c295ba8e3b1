"""The status page: the status report (pmd_site.reports.status) written for people.

Each section says first whether it works and, if not, why and what to do; then its values under
readable labels (times relative, durations and sizes in units); the raw report behind a <details>.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from indexing.errors import InvalidSetting, ReplacesVectors
from indexing.selectors import search_log_report
from indexing.services.index_config import index_config_effective, index_config_set
from pmd_site.reports.status import TITLES, duration, relative_time, status_headlines, status_report
from pmd_site.web.pages import access_of, page, staff_required

# Labels for the keys a person reads; any other key is shown as its words ("last_seen" → "Last seen").
LABELS = {
    "pmd_home": "PMD_HOME folder",
    "pgvector": "pgvector",
    "server": "Server",
    "embedded": "Embedded",
    "inactive_documents": "Removed notes kept",
    "contents": "Distinct texts",
    "contexts": "Contexts",
    "by_collection": "Collections",
    "last_indexed_at": "Last indexed",
    "uri": "Note",
    "url": "Address",
    "hnsw_index": "Vector index built",
    "stale_fingerprints": "Vectors of other models",
    "fingerprint": "Vectors",
    "chunks": "Chunks",
    "pending": "Without vectors",
    "mismatch": "Model changed",
    "job": "Last embedding request",
    "state": "State",
    "next_check_at": "Next check",
    "waiting_since": "Waiting since",
    "checks": "Checks so far",
    "progress": "Progress",
    "notes_embedded": "Notes with vectors",
    "commits_embedded": "Commits with vectors",
    "last_seen_seconds_ago": "Last seen",
    "last_change_at": "Last change",
    "alive": "Workers answering",
    "names": "Names",
    "mode": "Mode",
    "reachable": "Reachable",
    "models": "Models",
    "backend": "Backend",
    "created_at": "Created",
    "percent": "Done",
    "warnings": "Warnings",
    "recent": "Recent",
}
SHOWN_ABOVE = {"ok", "error", "advice", "hybrid", "hint", "reason"}  # in the section's sentences already


def _label(key: str) -> str:
    return LABELS.get(key) or key.replace("_", " ").capitalize()


def _value(key: str, value):
    """A value as a person reads it."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith(("_at", "_since")) or key == "since":
        return relative_time(value)
    if key.endswith("seconds_ago"):
        return f"{duration(value)} ago"
    if key == "percent":
        return f"{value:.0f} %" if isinstance(value, (int, float)) else value
    if key == "models" and isinstance(value, dict):
        return "; ".join(
            f"{role}: {m.get('model')}" + ("" if m.get("present") in (True, None) else " (missing)")
            for role, m in value.items()
        )
    if key == "fingerprint" and isinstance(value, dict):
        return f"{value.get('model')}, {value.get('dims')} dimensions, {value.get('chunking')}"
    if isinstance(value, dict):
        return "; ".join(f"{_label(k).lower()}: {_value(k, v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(_value(key, v)) for v in value)
    return value


def _progress_rows(rows: list[dict]) -> dict:
    """Embedding per collection and kind, as "12 of 20" cells."""
    return {
        "name": "Progress per collection",
        "columns": ["Collection", "Notes with vectors", "Commits with vectors"],
        "rows": [
            [
                r["name"],
                f"{r['notes_embedded']} of {r['notes']}",
                f"{r['commits_embedded']} of {r['commits']}" if r["commits"] else "—",
            ]
            for r in rows
        ],
    }


def _section(name: str, data: dict) -> dict:
    ok = data.get("ok", True)
    state = "ok" if ok else "bad"
    if name == "models" and ok and data.get("hybrid"):
        state = "warn"
    scalars, tables = [], []
    for key, value in data.items():
        if key in SHOWN_ABOVE:
            continue
        if key == "progress" and isinstance(value, list):
            if value:
                tables.append(_progress_rows(value))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            columns = list(value[0].keys())
            tables.append(
                {
                    "name": _label(key),
                    "columns": [_label(c) for c in columns],
                    "rows": [[_value(c, row.get(c)) for c in columns] for row in value],
                }
            )
        elif isinstance(value, list) and not value:
            continue
        else:
            scalars.append((_label(key), _value(key, value)))
    for table in tables:  # each cell with its column's name: on a phone a row is a card of labelled values
        table["cells"] = [list(zip(table["columns"], row)) for row in table["rows"]]
    return {
        "name": name,
        "title": TITLES.get(name, name.capitalize()),
        "ok": ok,
        "state": state,
        "lines": status_headlines(name, data),
        "wide": any(len(t["columns"]) > 3 for t in tables),
        "scalars": scalars,
        "tables": tables,
        "raw": json.dumps(data, indent=2, default=str),
    }


def _status(request, *, confirm: dict | None = None, status: int = 200):
    report = status_report(internals=request.user.is_staff, access=access_of(request))
    context = {"sections": [_section(n, d) for n, d in report.items()]}
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
