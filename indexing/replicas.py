"""Read replicas: searches, gets and listings read from a streaming replica, everything else from the primary.

Only reads declared tolerant of a little lag use a replica: the functions decorated with
`replica_reads` (search_run, get, multi-get, ls, the collection list). Everything else (every
write, sessions and sign-in, token checks, the LLM cache, job rows) uses the primary, so nothing
that must read its own writes ever sees a replica by accident.

* Django's ORM follows `ReplicaRouter`; raw SQL on the read path takes its connection from
  `read_connection()` (a router does not see `connection.cursor()`).
* Read-your-writes: once this request (or CLI run) has changed notes, its reads stay on the
  primary; and the whole process reads from the primary for `PMD_DB_REPLICA_PIN_SECONDS` after it
  changed notes (a refresh, then a search from another thread). Bookkeeping writes (a token's
  last use, the search log, the LLM cache, jobs, sessions) do not pin: they happen on every request.
* A replica that fails (down, restarted, a query cancelled by recovery) is not an error for the
  user: the decorated read runs again on the primary, and a replica that was unreachable is left
  alone for `PMD_DB_REPLICA_RETRY_SECONDS`; then one read (one thread) tries it again.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import random
import threading
import time

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

logger = logging.getLogger("pmd.database")

# Read from the primary even inside a replica read: what must be current, or is written as read.
PRIMARY_ONLY = frozenset({"indexing.LLMCache", "indexing.Job", "indexing.ApiToken", "indexing.TokenFailure"})
# Written on ordinary reads (or bookkeeping): such a write does not pin reads to the primary.
BOOKKEEPING = PRIMARY_ONLY | {
    "indexing.AuditEvent",
    "indexing.SearchLogEntry",
    "indexing.SearchFeedback",
    "indexing.Answer",
    "indexing.SavedSearch",
    "indexing.ExternalIdentity",
}
PINNING_APPS = frozenset({"indexing", "search"})
# SQLSTATE classes/codes of a server that is going away or cannot take us: connection exceptions,
# admin/crash shutdown, "the database system is starting up", too many connections.
UNAVAILABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300")
RECOVERY_CONFLICT = "40001"  # a standby cancelled the query to apply the primary's changes

_read_alias: contextvars.ContextVar[str | None] = contextvars.ContextVar("pmd_read_alias", default=None)
_changed_notes: contextvars.ContextVar[bool] = contextvars.ContextVar("pmd_changed_notes", default=False)


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.last_change = float("-inf")  # monotonic time this process last changed notes
        self.down_until: dict[str, float] = {}  # replica alias -> monotonic time to try it again


_state = _State()


def replica_aliases() -> list[str]:
    return list(getattr(settings, "DATABASE_REPLICAS", ()))


def connection_lost(exc: BaseException | None) -> bool:
    """Is `exc` the server being unreachable (rather than a bad query, a timeout, a bug)?"""
    if exc is None:
        return False
    if isinstance(exc, (InterfaceError, psycopg.InterfaceError)):
        return True  # "connection already closed"
    if not isinstance(exc, (OperationalError, psycopg.OperationalError)):
        return False
    sqlstate = _sqlstate(exc)
    return sqlstate is None or sqlstate.startswith(UNAVAILABLE_SQLSTATES)


def _sqlstate(exc: BaseException) -> str | None:
    cause = exc.__cause__  # Django wraps psycopg's errors; the original (with its SQLSTATE) is the cause
    driver = cause if cause is not None and type(cause).__module__.startswith("psycopg") else exc
    return getattr(driver, "sqlstate", None)


# --- read your writes ----------------------------------------------------------------------


def notes_changed() -> None:
    """This request (or run) and, for a few seconds, this process read from the primary from now on."""
    _changed_notes.set(True)
    _state.last_change = time.monotonic()


def request_started(**kwargs) -> None:
    """A new request has changed nothing yet (connected to Django's request_started)."""
    _changed_notes.set(False)


def pinned_to_primary() -> bool:
    return _changed_notes.get() or time.monotonic() - _state.last_change < settings.PMD_DB_REPLICA_PIN_SECONDS


# --- which connection reads ----------------------------------------------------------------


def read_alias() -> str:
    """The database alias reads go to here and now: a replica inside `replica_reads`, else the primary."""
    alias = _read_alias.get()
    if alias is None or pinned_to_primary():
        return DEFAULT_DB_ALIAS
    return alias


def read_connection():
    """The connection raw SQL on the read path uses (in place of `django.db.connection`)."""
    return connections[read_alias()]


def _replica_choice() -> str | None:
    """A replica to read from, or None: none configured, or none answering. A replica whose retry
    time has come is claimed by one caller (it pushes the time on) so the others do not all try it."""
    aliases = replica_aliases()
    if not aliases:
        return None
    now = time.monotonic()
    up = [alias for alias in aliases if alias not in _state.down_until]
    if up:
        return random.choice(up)
    with _state.lock:
        due = [alias for alias in aliases if _state.down_until.get(alias, 0.0) <= now]
        if not due:
            return None
        alias = random.choice(due)
        _state.down_until[alias] = now + settings.PMD_DB_REPLICA_RETRY_SECONDS
        return alias


def _replica_failed(alias: str, exc: BaseException) -> bool:
    """Was `exc` the replica failing (then it is noted, and the read runs again on the primary)?"""
    if _sqlstate(exc) == RECOVERY_CONFLICT:
        return True
    if not connection_lost(exc):
        return False
    try:
        connections[alias].close()
    except Exception:  # noqa: BLE001 - it is gone already
        pass
    with _state.lock:
        first = alias not in _state.down_until
        _state.down_until[alias] = time.monotonic() + settings.PMD_DB_REPLICA_RETRY_SECONDS
    if first:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        logger.warning("read replica %s is not answering (%s): reading from the primary", alias, first_line)
    return True


def replica_reads(func):
    """Run `func` (a read that may lag the primary by a moment) on a replica, on the primary if it fails."""

    @functools.wraps(func)
    def read(*args, **kwargs):
        if _read_alias.get() is not None or pinned_to_primary():
            return func(*args, **kwargs)
        alias = _replica_choice()
        if alias is None:
            return func(*args, **kwargs)
        token = _read_alias.set(alias)
        try:
            value = func(*args, **kwargs)
        except Exception as exc:
            if not _replica_failed(alias, exc):
                raise
        else:
            if alias in _state.down_until:
                with _state.lock:
                    _state.down_until.pop(alias, None)
                logger.warning("read replica %s answers again", alias)
            return value
        finally:
            _read_alias.reset(token)
        return func(*args, **kwargs)

    return read


class ReplicaRouter:
    """Django's half: ORM reads inside `replica_reads` go to its replica, all else to the primary."""

    def db_for_read(self, model, **hints):
        if model._meta.label in PRIMARY_ONLY:
            return DEFAULT_DB_ALIAS
        return read_alias()

    def db_for_write(self, model, **hints):
        if model._meta.app_label in PINNING_APPS and model._meta.label not in BOOKKEEPING:
            notes_changed()
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        return True  # every alias is the same database

    def allow_migrate(self, db, app_label, **hints):
        return db == DEFAULT_DB_ALIAS


# --- status --------------------------------------------------------------------------------


def replicas_health() -> list[dict]:
    """Each replica: does it answer (a fresh connection, short timeout), and how far behind it is."""
    rows = []
    for alias in replica_aliases():
        wrapper = connections[alias]
        params = wrapper.get_connection_params()
        params["connect_timeout"] = min(int(params.get("connect_timeout") or 2), 2)
        row = {
            "alias": alias,
            "host": wrapper.settings_dict.get("HOST") or "localhost",
            "port": wrapper.settings_dict.get("PORT") or "5432",
            "answers": False,
            "standby": None,
            "lag_seconds": None,
            "error": None,
        }
        try:
            with psycopg.connect(**params, autocommit=True) as conn:
                # Caught up (all it received is applied): no lag, however long ago the last change was.
                standby, lag = conn.execute(
                    "SELECT pg_is_in_recovery(), CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
                    "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END"
                ).fetchone()
                row.update(answers=True, standby=standby, lag_seconds=None if lag is None else round(float(lag), 3))
        except psycopg.Error as exc:
            row["error"] = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        rows.append(row)
    return rows
