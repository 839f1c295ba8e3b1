"""PostgreSQL advisory locks: work that must not overlap, across every process on the database.

The CLI, the worker, the watcher and the web server are separate processes (and maybe
separate machines); the database is what they share, so it holds the locks. A lock is
a pair of 32-bit keys: a namespace for the kind of work and a number inside it.

Outside a transaction a lock belongs to the session and is released explicitly (or by
PostgreSQL when the connection goes away, e.g. a killed worker). Inside one it is
released at commit or rollback instead: another process must not get in before our
writes are visible, and a rolled-back transaction must not leave a session lock behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection

logger = logging.getLogger(__name__)

PMD = 0x706D64  # "pmd": pmd's own single locks, told apart by the second key
EMBEDDING = (PMD, 1)  # one embedding run at a time per database
KEYWORD_INDEX = (PMD, 2)  # one writer of the BM25 tables at a time
EMBEDDING_QUEUE = (PMD, 3)  # one decision at a time about requests waiting for the LLM backend
MIGRATIONS = (PMD, 4)  # one process at a time applies migrations to a database
CREATE_DATABASE = (PMD, 5)  # one process at a time creates an index's database (on the server's `postgres` database)
_COLLECTION = 0x706D63  # "pmc": the second key is a collection id


def collection_lock_key(collection_pk: int) -> tuple[int, int]:
    """The lock of one collection's indexing."""
    return (_COLLECTION, int(collection_pk) % 2**31)


def _transaction_scoped(session: bool) -> bool:
    return connection.in_atomic_block and not session


def advisory_lock_try(*, key: tuple[int, int], session: bool = False) -> bool:
    """Take the lock if it is free; False if another session holds it. With `session`, a
    session lock even inside a transaction (work that commits as it goes, like embedding)."""
    function = "pg_try_advisory_xact_lock" if _transaction_scoped(session) else "pg_try_advisory_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", list(key))
        return bool(cursor.fetchone()[0])


def advisory_lock_wait(*, key: tuple[int, int], session: bool = False) -> None:
    """Take the lock, waiting for whoever holds it."""
    function = "pg_advisory_xact_lock" if _transaction_scoped(session) else "pg_advisory_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", list(key))


def advisory_lock_release(*, key: tuple[int, int], session: bool = False) -> None:
    """Release a session lock (one scoped to a transaction goes with the transaction)."""
    if _transaction_scoped(session):
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", list(key))
    except Exception:  # dropping the session releases its locks
        logger.warning("could not release advisory lock %s", key, exc_info=True)
        if not connection.in_atomic_block:
            connection.close()  # the next query opens a new session, without the lock


def advisory_lock_taken(*, key: tuple[int, int]) -> bool:
    """Does any session (here or elsewhere) hold the lock right now?"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s AND objid = %s AND objsubid = 2",
            list(key),
        )
        return cursor.fetchone() is not None


@contextmanager
def advisory_lock(*, key: tuple[int, int], on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the lock for the block, waiting for it if needed (`on_wait` is told first)."""
    if not advisory_lock_try(key=key):
        if on_wait is not None:
            on_wait()
        advisory_lock_wait(key=key)
    try:
        yield
    finally:
        advisory_lock_release(key=key)
