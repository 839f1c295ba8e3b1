"""The single services `pmd up` is made of: `pmd serve`, `pmd worker`, `pmd beat`, `pmd watch`,
`pmd healthcheck` and `pmd migrate`.

`pmd up` (pmd_site/cli/up.py) runs them as its children; the docker compose services run them
one per container.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from indexing.errors import CommandError
from pmd_site.cli.output import stdout_console, warn
from pmd_site.runtime.supervisor import die_with_supervisor  # standard library only: cheap

WORKER_QUEUES = ("all", "index", "embed")  # PMD_WORKER_QUEUES takes the same names (pmd_site/settings/table.py)


def register(sub) -> None:
    serve = sub.add_parser("serve", help="run only the ASGI web server (UI, API, /mcp)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    # The settings load before cmd_serve runs: pool the web server's connections from the start.
    serve.set_defaults(func=cmd_serve, needs_db=False, environ_defaults={"PMD_DB_POOL": "true"})

    worker = sub.add_parser("worker", help="run only a celery worker (embedding and indexing tasks)")
    worker.add_argument("--concurrency", type=int, default=None, help="task processes (default: celery's)")
    worker.add_argument(
        "--queues",
        choices=WORKER_QUEUES,
        default=None,
        help="which work it takes: indexing (with converting), embedding, or both (default: "
        "PMD_WORKER_QUEUES, else both; `pmd up` runs one of each so that indexing never waits "
        "behind embedding)",
    )
    worker.add_argument(
        "--pool",
        choices=["prefork", "threads", "solo"],
        default=None,
        help="how tasks run: prefork (celery's default: a process per task slot), or threads "
        "inside this process (`pmd up`: one process per worker instead of two)",
    )
    worker.add_argument(
        "--with-beat",
        action="store_true",
        help="also run the scheduler, as a thread of this process (`pmd up` with PMD_PROFILE=small)",
    )
    worker.add_argument(
        "--with-watcher",
        action="store_true",
        help="also run the folder watcher, as a thread of this process (PMD_PROFILE=small)",
    )
    worker.set_defaults(func=cmd_worker, needs_db=False)

    beat = sub.add_parser("beat", help="run only the scheduler (periodic reconciliation)")
    beat.set_defaults(func=cmd_beat, needs_db=False)

    watch = sub.add_parser("watch", help="run only the folder watcher (re-index on change)")
    watch.add_argument(
        "--polling",
        action="store_true",
        default=None,
        help="poll instead of file events (network filesystems); also PMD_WATCH_POLLING",
    )
    watch.add_argument(
        "--no-catch-up", dest="catch_up", action="store_false", help="skip the initial re-index of every collection"
    )
    watch.set_defaults(func=cmd_watch, needs_db=False)

    check = sub.add_parser("healthcheck", help="exit 0 if a service here is healthy (for container health checks)")
    check.add_argument("service", choices=["web", "worker", "watcher"])
    check.add_argument("--url", default="http://127.0.0.1:8000/healthz", help="web: the health URL")
    check.add_argument(
        "--queues",
        choices=WORKER_QUEUES,
        default=None,
        help="worker: the queues the worker here takes (as given to `pmd worker --queues`; "
        "default: PMD_WORKER_QUEUES, else all)",
    )
    check.set_defaults(func=cmd_healthcheck, needs_db=False)

    migrate = sub.add_parser("migrate", help="apply database migrations (and collect static files)")
    migrate.add_argument("--no-static", action="store_true", help="skip collectstatic")
    migrate.set_defaults(func=cmd_migrate)


def stop_on_sigterm() -> threading.Event:
    """SIGTERM/SIGINT set an event (instead of killing us mid-write); the loop then returns."""
    stop = threading.Event()

    def handler(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def server_options() -> dict:
    """How `pmd serve` runs uvicorn, whatever the address and workers."""
    from django.conf import settings

    return {
        # Never uvicorn's reading of X-Forwarded-*: it trusts loopback and rewrites the
        # connection's address, which forward auth checks. pmd_site.security reads them, from
        # PMD_TRUSTED_PROXIES only.
        "proxy_headers": False,
        "lifespan": "auto",
        # h11 with header, request-body and stalled-write timeouts (PMD_HTTP_*_TIMEOUT).
        "http": "pmd_site.runtime.http_protocol:TimeoutH11Protocol",
        "timeout_keep_alive": settings.PMD_HTTP_KEEPALIVE_TIMEOUT,
    }


def cmd_serve(args) -> int:
    die_with_supervisor()
    import uvicorn
    from django.conf import settings

    from pmd_site.cli.local_server import start_local_server
    from pmd_site.runtime.process import database_lease

    with database_lease():
        local = start_local_server(settings.PMD_INDEX)  # `pmd search …` answered here (client mode)
        uvicorn.run(
            "pmd_site.asgi:application",
            host=args.host,
            port=args.port,
            workers=args.workers if args.workers > 1 else None,
            log_level="info",
            **server_options(),
        )
        if local is not None:
            local.stop()
    return 0


def _celery_app():
    from pmd_site.celery import app

    return app


def cmd_worker(args) -> int:
    die_with_supervisor()
    from django.conf import settings

    from pmd_site.runtime.process import database_lease

    app = _celery_app()
    which = _queues(args)
    name = worker_name(which)
    argv = ["worker", "--loglevel=INFO", f"--hostname={name}@%h", f"--queues={','.join(celery_queues(which))}"]
    if args.concurrency:
        argv.append(f"--concurrency={args.concurrency}")
    if getattr(args, "pool", None):
        argv.append(f"--pool={args.pool}")
    with contextlib.ExitStack() as stack:
        stack.enter_context(database_lease())
        if settings.PMD_MODEL_SOCKET and which in {"all", "embed"}:
            # This process embeds: it alone loads the local models and answers the others' queries.
            from indexing.llm import get_backend
            from indexing.llm.shared import serve_models

            stack.callback(serve_models(settings.PMD_MODEL_SOCKET, get_backend).close)
        if getattr(args, "with_beat", False):
            from celery.beat import EmbeddedService

            schedule = stack.enter_context(_beat_schedule())
            beat = EmbeddedService(app, thread=True, schedule_filename=str(schedule))
            beat.start()
            stack.callback(beat.stop)
        if getattr(args, "with_watcher", False):
            from pmd_site.watcher import run_watcher

            stop = threading.Event()
            threading.Thread(target=run_watcher, kwargs={"stop_event": stop}, daemon=True, name="pmd-watcher").start()
            stack.callback(stop.set)
        app.worker_main(argv)
    return 0


def cmd_beat(args) -> int:
    die_with_supervisor()
    app = _celery_app()
    with _beat_schedule() as schedule:
        app.start(["beat", "--loglevel=INFO", f"--schedule={schedule}"])
    return 0


@contextlib.contextmanager
def _beat_schedule():
    """The scheduler's state file, private and locked (one scheduler per index)."""
    import shutil
    import tempfile
    from pathlib import Path

    from django.conf import settings

    from indexing.errors import ServerSetupError
    from pmd_site.runtime.postgres_server import run_dir_for
    from pmd_site.runtime.server_files import hold_lock, private_dir

    # Beat loads this file (a shelve, i.e. pickles): it must live where nobody else can write.
    scratch = None
    try:
        folder = private_dir(run_dir_for(settings.PMD_HOME))
    except (OSError, ServerSetupError) as exc:
        # $PMD_HOME is not ours, e.g. a compose volume made for the image's user while PMD_UID
        # names another: the schedule only remembers when periodic tasks last ran, so a private
        # temporary folder will do.
        folder = scratch = Path(tempfile.mkdtemp(prefix="pmd-beat-"))
        warn(f"the scheduler keeps its state in {folder}: {exc}")
    schedule = folder / f"celerybeat-{settings.PMD_INDEX}"
    # Two schedulers on one schedule file would both send every periodic task and corrupt the file.
    lock, holder = hold_lock(folder / f"celerybeat-{settings.PMD_INDEX}.lock", f"pid {os.getpid()}")
    if lock is None:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise CommandError(
            f"a scheduler is already running for index {settings.PMD_INDEX!r} ({holder}): only one may run per index"
        )
    try:
        yield schedule
    finally:
        lock.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def cmd_watch(args) -> int:
    die_with_supervisor()
    from pmd_site.runtime.process import database_lease
    from pmd_site.watcher import run_watcher

    stop = stop_on_sigterm()
    with database_lease():
        run_watcher(stop_event=stop, polling=args.polling, catch_up=args.catch_up)
    return 0


