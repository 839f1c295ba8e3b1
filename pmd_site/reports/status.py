"""One status report for `pmd status`, the web status page, the API and MCP.

Each section is produced by a small provider; a provider that fails reports its
error instead of breaking the whole report. Areas add providers to SECTIONS.
"""

from __future__ import annotations

import os
import re
import threading
from datetime import datetime
from pathlib import Path
from typing import Callable

import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from indexing.access import visible_collection_names
from indexing.models import FileProblem
from indexing.problems import problem_counts, problems_in_order
from indexing.replicas import replicas_health
from indexing.selectors import answer_costs, collections_overview, index_counts, index_jobs_running
from indexing.services.embedding import embedding_status
from indexing.services.links import LINK_PROBLEM_PREFIX
from indexing.services.model_server import hybrid_without, model_server_status
from pmd_site.celery import app, broker_reachable, broker_url
from pmd_site.reports.safety import unsafe_settings
from pmd_site.runtime.redis_server import redis_py_url
from pmd_site.signin.oidc import discovery_status, providers
from pmd_site.version import VERSION
from pmd_site.watcher.heartbeat import watcher_health
from search import absent_models


def _pmd(access) -> dict:
    return {"ok": True, "version": VERSION}


def _database(access) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        version, vector = cursor.fetchone()
    db = settings.DATABASES["default"]
    return {
        "ok": True,
        "embedded": settings.EMBEDDED_DATABASE,
        "name": db["NAME"],
        "host": db["HOST"] or "localhost",
        "server": version.split(" on ")[0],
        "pgvector": vector,
        "pmd_home": str(settings.PMD_HOME) if settings.EMBEDDED_DATABASE else None,
        **({"replicas": replicas_health()} if settings.DATABASE_REPLICAS else {}),
    }


def _index(access) -> dict:
    counts = index_counts(access=access)
    counts["by_collection"] = [
        {
            "name": r["name"],
            "documents": r["documents"],
            "path": r["path"],
            "problems": r["problems"],
            "last_indexed_at": r["last_indexed_at"].isoformat() if r["last_indexed_at"] else None,
        }
        for r in (d.as_dict() for d in collections_overview(access=access))
    ]
    counts["indexing"] = index_jobs_running(access=access)
    return {"ok": True, **counts}


def _problems(access) -> dict:
    problems = FileProblem.objects.select_related("collection")
    if access.collection_ids() is not None:
        problems = problems.filter(collection_id__in=access.collection_ids())
    recent = list(problems.order_by("-created_at")[:10])
    return {
        "ok": True,
        "recent": [
            {"uri": f"pmd://{p.collection.name}/{p.path}", "severity": p.severity, "message": p.message} for p in recent
        ],
        # by kind, errors first, each kind counted on its own (indexing.problems): what people read
        "kinds": {c.label: c.count for c in problem_counts(access)},
        "by_kind": [
            {"kind": row["kind"], "uri": f"pmd://{row['collection']}/{row['path']}", "message": row["message"]}
            for row in problems_in_order(access, per_kind=10)
        ],
    }


def _broker(access) -> dict:
    url = broker_url()
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"ok": True, "mode": "eager (PMD_TASKS_EAGER: tasks run in-process)"}
    if not url:
        return {"ok": False, "error": "no broker configured (set CELERY_BROKER_URL, or run `pmd up`)"}

    shown = url.split("@")[-1]  # never print a password
    client = redis.Redis.from_url(redis_py_url(url), socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        return {"ok": False, "url": shown, "error": f"not reachable: {exc}"}
    finally:
        client.close()
    return {"ok": True, "url": shown}


def _workers(access) -> dict:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"ok": True, "mode": "eager"}
    if not broker_reachable():  # kombu would retry an absent broker for seconds
        return {"ok": False, "alive": 0, "error": "no broker, so no worker (`pmd up` runs both; or `pmd worker`)"}
    replies = app.control.inspect(timeout=1.0).ping() or {}
    if not replies:
        return {"ok": False, "alive": 0, "error": "no worker answered within 1s (`pmd up` runs one; or `pmd worker`)"}
    return {"ok": True, "alive": len(replies), "names": sorted(replies)}


def _watcher(access) -> dict:
    """The watcher's heartbeat, naming only the collections `access` sees: the watcher watches them
    all, and a hidden one's name and folder are left out as if it did not exist."""
    health = watcher_health()
    if access.collection_ids() is None:
        return health
    seen = set(visible_collection_names(access))
    health["collections"] = [c for c in health.get("collections") or [] if c.get("name") in seen]
    last = health.get("last_reindex")
    if isinstance(last, dict) and not set(last.get("collections") or []) | set(last.get("skipped") or []) <= seen:
        # its counts add up hidden collections' changes too: only the visible names are left
        health["last_reindex"] = {"collections": [n for n in last.get("collections") or [] if n in seen]}
    return health


