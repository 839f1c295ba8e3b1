"""The watcher's heartbeat: a Redis key other containers can read, and a file under PMD_HOME."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from django.conf import settings

from pmd_site.celery import broker_url
from pmd_site.runtime.redis_server import redis_client

HEARTBEAT_TTL = 60  # seconds: a heartbeat older than this means the watcher is gone


def _heartbeat_file() -> Path:
    return settings.PMD_HOME / "run" / f"watcher-{settings.PMD_INDEX}.json"


def _heartbeat_key() -> str:
    return f"pmd:{settings.PMD_INDEX}:watcher"


def _redis_client():
    return redis_client(broker_url())


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
    except Exception:  # noqa: BLE001 - Redis away: read the file instead
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
    except Exception:  # noqa: BLE001 - Redis away: its copy expires (HEARTBEAT_TTL)
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
