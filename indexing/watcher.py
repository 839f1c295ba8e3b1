"""Keep the index fresh while pmd runs: watch collection folders, re-index what changed.

The watcher only decides *which* collections to look at; the incremental scan
(`collections_update`) decides what changed, so deletions, renames and editors that
save three times in a row all come out right. A file whose mtime moved but whose
content did not costs one small UPDATE and no re-embedding (embeddings are keyed by
content hash). After a scan the embedding task is queued for whatever became stale.

Inotify (via `watchfiles`) by default; `PMD_WATCH_POLLING=true` switches to polling for
network filesystems, Docker Desktop bind mounts and other places where events are lost.
Periodic reconciliation (celery beat) catches anything the watcher missed.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection

from indexing.paths import glob_match

log = logging.getLogger("pmd.watcher")

HEARTBEAT_TTL = 60  # seconds: a heartbeat older than this means the watcher is gone
REFRESH_SECONDS = 5  # how often the watcher re-reads the collection list and beats


def _fresh_connection() -> None:
    """A long-running loop must not reuse a connection the database dropped (restart, idle timeout)."""
    if not connection.in_atomic_block:
        close_old_connections()


@dataclass(frozen=True)
class WatchTarget:
    name: str
    root: Path
    mask: str


def watch_targets() -> list[WatchTarget]:
    """The collections whose folders exist and may be read, as the watcher sees them.

    A folder no one may index (/proc, pmd's own data) is not watched either: watching /proc
    recursively would walk the whole machine through /proc/<pid>/root.
    """
    from indexing.models import Collection
    from indexing.services.collections import collection_folder_refusal

    _fresh_connection()
    targets = []
    for name, root, mask in Collection.objects.order_by("name").values_list("name", "root_path", "mask"):
        path = Path(root)
        if path.is_dir() and not collection_folder_refusal(Path(os.path.realpath(path))):
            targets.append(WatchTarget(name, path, mask))
    return targets


def _relevant(rel: str, abspath: str, mask: str) -> bool:
    """Could this change alter the collection's documents? (git's churn in `.git` cannot)."""
    parts = rel.split("/")
    if any(p.startswith(".") or p in {"node_modules", "__pycache__"} for p in parts):
        return False
    if glob_match(mask, rel):
        return True
    # A folder that was renamed or deleted may have held documents.
    return os.path.isdir(abspath) or not os.path.exists(abspath)


def collections_for_changes(changes, targets: list[WatchTarget]) -> set[str]:
    """Names of the collections that a batch of (change, path) events touches."""
    names: set[str] = set()
    for _change, raw in changes:
        path = Path(raw)
        for target in targets:
            if target.name in names:
                continue
            try:
                rel = path.relative_to(target.root).as_posix()
            except ValueError:
                continue
            if rel in {"", "."} or _relevant(rel, raw, target.mask):
                names.add(target.name)
    return names


def enqueue_embedding() -> str | None:
    """Queue embedding of whatever content has no vectors yet; returns the task id (or None)."""
    try:
        from indexing import tasks
    except ImportError:
        return None
    task = next((getattr(tasks, name) for name in ("embed_pending", "embed_pending_task", "embed")
                 if hasattr(tasks, name)), None)
    if task is None:
        return None
    try:
        return task.delay().id
    except Exception as exc:  # noqa: BLE001 - a broker hiccup must not stop the watcher
        log.warning("could not queue embedding: %s", exc)
        return None


def reindex(names: list[str] | None, *, pull: bool = False) -> dict:
    """Re-index some collections (all with None), then queue embedding; a summary for logs.

    A collection removed between the file event and the scan is skipped (and listed under
    `skipped`); the others are still indexed. The summary has the same keys either way."""
    from indexing.models import Collection
    from indexing.services.collections import CollectionError, collections_update

    _fresh_connection()
    started = time.perf_counter()
    skipped: list[str] = []
    if names is not None:
        existing = set(Collection.objects.filter(name__in=names).values_list("name", flat=True))
        skipped = [n for n in names if n not in existing]
        names = [n for n in names if n in existing]
    results = collections_update(pull=pull) if names is None else []
    for name in names or []:
        try:
            results += collections_update(names=[name], pull=pull)
        except CollectionError:  # removed after the check above
            skipped.append(name)
    if skipped:
        log.info("skipped: collection %s no longer exists", ", ".join(skipped))
    changed = removed = 0
    summary = []
    for report, pulled, problem in results:
        if problem:
            log.warning("%s", problem)
            continue
        if pulled is not None and pulled.ran and not pulled.ok:
            log.warning("git pull %s failed: %s", pulled.collection, pulled.output)
        changed += len(report.changed_document_ids)
        removed += len(report.removed_document_ids)
        summary.append(report.as_dict())
    task_id = enqueue_embedding() if changed else None
    return {
        "collections": [s["collection"] for s in summary],
        "changed": changed,
        "removed": removed,
        "embedding_task": task_id,
        "seconds": round(time.perf_counter() - started, 3),
        "reports": summary,
        "skipped": skipped,
    }


# --- heartbeat ---------------------------------------------------------------------------

def _heartbeat_file() -> Path:
    return settings.PMD_HOME / "run" / f"watcher-{settings.PMD_INDEX}.json"


def _heartbeat_key() -> str:
    return f"pmd:{settings.PMD_INDEX}:watcher"


def _redis_client():
    url = broker_url()
    if not url or not url.startswith(("redis://", "rediss://", "unix://", "redis+socket://")):
        return None
    import redis

    return redis.Redis.from_url(url.replace("redis+socket://", "unix://"), socket_timeout=1, socket_connect_timeout=1)


def broker_url() -> str:
    """The broker the celery app uses (the embedded Redis when CELERY_BROKER_URL is empty)."""
    try:
        from pmd_site.celery import app
    except ImportError:
        return settings.CELERY_BROKER_URL
    return str(app.conf.broker_url or "")


def write_heartbeat(state: dict) -> None:
    """Record that the watcher is alive (a Redis key other containers can read, and a file)."""
    state = {**state, "pid": os.getpid(), "at": time.time()}
    data = json.dumps(state, default=str)
    try:
        path = _heartbeat_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(data)
        tmp.replace(path)
    except OSError:
        pass
    try:
        client = _redis_client()
        if client is not None:
            client.set(_heartbeat_key(), data, ex=HEARTBEAT_TTL)
    except Exception:  # noqa: BLE001 - the file is enough on a laptop
        pass


def read_heartbeat() -> dict | None:
    """The last heartbeat (from Redis, else the file), or None if none was ever written."""
    raw = None
    try:
        client = _redis_client()
        if client is not None:
            raw = client.get(_heartbeat_key())
    except Exception:  # noqa: BLE001
        raw = None
    if raw is None:
        try:
            raw = _heartbeat_file().read_text()
        except OSError:
            return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def clear_heartbeat() -> None:
    with_state = read_heartbeat() or {}
    if with_state.get("pid") not in (None, os.getpid()):
        return
    try:
        _heartbeat_file().unlink()
    except OSError:
        pass
    try:
        client = _redis_client()
        if client is not None:
            client.delete(_heartbeat_key())
    except Exception:  # noqa: BLE001
        pass


def watcher_health() -> dict:
    """The `watcher` section of `pmd status`."""
    beat = read_heartbeat()
    if beat is None:
        return {"ok": False, "running": False, "error": "no watcher has run (it runs inside `pmd up`)"}
    age = time.time() - float(beat.get("at", 0))
    alive = age < HEARTBEAT_TTL
    result = {
        "ok": alive,
        "running": alive,
        "last_seen_seconds_ago": round(age, 1),
        "mode": beat.get("mode"),
        "collections": beat.get("collections", []),
        "last_change_at": beat.get("last_change_at"),
        "last_reindex": beat.get("last_reindex"),
    }
    if not alive:
        result["error"] = f"last heartbeat {age:.0f}s ago: the watcher is not running"
    return result


# --- the loop ------------------------------------------------------------------------------

def run_watcher(
    *,
    stop_event: threading.Event | None = None,
    polling: bool | None = None,
    debounce_ms: int | None = None,
    catch_up: bool = True,
) -> None:
    """Watch every collection folder until `stop_event` is set.

    With `catch_up`, every collection is re-indexed once first: that picks up what
    changed while nothing was watching (the scan skips unchanged files by mtime/size).
    """
    import watchfiles

    stop_event = stop_event or threading.Event()
    polling = settings.PMD_WATCH_POLLING if polling is None else polling
    step = debounce_ms or settings.PMD_WATCH_DEBOUNCE_MS
    mode = "polling" if polling else "events"
    state: dict = {"mode": mode, "collections": [], "last_change_at": None, "last_reindex": None}

    if catch_up:
        summary = reindex(None)
        state["last_reindex"] = {k: v for k, v in summary.items() if k != "reports"}
        log.info("catch-up scan: %s changed, %s removed in %ss",
                 summary["changed"], summary["removed"], summary.get("seconds"))
        if not summary["changed"]:
            enqueue_embedding()  # earlier runs may have left content without vectors

    while not stop_event.is_set():
        targets = watch_targets()
        state["collections"] = [{"name": t.name, "path": str(t.root)} for t in targets]
        write_heartbeat(state)
        if not targets:
            stop_event.wait(REFRESH_SECONDS)
            continue
        log.info("watching %d folder(s) (%s): %s", len(targets), mode, ", ".join(str(t.root) for t in targets))
        last_beat = time.monotonic()
        for changes in watchfiles.watch(
            *[t.root for t in targets],
            watch_filter=None,  # our own filter knows the masks; watchfiles' default drops too little/too much
            debounce=max(step * 8, 2000),
            step=step,
            stop_event=stop_event,
            rust_timeout=REFRESH_SECONDS * 1000,
            yield_on_timeout=True,
            raise_interrupt=False,
            force_polling=polling,
            poll_delay_ms=max(step, 300),
            ignore_permission_denied=True,
        ):
            if changes:
                names = collections_for_changes(changes, targets)
                if names:
                    state["last_change_at"] = time.time()
                    try:
                        summary = reindex(sorted(names))
                    except Exception:  # noqa: BLE001 - keep watching; the next event or reconcile retries
                        log.exception("re-indexing %s failed", ", ".join(sorted(names)))
                    else:
                        state["last_reindex"] = {k: v for k, v in summary.items() if k != "reports"}
                        log.info("re-indexed %s: %s changed, %s removed in %ss (embedding task %s)",
                                 ", ".join(sorted(names)), summary["changed"], summary["removed"],
                                 summary["seconds"], summary.get("embedding_task") or "-")
            if time.monotonic() - last_beat >= REFRESH_SECONDS:
                last_beat = time.monotonic()
                write_heartbeat(state)
                try:
                    if watch_targets() != targets:
                        break  # a collection was added, removed or moved: watch the new set
                except Exception:  # noqa: BLE001 - database briefly away; try again next beat
                    log.warning("cannot read collections; retrying")
    clear_heartbeat()
