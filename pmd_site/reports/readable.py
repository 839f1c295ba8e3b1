"""The status report (pmd_site.reports.status) written for people, once for the web status page and
`pmd status`: each section a title, whether it works, a few sentences, then its values in words
(times relative, sizes and durations in units, chunking in tokens) under readable labels, and its
tables. No raw ids, hashes or dictionaries: those stay in the JSON (`pmd status --json`, the API)
and behind the page's "Raw values".
"""

from __future__ import annotations

import json
import re

from indexing.services.embedding import embedding_running
from pmd_site.reports.status import TITLES, duration, relative_time, state_words, status_headlines

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
    "chunking": "Chunks",
    "chunks": "Chunks stored",
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
    "last_reindex": "Last reindex",
    "alive": "Workers answering",
    "names": "Names",
    "mode": "Mode",
    "reachable": "Reachable",
    "models": "Models",
    "backend": "Backend",
    "created_at": "Created",
    "percent": "Done",
    "warnings": "Warnings",
    "by_kind": "Problems, by kind",
    "kind": "Kind",
    "dims": "Dimensions",
    "by_model": "Answers by model",
    "tokens_in": "Tokens in",
    "tokens_out": "Tokens out",
    "median_ms": "Median answer time",
    "median_first_token_ms": "Median time to the first word",
}
# In the section's sentences already, or for programs only (the JSON has them).
SHOWN_ABOVE = {"ok", "error", "advice", "hybrid", "hint", "reason"}
NOT_FOR_PEOPLE = {"key", "id", "recent", "kinds"}
KIND_WORDS = {"error": "not indexed", "warning": "warning", "link": "unresolved link"}
TABLE_ROWS = 20  # rows of a table `pmd status` prints


def label(key: str) -> str:
    return LABELS.get(key) or key.replace("_", " ").capitalize()


def chunking_text(value) -> str:
    """`chunks of 900 tokens, 135 overlapping`: a chunking fingerprint in words."""
    if not isinstance(value, dict) or "max_tokens" not in value:
        return str(value)
    tokens = int(value["max_tokens"])
    overlap = round(tokens * float(value.get("overlap") or 0))
    return f"chunks of up to {tokens} tokens" + (f", {overlap} overlapping" if overlap else "")


def _job_text(job: dict, state: str | None) -> str:
    """The last embedding request in words, its state the section's own (one source: `state`)."""
    parts = []
    if job.get("total"):
        parts.append(f"{job.get('done') or 0} of {job['total']} ({job.get('percent') or 0:.0f} %)")
    if state in (None, "done") and job.get("state") in ("failed", "interrupted", "cancelled"):
        parts.append(str(job["state"]))
    if job.get("created_at"):
        parts.append(f"asked {relative_time(job['created_at'])}")
    return ", ".join(parts) or "—"


_HISTORY_STATES = {
    "indexed": "indexed",
    "not_repository": "not in a git repository",
    "empty": "a repository without commits",
    "failed": "could not be read",
    "not_indexed": "not read yet",
}


def history_text(history: dict) -> str:
    """A collection's git history (indexing.services.history.history_status) as a phrase."""
    state = history.get("state") or ""
    parts = [_HISTORY_STATES.get(state, state.replace("_", " "))]
    if state == "indexed":
        commits = history.get("commits") or 0
        parts.append(f"{commits:,} commit{'' if commits == 1 else 's'}")
        if history.get("capped"):
            parts.append("the newest only")
        if history.get("shallow"):
            parts.append("a shallow clone")
        if history.get("indexed_at"):
            parts.append(f"read {relative_time(history['indexed_at'])}")
    message = (history.get("message") or "").strip()
    text = ", ".join(parts)
    return f"{text} ({message})" if message and not message.startswith(parts[0]) else message or text


def on_off(value) -> str:
    """A switch a person sets with on/off (`--transclude on|off`), shown in the same words."""
    return "on" if value else "off"


