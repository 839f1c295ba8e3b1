"""The background work: celery's broker and workers, `pmd up`'s processes, periodic re-indexing,
the folder watcher."""

from __future__ import annotations

from pmd_site.settings.table import read

# Empty means "the embedded Redis under PMD_HOME" (started by pmd itself).
CELERY_BROKER_URL = read("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = read("CELERY_RESULT_BACKEND")
CELERY_TASK_ALWAYS_EAGER = read("PMD_TASKS_EAGER")
# What `pmd worker` takes when --queues is not given: all, index (indexing, converting and the
# rest) or embed; one image on several hosts, each host its role (e.g. embed next to the GPU).
PMD_WORKER_QUEUES = read("PMD_WORKER_QUEUES")
PMD_RECONCILE_INTERVAL = read("PMD_RECONCILE_INTERVAL")
PMD_PULL_ON_RECONCILE = read("PMD_PULL_ON_RECONCILE")
# A running job whose process sent no heartbeat for this long (another machine's worker) is
# recovered as "worker stopped"; on the same machine a dead process is noticed at once.
PMD_JOB_STALE_SECONDS = read("PMD_JOB_STALE_SECONDS")

# --- Folder watcher (pmd up / pmd watch) ------------------------------------------------
PMD_WATCH = read("PMD_WATCH")
PMD_WATCH_POLLING = read("PMD_WATCH_POLLING")
PMD_WATCH_DEBOUNCE_MS = read("PMD_WATCH_DEBOUNCE_MS")
# `pmd up`'s processes: "default" (web, an index worker, an embedder, beat, watcher) or "small"
# (web and one worker running both queues, the scheduler and the watcher: for small boxes).
PMD_PROFILE = read("PMD_PROFILE")
