"""The watcher's loop: which folders to watch, which collections a batch of file events
touches; each batch goes to `collections_refresh` (indexing/services/refresh.py), which scans them and
queues embedding of what changed. See pmd_site/watcher/__init__.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import watchfiles
from django.conf import settings
from django.db import close_old_connections, connection

from indexing.access import Access
from indexing.folders import collection_folder_refusal
from indexing.models import Collection
from indexing.paths import glob_match
from indexing.services.background import embedding_request
from indexing.services.refresh import collections_refresh
from pmd_site.watcher.heartbeat import clear_heartbeat, write_heartbeat

log = logging.getLogger("pmd.watcher")

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
    _fresh_connection()
    targets = []
    for name, root, mask in Collection.objects.order_by("name").values_list("name", "root_path", "mask"):
        path = Path(root)
        if path.is_dir() and os.path.realpath(path) == os.path.normpath(path) and not collection_folder_refusal(path):
            targets.append(WatchTarget(name, path, mask))
    return targets


_SKIPPED_FOLDERS = {"node_modules", "__pycache__"}


def _watched(rel_parts: tuple[str, ...]) -> bool:
    """Is a folder at these parts (relative to the collection) one whose events can matter? Hidden
    folders cannot hold documents; of `.git` only the refs tell that history moved."""
    if not rel_parts:
        return True
    if rel_parts[0] == ".git":
        return len(rel_parts) == 1 or rel_parts[1] == "refs"
    return not any(p.startswith(".") or p in _SKIPPED_FOLDERS for p in rel_parts)


def watch_folders(targets: list[WatchTarget]) -> list[str]:
    """Every real folder inside the collections, listed without following symbolic links.

    watchfiles' recursive watch (the Rust notify crate) follows links to folders: one link to /
    in a collection put the whole machine, PostgreSQL's data folder included, under watch and
    re-indexed the collection for every write anywhere. So pmd lists the folders itself and
    watches each one alone; a folder created later makes the loop list them again.
    """
    folders: list[str] = []
    for target in targets:
        stack: list[tuple[str, tuple[str, ...]]] = [(str(target.root), ())]
        while stack:
            folder, parts = stack.pop()
            folders.append(folder)
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        try:
                            real_dir = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            continue
                        if real_dir and _watched(parts + (entry.name,)):
                            stack.append((entry.path, parts + (entry.name,)))
            except OSError:  # unreadable or gone meanwhile: what is left is still watched
                continue
    return sorted(set(folders))


def _outside(abspath: str, root: Path) -> bool:
    """A link, or a path whose real folder is not inside the collection: no document can change there
    (the scan refuses links), so its events never re-index."""
    if os.path.islink(abspath):
        return True
    real = os.path.realpath(os.path.dirname(abspath))
    return real != str(root) and not real.startswith(str(root).rstrip("/") + "/")


def new_folders(changes, targets: list[WatchTarget], watched: set[str]) -> bool:
    """Did a real folder appear that should be watched (its own watch starts with the next listing)?"""
    for change, raw in changes:
        if change != watchfiles.Change.added or raw in watched or os.path.islink(raw) or not os.path.isdir(raw):
            continue
        for target in targets:
            try:
                parts = Path(raw).relative_to(target.root).parts
            except ValueError:
                continue
            if _watched(parts) and not _outside(raw, target.root):
                return True
    return False


def _relevant(rel: str, abspath: str, mask: str) -> bool:
    """Could this change alter the collection's documents? (git's churn in `.git` cannot)."""
    parts = rel.split("/")
    if any(p.startswith(".") or p in {"node_modules", "__pycache__"} for p in parts):
        return False
    if glob_match(mask, rel):
        return True
    # A folder that was renamed or deleted may have held documents.
    return os.path.isdir(abspath) or not os.path.exists(abspath)


def _git_ref_change(rel: str) -> bool:
    """A commit, checkout, reset or fetch moved HEAD or a ref: the collection's history may have changed."""
    if rel.endswith(".lock"):
        return False
    return rel in {".git/HEAD", ".git/packed-refs"} or rel.startswith(".git/refs/")


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
            if rel in {"", "."}:
                names.add(target.name)
            elif _outside(raw, target.root):
                continue
            elif _relevant(rel, raw, target.mask) or _git_ref_change(rel):
                names.add(target.name)
    return names