_probe = threading.local()  # one question to the model server per report, shared by its sections


def _model_server() -> dict:
    cached = getattr(_probe, "models", None)
    if cached is None:
        cached = model_server_status()
        # What this process's queries found missing (a server that lists a model it cannot run).
        absent = {stage: reason for stage, (model, reason) in absent_models().items()}
        if absent and cached["reachable"]:
            cached["hybrid"] = hybrid_without(cached["models"], absent=absent, semantic=cached["ok"])
        _probe.models = cached
    return cached


def _models(access) -> dict:
    return dict(_model_server())


def _embeddings(access) -> dict:
    if access.collection_ids() is None:
        status = embedding_status()
    else:
        # Counted over the collections this caller sees ("/" is no collection's name: none visible
        # counts nothing); the other models' totals and the last embedding job are the whole index's
        # and would tell them about collections they cannot see.
        status = embedding_status(collections=visible_collection_names(access) or ["/"])
        status = {k: v for k, v in status.items() if k not in {"stale_fingerprints", "job"}}
    server = _model_server()
    if not server["ok"]:
        # Nothing new is embedded, and semantic queries cannot be embedded either: not green.
        status["ok"] = False
        status.setdefault("error", "the model server cannot embed: " + (server["error"] or "not reachable"))
        if not status.get("mismatch") and status.get("pending"):
            # "run `pmd embed`" alone would only wait: the server first
            status["hint"] = (
                f"{status['pending']} note(s) or commit(s) without embeddings: the model server "
                "must answer first (then `pmd embed`, or the worker, embeds them)"
            )
        if status.get("state") in {"running", "queued", "pending"}:
            status["state"] = "waiting"
            status["reason"] = server["error"]
    return status


def _answers(access) -> dict:
    """Ask's cost per model (answers, tokens in/out, median latency): staff only, the totals span
    every user's questions (a member sees just `ok`, the section being on no allow-list)."""
    return {"ok": True, "model": (settings.PMD_ANSWER_MODEL or "").strip() or None, "by_model": answer_costs()}


def _security(access) -> dict:
    warnings = unsafe_settings(settings)
    return {"ok": not warnings, "warnings": warnings}


def _sign_in(access) -> dict:
    """How people sign in: the OpenID providers (and whether their discovery answers now), forward
    auth and its proxies, whether the password form is on."""
    found = [{"id": p.id, "name": p.name, "issuer": p.issuer, "discovery": discovery_status(p)} for p in providers()]
    return {
        "ok": all(p["discovery"] == "answering" for p in found),
        "password_login": settings.PMD_PASSWORD_LOGIN or f"only {', '.join(settings.PMD_PASSWORD_LOGIN_USERS)}",
        "forward_auth": (
            ", ".join(str(n) for n in settings.PMD_FORWARD_AUTH_PROXIES) if settings.PMD_FORWARD_AUTH else False
        ),
        "openid_providers": found,
    }


SECTIONS: dict[str, Callable[..., dict]] = {
    "database": _database,
    "index": _index,
    "problems": _problems,
    "models": _models,
    "embeddings": _embeddings,
    "broker": _broker,
    "workers": _workers,
    "watcher": _watcher,
    "answers": _answers,
    "security": _security,
    "sign_in": _sign_in,
    "pmd": _pmd,  # the version: last, after what a person checks first
}


