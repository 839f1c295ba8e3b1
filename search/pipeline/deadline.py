"""Run blocking calls concurrently and stop waiting at a deadline.

`pmd query` talks to an LLM server that may be slow, overloaded or gone; it must
answer in seconds with what it has rather than hang. Calls run in daemon threads
(an abandoned call can never keep the process alive at exit, which a
ThreadPoolExecutor would: it joins its workers at interpreter shutdown), and the
caller collects whatever finished before the deadline.

Django gives every thread its own database connection; a worker that touched the
database closes its connections when it is done (`uses_db=True`), otherwise each
query would leak one.
"""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

_stragglers: list[threading.Thread] = []
_stragglers_lock = threading.Lock()


@dataclass
class Outcome:
    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)  # names still running (or never started) at the deadline
    alongside: Any = None  # the value of run_concurrently's `alongside` call


def run_concurrently(
    calls: dict[str, Callable[[], Any]],
    *,
    timeout: float,
    workers: int | None = None,
    uses_db: bool = False,
    stop_on: Callable[[str, BaseException], bool] | None = None,
    alongside: Callable[[], Any] | None = None,
) -> Outcome:
    """Run `calls` (name → no-argument function) on up to `workers` threads.

    Returns when all are done, when `timeout` seconds have passed, or when
    `stop_on(name, error)` says an error makes the remaining calls pointless
    (e.g. the server is down); unfinished names are listed in `timed_out`.

    `alongside` runs in the calling thread (its database connection, its transaction)
    while the threads work; its value is `outcome.alongside`, its error propagates, and
    the timeout counts from the start (calls that finished meanwhile are still collected).
    """
    outcome = Outcome()
    if not calls:
        if alongside is not None:
            outcome.alongside = alongside()
        return outcome
    tasks: queue.SimpleQueue = queue.SimpleQueue()
    for name, call in calls.items():  # each in the caller's context (e.g. which database it reads)
        tasks.put((name, functools.partial(contextvars.copy_context().run, call)))
    done: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        try:
            while not stop.is_set():
                try:
                    name, call = tasks.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((name, True, call()))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    done.put((name, False, exc))
        finally:
            if uses_db:
                connections.close_all()

    count = max(1, min(workers or len(calls), len(calls)))
    threads = [threading.Thread(target=work, name=f"pmd-deadline-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + max(0.0, timeout)  # before `alongside`: it spends the same budget
    if alongside is not None:
        try:
            outcome.alongside = alongside()
        except BaseException:
            stop.set()
            with _stragglers_lock:
                _stragglers[:] = [t for t in _stragglers if t.is_alive()] + [t for t in threads if t.is_alive()]
            raise
    pending = set(calls)
    while pending:
        remaining = deadline - time.monotonic()
        try:
            if remaining > 0:
                name, ok, value = done.get(timeout=remaining)
            else:  # past the deadline: only what is already done
                name, ok, value = done.get_nowait()
        except queue.Empty:
            break
        pending.discard(name)
        if ok:
            outcome.results[name] = value
        else:
            outcome.errors[name] = value
            if stop_on is not None and stop_on(name, value):
                break
    stop.set()
    # Anything that finished while we were deciding to stop still counts.
    while True:
        try:
            name, ok, value = done.get_nowait()
        except queue.Empty:
            break
        if name in pending:
            pending.discard(name)
            (outcome.results if ok else outcome.errors)[name] = value
    outcome.timed_out = [name for name in calls if name in pending]
    with _stragglers_lock:
        _stragglers[:] = [t for t in _stragglers if t.is_alive()] + [t for t in threads if t.is_alive()]
    return outcome


def wait_for_stragglers(timeout: float = 30.0) -> bool:
    """Join threads abandoned at a deadline (tests call this so no thread outlives them)."""
    end = time.monotonic() + timeout
    with _stragglers_lock:
        threads = list(_stragglers)
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    with _stragglers_lock:
        _stragglers[:] = [t for t in _stragglers if t.is_alive()]
        return not _stragglers