def _refresh(names: list[str], state: dict) -> None:
    try:
        summary = collections_refresh(names=names, missing="skip", access=Access.local_user()).logged_summary()
    except Exception:  # keep watching; the next event or reconcile retries
        log.exception("re-indexing %s failed", ", ".join(names))
    else:
        state["last_reindex"] = {k: v for k, v in summary.items() if k != "reports"}
        log.info(
            "re-indexed %s: %s changed, %s removed in %ss (embedding task %s)",
            ", ".join(names),
            summary["changed"],
            summary["removed"],
            summary["seconds"],
            summary.get("embedding_task") or "-",
        )


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
    stop_event = stop_event or threading.Event()
    polling = settings.PMD_WATCH_POLLING if polling is None else polling
    step = debounce_ms or settings.PMD_WATCH_DEBOUNCE_MS
    mode = "polling" if polling else "events"
    state: dict = {"mode": mode, "collections": [], "last_change_at": None, "last_reindex": None}

    if catch_up:
        summary = collections_refresh(access=Access.local_user()).logged_summary()
        state["last_reindex"] = {k: v for k, v in summary.items() if k != "reports"}
        log.info(
            "catch-up scan: %s changed, %s removed in %ss",
            summary["changed"],
            summary["removed"],
            summary.get("seconds"),
        )
        if not summary["changed"]:
            embedding_request(no_worker="queue")  # earlier runs may have left content without vectors

    pending: set[str] = set()  # collections to scan once the new watch is up (a folder appeared)
    while not stop_event.is_set():
        targets = watch_targets()
        state["collections"] = [{"name": t.name, "path": str(t.root)} for t in targets]
        write_heartbeat(state)
        if not targets:
            stop_event.wait(REFRESH_SECONDS)
            continue
        folders = watch_folders(targets)
        watched = set(folders)
        log.info("watching %d folder(s) (%s): %s", len(targets), mode, ", ".join(str(t.root) for t in targets))
        last_beat = time.monotonic()
        try:
            for changes in watchfiles.watch(
                *folders,
                watch_filter=None,  # our own filter knows the masks; watchfiles' default drops too little/too much
                debounce=max(step * 8, 2000),
                step=step,
                stop_event=stop_event,
                rust_timeout=REFRESH_SECONDS * 1000,
                yield_on_timeout=True,
                raise_interrupt=False,
                force_polling=polling,
                poll_delay_ms=max(step, 300),
                recursive=False,  # see watch_folders: a recursive watch follows links out of the collection
                ignore_permission_denied=True,
            ):
                names = collections_for_changes(changes or (), targets) | pending
                pending = set()
                if names:
                    state["last_change_at"] = time.time()
                    _refresh(sorted(names), state)
                if changes and new_folders(changes, targets, watched):
                    # Scanned again once the new folder is watched: files written into it meanwhile count.
                    pending = set(names)
                    break
                if time.monotonic() - last_beat >= REFRESH_SECONDS:
                    last_beat = time.monotonic()
                    write_heartbeat(state)
                    try:
                        if watch_targets() != targets:
                            break  # a collection was added, removed or moved: watch the new set
                    except Exception:  # noqa: BLE001 - database briefly away; try again next beat
                        log.warning("cannot read collections; retrying")
        except FileNotFoundError:  # a folder went away between listing and watching: list again
            log.info("a watched folder vanished; listing the folders again")
            pending |= {t.name for t in targets}
            stop_event.wait(min(1.0, step / 1000))
    clear_heartbeat()