# What a member (not staff) sees of each section: health and counts, never where things run
# (paths, sockets, hosts, URLs, PMD_HOME, worker names). Allow-lists, so a field or section added
# later stays staff-only until someone decides otherwise; an unlisted section shows only `ok`.
MEMBER_FIELDS: dict[str, set[str]] = {
    "pmd": {"ok", "version"},
    "database": {"ok", "embedded", "server", "pgvector"},
    "index": {
        "ok",
        "collections",
        "documents",
        "inactive_documents",
        "contents",
        "contexts",
        "problems",
        "by_collection",
        "indexing",
    },
    "problems": {"ok", "recent", "kinds", "by_kind"},
    "embeddings": {
        "ok",
        "backend",
        "model",
        "chunking",
        "fingerprint",
        "contents",
        "embedded",
        "pending",
        "chunks",
        "hnsw_index",
        "stale_fingerprints",
        "mismatch",
        "hint",
        "job",
        "state",
        "waiting_since",
        "next_check_at",
        "progress",
    },
    # Whether it answers and which models it has; not where it runs (url) nor its raw error.
    "models": {"ok", "backend", "reachable", "models", "hybrid"},
    "broker": {"ok", "mode"},
    "workers": {"ok", "mode", "alive", "error"},
    "watcher": {"ok", "running", "last_seen_seconds_ago", "mode", "last_change_at", "error"},
}
_MEMBER_NESTED = {
    "by_collection": {"name", "documents", "problems", "last_indexed_at"},  # not the folder on the server
    "recent": {"uri", "severity", "message"},  # messages with server paths redacted (see _member_view)
    "by_kind": {"kind", "uri", "message"},  # the same, by kind
    "job": {"state", "done", "total", "percent", "created_at"},  # not its id or message (the job is not theirs)
    "indexing": {"collection", "done", "total", "message"},  # their own jobs only (jobs_visible_to)
}
_STAFF_ONLY_ERROR = "not available (staff can see the details in the status report)"


# An absolute path inside a message (a refused folder, PMD_HOME=…): where things run is for staff.
# Whole paths only: one starting a word (after a space, `=`, a quote or an opening bracket), never
# the tail of another word (`a-b/c.md`, `@scope/pkg`, `pmd://notes/a.md`); a sentence's full stop
# or colon after it is not part of it.
_SERVER_PATH = re.compile(r"""(?<![^\s=('"`\[<])/[^\s,;'"`()\[\]<>]*[^\s,;:.'"`()\[\]<>]""")


def _redact_paths(value):
    """A member's copy of a message: server paths replaced; an unresolved link's message is the
    note's own text (`(/docs/x.md)` is a link in the note, not a folder of this server)."""
    if not isinstance(value, str) or value.startswith(LINK_PROBLEM_PREFIX):
        return value
    return _SERVER_PATH.sub(_server_path, value)


def _server_path(match: re.Match) -> str:
    bracketed = match.start() > 0 and match.string[match.start() - 1] in "([<"
    return "a folder on the server" if bracketed else "(a folder on the server)"


def _is_model_folder(model) -> bool:
    """A model named by its folder (PMD_EMBED_MODEL=/srv/models/mini, ~/models/mini, ./mini, or a
    relative folder that exists), not by a hub or Ollama name such as `owner/name` or `nomic-embed-text`."""
    if not isinstance(model, str) or not model.strip():
        return False
    model = model.strip()
    return model.startswith(("/", "~", ".")) or os.path.isdir(os.path.expanduser(model))


def _model_folders(value, key: str | None = None) -> set[str]:
    """Every model named by its folder in a section (`model` fields, the fingerprints' too)."""
    if isinstance(value, dict):
        return set().union(*(_model_folders(v, k) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_model_folders(v, key) for v in value))
    return {value} if key == "model" and _is_model_folder(value) else set()


def _without(value, folders: set[str]):
    """`value` with each of `folders` replaced by the folder's own name: the model, not where it lives."""
    if isinstance(value, dict):
        return {k: _without(v, folders) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, folders) for v in value]
    if isinstance(value, str):
        for folder in sorted(folders, key=len, reverse=True):
            value = value.replace(folder, f"{Path(folder.rstrip('/')).name or 'a model'} (a folder on the server)")
    return value


def _member_view(name: str, data: dict) -> dict:
    allowed = MEMBER_FIELDS.get(name, {"ok"})
    data = _without(data, _model_folders(data))  # a local model's path is where things run
    view = {}
    for key, value in data.items():
        if key not in allowed:
            continue
        nested = _MEMBER_NESTED.get(key)
        if nested and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k in nested}
        elif nested and isinstance(value, list):
            value = [{k: _redact_paths(v) for k, v in row.items() if k in nested} for row in value]
        elif key == "hint":  # may name another model's folder (its vectors), not in this section's fields
            value = _redact_paths(value)
        view[key] = value
    if not data.get("ok", True) and "error" in data and "error" not in view:
        view["error"] = _STAFF_ONLY_ERROR
    return view


