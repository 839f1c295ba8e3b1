"""The run lock: one embedding run at a time per database."""

from __future__ import annotations

from indexing.locks import (
    EMBEDDING,
    advisory_lock_release,
    advisory_lock_taken,
    advisory_lock_try,
    advisory_lock_wait,
)


def run_lock_try() -> bool:
    # A session lock even inside a transaction: batches commit as they go, the run is what it guards.
    return advisory_lock_try(key=EMBEDDING, session=True)


def run_lock_wait() -> None:
    """Take the run lock, waiting for the run that holds it (PostgreSQL frees it if that process dies)."""
    advisory_lock_wait(key=EMBEDDING, session=True)


def run_lock_release() -> None:
    advisory_lock_release(key=EMBEDDING, session=True)


def embedding_running() -> bool:
    """Is some process (here or elsewhere) inside `embed_pending` right now?"""
    return advisory_lock_taken(key=EMBEDDING)