def _queues(args) -> str:
    """The worker's queues: --queues, else PMD_WORKER_QUEUES (one image, a role per host), else all."""
    from django.conf import settings

    return getattr(args, "queues", None) or settings.PMD_WORKER_QUEUES


def celery_queues(which: str) -> list[str]:
    """The celery queues of `pmd worker --queues WHICH` (pmd_site/celery.py routes the tasks to them)."""
    from pmd_site.celery import DEFAULT_QUEUE, EMBED_QUEUE

    return {"all": [DEFAULT_QUEUE, EMBED_QUEUE], "index": [DEFAULT_QUEUE], "embed": [EMBED_QUEUE]}[which]


def worker_name(queues: str) -> str:
    """The celery name of a worker taking `queues` (its health check pings that name)."""
    return "pmd-worker" if queues == "all" else f"pmd-{queues}"


def cmd_healthcheck(args) -> int:
    """Quiet on success; one line on failure (docker shows it in `docker inspect`)."""
    if args.service == "web":
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(args.url, timeout=4) as response:
                ok = response.status == 200
        except (urllib.error.URLError, OSError) as exc:
            raise CommandError(f"{args.url}: {exc}") from None
        if not ok:
            raise CommandError(f"{args.url} answered {response.status}")
        return 0
    if args.service == "worker":
        import socket

        app = _celery_app()
        name = f"{worker_name(_queues(args))}@{socket.gethostname()}"
        replies = app.control.inspect(timeout=2.0, destination=[name]).ping() or {}
        if name not in replies:
            raise CommandError(f"worker {name} did not answer a ping within 2s")
        return 0
    from pmd_site.watcher import watcher_health

    state = watcher_health()
    if not state["ok"]:
        raise CommandError(state.get("error", "watcher not running"))
    return 0


def cmd_migrate(args) -> int:
    from django.core.management import call_command

    from pmd_site.runtime.process import migrate

    migrate(verbosity=1)
    if not args.no_static:
        call_command("collectstatic", interactive=False, verbosity=0)
    stdout_console().print("database is up to date")