def status_report(sections: list[str] | None = None, *, internals: bool = False, access) -> dict:
    """The report; `internals` (staff, or the local CLI user) adds where things run and raw errors.
    Counts and names cover only the collections `access` sees."""
    report = {}
    _probe.models = None
    for name, provider in SECTIONS.items():
        if sections and name not in sections:
            continue
        try:
            data = provider(access)
        except Exception as exc:  # noqa: BLE001 - a broken part must not hide the others
            # The exception text can name sockets, hosts or paths: staff only.
            data = {"ok": False, "error": f"{exc.__class__.__name__}: {exc}" if internals else _STAFF_ONLY_ERROR}
        report[name] = data if internals else _member_view(name, data)
    _probe.models = None
    return report


# --- for people: one title and a few sentences per section (`pmd status`, the web page) ----------


def duration(seconds: float) -> str:
    """`42 s`, `3 min`, `2 h 5 min`, `3 days`: as long as a person needs."""
    seconds = abs(float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours:.0f} h" + (f" {minutes:.0f} min" if minutes else "")
    days = seconds // 86400
    return f"{days:.0f} day{'s' if days != 1 else ''}"


def relative_time(value, *, now=None) -> str:
    """An ISO time (or datetime) as `3 min ago` or `in 40 s`; anything else as given."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):  # seconds since the epoch
        value = datetime.fromtimestamp(value, tz=timezone.get_current_timezone())
    if not isinstance(value, datetime):
        return str(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    delta = (value - (now or timezone.now())).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(delta)} ago"


def size(count: float) -> str:
    """Bytes as `512 B`, `3.2 MB`."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return str(count)


TITLES = {
    "pmd": "pmd",
    "database": "Database",
    "index": "Index",
    "problems": "Problems",
    "models": "Model server",
    "embeddings": "Embeddings",
    "broker": "Task queue",
    "workers": "Workers",
    "watcher": "Watcher",
    "security": "Security",
}
_STATE_WORDS = {
    "running": "embedding now",
    "waiting": "waiting for the model server",
    "done": "up to date",
    "queued": "queued, no worker has taken it yet",
    "pending": "not started",
}


def state_words(state: str) -> str:
    """Where embedding stands, in words: the one source every line about it uses."""
    return _STATE_WORDS.get(state, state)


def _models_lines(data: dict) -> list[str]:
    where = f"{data.get('backend', '?')}" + (f" at {data['url']}" if data.get("url") else "")
    if data.get("backend_from"):
        where += f"; backend: {data['backend_from']}"
    if not data.get("reachable", True):
        lines = [f"down: {data.get('error') or 'not reachable'}"] if "url" in data else ["down"]
    elif not data.get("ok", True):
        lines = [data.get("error") or "cannot embed"]
    else:
        lines = [f"answers ({where})"]
    if data.get("backend_from") and not (data.get("reachable", True) and data.get("ok", True)):
        lines.append(f"backend: {data.get('backend', '?')} ({data['backend_from']})")  # where it comes from
    if data.get("advice"):
        lines.append(f"what to do: {data['advice']}")
    if data.get("hybrid"):
        lines.append(data["hybrid"])
    return lines


def _embeddings_lines(data: dict) -> list[str]:
    state = data.get("state")
    lines = []
    if state:
        line = _STATE_WORDS.get(state, state)
        if state == "waiting" and data.get("reason"):
            line += f" ({data['reason']})"
        if state == "waiting" and data.get("next_check_at"):
            line += f"; next check {relative_time(data['next_check_at'])}"
        lines.append(line)
    if "contents" in data:
        lines.append(
            f"{data.get('embedded', 0)} of {data['contents']} notes and commits have vectors"
            + (f" ({data.get('model')})" if data.get("model") else "")
        )
    if data.get("hint"):
        lines.append(data["hint"])
    if data.get("error") and state != "waiting":
        lines.insert(0, data["error"])
    return lines


def _replica_lines(replicas: list[dict]) -> list[str]:
    """A replica that does not answer, or is no standby: searches read from the primary instead."""
    lines = []
    for replica in replicas:
        where = f"read replica {replica['alias']} ({replica['host']}:{replica['port']})"
        if not replica["answers"]:
            lines.append(f"{where} does not answer ({replica['error']}): searches read from the primary meanwhile")
        elif replica["standby"] is False:
            lines.append(f"{where} is not a standby: DATABASE_REPLICA_URLS must name streaming replicas of the primary")
    return lines


def status_headlines(name: str, data: dict) -> list[str]:
    """What a person reads first about a section: whether it works, and if not why and what to do."""
    if name == "models":
        return _models_lines(data)
    if name == "embeddings":
        return _embeddings_lines(data)
    if name == "database" and data.get("ok", True):
        return _replica_lines(data.get("replicas", []))
    if not data.get("ok", True) and data.get("error"):
        return [data["error"]]
    return []
