"""What the web server does while PostgreSQL is away: answer 503 quickly, recover by itself.

A request that fails because the database cannot be reached (server killed, restarting,
socket gone, pool exhausted) is answered `503 Service Unavailable` with `Retry-After`,
as JSON on the API face (/api/, /mcp) and as a small HTML page on the web face, instead
of a 500 with a traceback. One such failure makes this process probe the server with a
fresh connection:

* the probe fails: the database is *down*. Until a probe (at most one a second, on one
  request thread; the others do not wait) succeeds again, requests are answered 503
  at once instead of each waiting for the connection pool's timeout;
* the probe succeeds (now, or later when it comes back): the server was restarted under
  us, so every pooled connection points at the dead one. The pool is replaced by a fresh
  one (once: by the first request that finds out), instead of handing out one broken
  connection per request and reconnecting with the pool's own backoff (which grows to
  tens of seconds).

/healthz uses the same state, in its own format.

`DatabaseUnavailableMiddleware` applies this to Django (its `process_exception` sees view
and django-ninja errors; `server_error` is the handler500 for failures elsewhere, such as
saving a session); `database_guard()` applies it to the MCP route in `pmd_site.asgi`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

import psycopg
from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from indexing.replicas import connection_lost

logger = logging.getLogger("pmd.database")

MESSAGE = "the database is not reachable right now; retry in a few seconds"
RETRY_AFTER_SECONDS = 5
PROBE_INTERVAL = 1.0  # seconds between probes while the database is down
PROBE_CONNECT_TIMEOUT = 2


class DatabaseUnavailable(Exception):
    """Raised instead of a driver error once it is clear the database cannot answer."""


def is_unavailable(exc: BaseException | None) -> bool:
    """Is `exc` the database being unreachable (rather than a bad query, a timeout, a bug)?"""
    return isinstance(exc, DatabaseUnavailable) or connection_lost(exc)


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.probing = threading.Lock()  # one probe at a time; nobody waits for it
        self.down_since: float | None = None
        self.next_probe = 0.0


_state = _State()


def _default_connection():
    return connections[DEFAULT_DB_ALIAS]


def _probe() -> bool:
    """Can a fresh connection (not one from the pool) run a query?"""
    params = _default_connection().get_connection_params()
    params["connect_timeout"] = PROBE_CONNECT_TIMEOUT
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _replace_pool(*, only=None) -> None:
    """Close the connection pool (all of it, or only if it is still `only`): the next query opens a fresh one."""
    wrapper = _default_connection()
    if not wrapper.settings_dict.get("OPTIONS", {}).get("pool"):
        return
    with _state.lock:
        if only is not None and wrapper.pool is not only:
            return  # already replaced, by the request that found out first
        with contextlib.suppress(Exception):  # closed meanwhile by something else
            wrapper.close_pool()
    logger.info("replaced the database connection pool")


def database_available() -> bool:
    """False while the database is known to be down; then at most one probe a second asks again."""
    if _state.down_since is None:
        return True
    now = time.monotonic()
    if now < _state.next_probe or not _state.probing.acquire(blocking=False):
        return False
    try:
        if _state.down_since is None:
            return True  # another thread found it back meanwhile
        _state.next_probe = now + PROBE_INTERVAL
        if not _probe():
            return False
        _replace_pool()  # its connections, and its reconnection backoff, belong to the outage
        logger.warning("the database is reachable again after %.0fs", time.monotonic() - _state.down_since)
        _state.down_since = None
        return True
    finally:
        _state.probing.release()


def note_failure(exc: BaseException) -> None:
    """A request failed with `exc` (see is_unavailable): is the server gone, or was it restarted?

    Call it on the thread whose connection failed: that connection tells which pool to replace.
    """
    if isinstance(exc, DatabaseUnavailable) or _state.down_since is not None:
        return
    failed_pool = getattr(_default_connection().connection, "_pool", None)  # psycopg: the pool it came from
    if not _state.probing.acquire(blocking=False):
        return  # another request is finding out
    try:
        if _probe():
            if failed_pool is not None:
                _replace_pool(only=failed_pool)  # the server is there; our connections were to its previous life
            return
        now = time.monotonic()
        _state.down_since = now
        _state.next_probe = now + PROBE_INTERVAL
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        logger.warning("the database is not reachable (%s): answering 503 until it is back", first_line)
    finally:
        _state.probing.release()


@contextlib.contextmanager
def database_guard():
    """Raise DatabaseUnavailable while the database is down, and for unreachable-database errors inside."""
    if not database_available():
        raise DatabaseUnavailable(MESSAGE)
    try:
        yield
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        note_failure(exc)
        raise DatabaseUnavailable(MESSAGE) from exc


# --- Django ------------------------------------------------------------------------------


def _wants_json(request) -> bool:
    return request.path_info.startswith("/api/")


def unavailable_response(request):
    """503 for the API face (JSON, like its other errors) or the web face (a page that needs no database)."""
    if _wants_json(request):
        response = JsonResponse({"message": MESSAGE, "suggestions": []}, status=503)
    else:
        # No request context: the usual processors would look up the user and the session.
        html = render_to_string(
            "503.html",
            {"message": MESSAGE, "retry_after": RETRY_AFTER_SECONDS, "reload": request.method in {"GET", "HEAD"}},
        )
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    """Django's half of the mapping: 503 while down, and for views that hit an unreachable database."""

    sync_capable = True
    async_capable = True
    exempt_paths = {"/healthz"}  # it checks the database itself, and says so in its own format

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        if request.path_info not in self.exempt_paths and not database_available():
            return unavailable_response(request)
        return self.get_response(request)

    async def _acall(self, request):
        if (
            _state.down_since is not None
            and request.path_info not in self.exempt_paths
            and not await sync_to_async(database_available, thread_sensitive=False)()
        ):
            return unavailable_response(request)
        return await self.get_response(request)

    def process_exception(self, request, exception):
        if not is_unavailable(exception):
            return None
        note_failure(exception)
        return unavailable_response(request)


def server_error(request, *args, **kwargs):
    """handler500: an unreachable database outside a view (a middleware, a session save) is a 503 too."""
    exc = sys.exc_info()[1]
    if is_unavailable(exc):
        note_failure(exc)
        return unavailable_response(request)
    return defaults.server_error(request, *args, **kwargs)