def value_text(key: str, value, *, data: dict | None = None):
    """A value as a person reads it."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith(("_at", "_since")) or key == "since":
        return relative_time(value)
    if key.endswith("seconds_ago"):
        return f"{duration(value)} ago"
    if key.endswith("_ms") and isinstance(value, (int, float)):
        return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"
    if key == "percent":
        return f"{value:.0f} %" if isinstance(value, (int, float)) else value
    if key == "state" and isinstance(value, str):
        return state_words(value)
    if key == "kind":
        return KIND_WORDS.get(value, value)
    if key == "chunking":
        return chunking_text(value)
    if key == "models" and isinstance(value, dict):
        return "; ".join(
            f"{role}: {m.get('model')}" + ("" if m.get("present") in (True, None) else " (missing)")
            for role, m in value.items()
        )
    if key == "fingerprint" and isinstance(value, dict):
        return f"{value.get('model')}, {value.get('dims')} dimensions, {chunking_text(value.get('chunking'))}"
    if key == "job" and isinstance(value, dict):
        return _job_text(value, (data or {}).get("state"))
    if key == "last_reindex" and isinstance(value, dict):
        names = ", ".join(value.get("collections") or []) or "no collection"
        return names + (f", {relative_time(value['at'])}" if value.get("at") else "")
    if isinstance(value, dict):
        return "; ".join(f"{label(k).lower()}: {value_text(k, v)}" for k, v in value.items() if k not in NOT_FOR_PEOPLE)
    if isinstance(value, list):
        return ", ".join(str(value_text(key, v)) for v in value)
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return value


_JOB_STATES = {"queued": "queued", "running": "running", "done": "done", "failed": "failed"}
_JOB_KINDS = {"embed": "Embedding", "index": "Indexing", "update": "Updating"}
_JOB_UNITS = {"embed": "notes", "index": "files", "update": "files"}  # what a job's done and total count
_MACHINE_WORDS = re.compile(
    r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-f]{16,}"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b",  # a hash cut short (a text's first characters)
    re.I,
)


def job_words(job) -> dict:
    """A job as the collections page shows it: what it does and its state in words (an embedding
    request queued while another process embeds says so, without a bar that never moves), how far
    it is ("70 of 222 notes"), its message without ids or hashes."""
    state = _JOB_STATES.get(job.state, job.state)
    title = _JOB_KINDS.get(job.kind, str(job.kind).capitalize())
    progress = ""
    if job.total and job.state == "running":
        progress = f"{job.done or 0} of {job.total} {_JOB_UNITS.get(job.kind, 'items')}"
    waiting = job.kind == "embed" and job.state == "queued" and embedding_running()
    if waiting:
        state = "waiting for the embedding under way"
    message = (job.message or "").strip()
    if _MACHINE_WORDS.fullmatch(message) or not _MACHINE_WORDS.sub("", message).strip(" :-,"):
        message = ""
    else:
        message = _MACHINE_WORDS.sub("", message).strip()
    return {
        "title": title,
        "state": state,
        "progress": progress,
        "message": message,
        "indeterminate": waiting or (job.state == "running" and not job.total),
    }


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


def _problem_lines(data: dict) -> list[str]:
    kinds = data.get("kinds") or {}
    if not kinds:
        return ["no problems"]
    return [", ".join(f"{n:,} {name}" for name, n in kinds.items())]


def section_view(name: str, data: dict) -> dict:
    """One section for people: name, title, ok, state (ok, warn, bad), lines, scalars, tables, raw."""
    ok = data.get("ok", True)
    state = "ok" if ok else "bad"
    if name == "models" and ok and data.get("hybrid"):
        state = "warn"
    if name == "problems" and ok and (data.get("kinds") or {}):
        state = "warn"
    scalars, tables = [], []
    for key, value in data.items():
        if key in SHOWN_ABOVE or key in NOT_FOR_PEOPLE:
            continue
        if key == "progress" and isinstance(value, list):
            if value:
                tables.append(_progress_rows(value))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            columns = [c for c in value[0] if c not in NOT_FOR_PEOPLE]
            tables.append(
                {
                    "name": label(key),
                    "columns": [label(c) for c in columns],
                    "rows": [[value_text(c, row.get(c)) for c in columns] for row in value],
                }
            )
        elif isinstance(value, list) and not value:
            continue
        else:
            scalars.append((label(key), value_text(key, value, data=data)))
    for table in tables:  # each cell with its column's name: on a phone a row is a card of labelled values
        table["cells"] = [list(zip(table["columns"], row)) for row in table["rows"]]
    lines = status_headlines(name, data)
    if name == "problems":
        lines = _problem_lines(data) + lines
    return {
        "name": name,
        "title": TITLES.get(name, name.replace("_", " ").capitalize()),
        "ok": ok,
        "state": state,
        "state_words": (
            "files to look at"
            if name == "problems" and state == "warn"
            else {"ok": "ok", "warn": "works, with limits", "bad": "problem"}[state]
        ),
        "lines": lines,
        "wide": any(len(t["columns"]) > 3 for t in tables),
        "scalars": scalars,
        "tables": tables,
        "raw": json.dumps(data, indent=2, default=str),
    }


def status_lines(report: dict) -> list[tuple[str | None, str]]:
    """`pmd status` for people: the same sections as the web page, as (state, line) pairs; a
    section's first line carries its state (ok, warn, bad), the others None."""
    out: list[tuple[str | None, str]] = []
    for name, data in report.items():
        view = section_view(name, data)
        out.append((view["state"], f"{view['title']}: {view['state_words']}"))
        out += [(None, f"    {line}") for line in view["lines"]]
        out += [(None, f"    {key}: {value}") for key, value in view["scalars"]]
        for table in view["tables"]:
            out.append((None, f"    {table['name']}:"))
            for row in table["cells"][:TABLE_ROWS]:
                out.append((None, "      " + " · ".join(f"{column}: {cell}" for column, cell in row)))
            if len(table["cells"]) > TABLE_ROWS:
                out.append((None, f"      … and {len(table['cells']) - TABLE_ROWS} more"))
    return out
