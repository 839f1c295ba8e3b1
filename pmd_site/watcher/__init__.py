"""Keep the index fresh while pmd runs: watch collection folders, re-index what changed.

The watcher only decides *which* collections to look at; the incremental scan decides
what changed, so deletions, renames and editors that save three times in a row all come
out right. A file whose mtime moved but whose content did not costs one small UPDATE and
no re-embedding (embeddings are keyed by content hash). After a scan the embedding task is
queued for whatever became stale: both through `collections_refresh` (indexing/services/refresh.py),
the service every face uses.

Inotify (via `watchfiles`) by default; `PMD_WATCH_POLLING=true` switches to polling for
network filesystems, Docker Desktop bind mounts and other places where events are lost.
Periodic reconciliation (celery beat) catches anything the watcher missed.

* loop.py: which folders to watch, which collections a batch of events touches, the loop;
* heartbeat.py: the watcher's liveness record (Redis and a file) and the status section.
"""

from pmd_site.celery import broker_url
from pmd_site.watcher.heartbeat import (
    HEARTBEAT_TTL,
    clear_heartbeat,
    read_heartbeat,
    watcher_health,
    write_heartbeat,
)
from pmd_site.watcher.loop import (
    REFRESH_SECONDS,
    WatchTarget,
    collections_for_changes,
    run_watcher,
    watch_targets,
)

__all__ = [
    "HEARTBEAT_TTL",
    "REFRESH_SECONDS",
    "WatchTarget",
    "broker_url",
    "clear_heartbeat",
    "collections_for_changes",
    "read_heartbeat",
    "run_watcher",
    "watch_targets",
    "watcher_health",
    "write_heartbeat",
]
