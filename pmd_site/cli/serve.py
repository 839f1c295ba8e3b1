"""`pmd up` (everything on one machine) and the single services it is made of.

`pmd up` starts (or reuses) the embedded PostgreSQL and Redis, prepares the database,
then runs the web server, a celery worker, the scheduler and the folder watcher as
child processes, each in its own process group with its output prefixed by its name.
Ctrl-C or SIGTERM stops the children (SIGTERM, then SIGKILL for the whole group after
a grace period) and then the embedded servers this run started. The supervisor itself
(children, restarts, backoff for the embedded servers) is pmd_site/runtime/supervisor.py; here
are the arguments, the preparation and the order of things.

The single services (`pmd serve`, `pmd worker`, `pmd beat`, `pmd watch`, `pmd migrate`)
are what `pmd up` runs and what the docker compose services run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from indexing.errors import CommandError
from pmd_site.cli.output import (
    color_enabled,
    escape,
    local_access,
    stdout_console,
    warn,
)
from pmd_site.runtime.supervisor import (  # standard library only: cheap
    die_with_supervisor,
    hand_over,
)

ADMIN_USERNAME = "admin"
WORKER_QUEUES = ("all", "index", "embed")  # PMD_WORKER_QUEUES takes the same names (pmd_site/settings/table.py)


def register(sub) -> None:
    up = sub.add_parser(
        "up", help="run pmd on this machine: web UI + API + /mcp, worker, scheduler and folder watcher",
        description="Start (or reuse) the embedded PostgreSQL and Redis, add and index each DIR as a "
                    "collection, then serve until Ctrl-C. Data lives in $PMD_HOME.",
    )
    up.add_argument("dirs", nargs="*", metavar="DIR", help="folders to add as collections (reused if known)")
    up.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    up.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    up.add_argument("--no-watch", action="store_true", help="do not watch collection folders")
    up.add_argument("--profile", choices=["default", "small"], default=None,
                    help="default (PMD_PROFILE): web, an index worker, an embedder, the scheduler and the watcher, "
                         "each a process; small: web and ONE worker process running both queues with the "
                         "scheduler and the watcher as threads (about half the memory; indexing may then wait "
                         "behind an embedding batch). Either way only the process that embeds loads the local "
                         "models; the web server asks it for query vectors")
    up.add_argument("--reset-admin-password", action="store_true",
                    help=f"give the '{ADMIN_USERNAME}' account a new generated password and print it")
    up.set_defaults(func=cmd_up, needs_db=False)

    serve = sub.add_parser("serve", help="run only the ASGI web server (UI, API, /mcp)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    # The settings load before cmd_serve runs: pool the web server's connections from the start.
    serve.set_defaults(func=cmd_serve, needs_db=False, environ_defaults={"PMD_DB_POOL": "true"})

    worker = sub.add_parser("worker", help="run only a celery worker (embedding and indexing tasks)")
    worker.add_argument("--concurrency", type=int, default=None, help="task processes (default: celery's)")
    worker.add_argument("--queues", choices=WORKER_QUEUES, default=None,
                        help="which work it takes: indexing (with converting), embedding, or both (default: "
                             "PMD_WORKER_QUEUES, else both; `pmd up` runs one of each so that indexing never waits "
                             "behind embedding)")
    worker.add_argument("--pool", choices=["prefork", "threads", "solo"], default=None,
                        help="how tasks run: prefork (celery's default: a process per task slot), or threads "
                             "inside this process (`pmd up`: one process per worker instead of two)")
    worker.add_argument("--with-beat", action="store_true",
                        help="also run the scheduler, as a thread of this process (`pmd up` with PMD_PROFILE=small)")
    worker.add_argument("--with-watcher", action="store_true",
                        help="also run the folder watcher, as a thread of this process (PMD_PROFILE=small)")
    worker.set_defaults(func=cmd_worker, needs_db=False)

    beat = sub.add_parser("beat", help="run only the scheduler (periodic reconciliation)")
    beat.set_defaults(func=cmd_beat, needs_db=False)

    watch = sub.add_parser("watch", help="run only the folder watcher (re-index on change)")
    watch.add_argument("--polling", action="store_true", default=None,
                       help="poll instead of file events (network filesystems); also PMD_WATCH_POLLING")
    watch.add_argument("--no-catch-up", dest="catch_up", action="store_false",
                       help="skip the initial re-index of every collection")
    watch.set_defaults(func=cmd_watch, needs_db=False)

    check = sub.add_parser("healthcheck", help="exit 0 if a service here is healthy (for container health checks)")
    check.add_argument("service", choices=["web", "worker", "watcher"])
    check.add_argument("--url", default="http://127.0.0.1:8000/healthz", help="web: the health URL")
    check.add_argument("--queues", choices=WORKER_QUEUES, default=None,
                       help="worker: the queues the worker here takes (as given to `pmd worker --queues`; "
                            "default: PMD_WORKER_QUEUES, else all)")
    check.set_defaults(func=cmd_healthcheck, needs_db=False)

    migrate = sub.add_parser("migrate", help="apply database migrations (and collect static files)")
    migrate.add_argument("--no-static", action="store_true", help="skip collectstatic")
    migrate.set_defaults(func=cmd_migrate)


# --- single services -------------------------------------------------------------------

def _stop_on_sigterm() -> threading.Event:
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
    from pmd_site.runtime.process import database_lease

    from django.conf import settings

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
            import threading

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
    from django.conf import settings

    import shutil
    import tempfile
    from pathlib import Path

    from pmd_site.runtime.postgres_server import run_dir_for
    from indexing.errors import ServerSetupError
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
        raise CommandError(f"a scheduler is already running for index {settings.PMD_INDEX!r} ({holder}): "
                           "only one may run per index")
    try:
        yield schedule
    finally:
        lock.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def cmd_watch(args) -> int:
    die_with_supervisor()
    from pmd_site.watcher import run_watcher
    from pmd_site.runtime.process import database_lease

    stop = _stop_on_sigterm()
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
    return 0


# --- pmd up ----------------------------------------------------------------------------


def _ensure_admin(*, reset: bool) -> tuple[str, str | None]:
    """The admin account's name, and its password when we just generated one (shown once)."""
    from indexing.services.accounts import admin_ensure

    admin = admin_ensure(username=ADMIN_USERNAME, reset=reset, access=local_access())
    return admin.username, admin.password


def _add_folders(dirs: list[str], console) -> list[str]:
    """Add each folder as a collection (or find the one that has it) and index it."""
    from pathlib import Path

    from indexing.models import Collection
    from indexing.services.collections import default_name_for
    from indexing.services.refresh import collection_add, collections_refresh
    from pmd_site.cli.collections import _print_report

    names = []
    for raw in dirs:
        folder = Path(raw).expanduser()
        if not folder.is_dir():
            raise CommandError(f"{raw}: not a folder")
        folder = folder.resolve()
        collection = Collection.objects.filter(root_path=str(folder)).first()
        if collection is None:
            base = default_name_for(folder)
            name, n = base, 1
            while Collection.objects.filter(name=name).exists():
                n += 1
                name = f"{base}-{n}"
            refreshed = collection_add(path=folder, name=name, access=local_access()).refreshed
            console.print(f"added collection [bold]{escape(refreshed.collection)}[/] → {escape(folder)}")
        else:
            [refreshed] = collections_refresh(names=[collection.name], access=local_access()).collections
        if refreshed.problem:
            raise CommandError(refreshed.problem)
        _print_report(refreshed.report, console=console, new_only=True)
        names.append(refreshed.collection)
    return names


def collection_roots_env(dirs: list[str]) -> str:
    """PMD_COLLECTION_ROOTS for `pmd up`'s children: the configured roots plus the folders it was given.

    Whoever ran `pmd up ~/notes` chose that folder, so staff may add collections under it
    from the web UI too; nothing else is opened up.
    """
    from pathlib import Path

    from django.conf import settings

    roots: list[str] = []
    for folder in [*settings.PMD_COLLECTION_ROOTS, *(Path(d).expanduser().resolve() for d in dirs)]:
        if str(folder) not in roots:
            roots.append(str(folder))
    return ",".join(roots)


PATH_SETTINGS = ("PMD_STATIC_ROOT",)
MODEL_SETTINGS = ("PMD_EMBED_MODEL", "PMD_RERANK_MODEL", "PMD_GENERATE_MODEL")


def absolute_paths_env(env: dict[str, str]) -> dict[str, str]:
    """The children run from "/" (pmd_site/runtime/supervisor.py): relative paths in the settings are made
    absolute here, against the folder `pmd up` was started in, so they keep meaning what they meant."""
    from pathlib import Path

    def absolute(value: str) -> str:
        return str(Path(value).expanduser().absolute())

    env = dict(env)
    for name in PATH_SETTINGS:
        if env.get(name, "").strip():
            env[name] = absolute(env[name].strip())
    for name in MODEL_SETTINGS:  # a model is a hub name or, written like a path, a folder
        value = env.get(name, "").strip()
        if value.startswith(("~", "./", "../")):
            env[name] = absolute(value)
    if env.get("PMD_COLLECTION_ROOTS", "").strip():
        roots = [r.strip() for r in env["PMD_COLLECTION_ROOTS"].split(",") if r.strip()]
        env["PMD_COLLECTION_ROOTS"] = ",".join(absolute(r) for r in roots)
    return env


def _start_broker() -> tuple[str | None, object | None, bool]:
    """The broker URL for the children, the embedded Redis (None with CELERY_BROKER_URL), and
    whether this call started it (only then does `pmd up` stop it on the way out)."""
    from django.conf import settings

    if settings.CELERY_BROKER_URL:
        return settings.CELERY_BROKER_URL, None, False
    from pmd_site.runtime.redis_server import EmbeddedRedis

    server = EmbeddedRedis(settings.PMD_HOME)
    started = server.start()
    return server.url(), server, started


def _port_free(host: str, port: int) -> bool:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def choose_llm_backend() -> tuple[str | None, str]:
    """The backend `pmd up`'s children should use when none was chosen, and why.

    PMD_LLM_BACKEND set (or `openai`): as configured. Otherwise Ollama when it answers;
    when it does not and the local extra is installed, the in-process models, so semantic
    search works on a machine that has nothing else. (None, why) keeps the settings."""
    import importlib.util

    import httpx
    from django.conf import settings

    if os.environ.get("PMD_LLM_BACKEND", "").strip() or settings.PMD_LLM_BACKEND != "ollama":
        return None, f"models: {settings.PMD_LLM_BACKEND} backend (PMD_LLM_BACKEND)"
    try:
        httpx.get(settings.OLLAMA_URL.rstrip("/") + "/api/version", timeout=2.0).raise_for_status()
        return None, f"models: Ollama at {settings.OLLAMA_URL}"
    except httpx.HTTPError:
        pass
    if all(importlib.util.find_spec(name) for name in ("onnxruntime", "tokenizers")):
        from indexing.llm.local import DEFAULT_EMBED_MODEL, is_path

        model = os.environ.get("PMD_EMBED_MODEL") or DEFAULT_EMBED_MODEL
        source = "" if is_path(model) else f" (downloaded into {settings.PMD_HOME / 'models'} on first use)"
        return "local", f"models: no Ollama at {settings.OLLAMA_URL}: embedding in-process with {model}{source}"
    return None, (f"models: no Ollama at {settings.OLLAMA_URL} and no local extra "
                  "(pip install 'pmd[local]'): keyword search only")


def _index_config_from_up(env: dict, chosen_backend: str | None) -> None:
    """`pmd up` writes the index's configuration, which every process then uses (whatever shell
    starts it): on the first run all it uses, later what its environment sets. A change of model,
    backend or chunking that would embed everything again is not made here (`pmd config set … --yes`
    makes it): this run and its processes keep the index's."""
    from django.conf import settings

    from indexing.errors import ReplacesVectors
    from indexing.services.index_config import INDEX_SETTINGS, VECTOR_SETTINGS, index_config_get, index_config_set

    stored = index_config_get()
    given = {name: os.environ[name].strip() for name in INDEX_SETTINGS if os.environ.get(name, "").strip()}
    values: dict[str, str] = {}
    if not stored:
        values = {name: str(getattr(settings, name, "") or "") for name in INDEX_SETTINGS}
        if settings.PMD_CHUNK_TOKENS_FROM_MODEL:
            values.pop("PMD_CHUNK_TOKENS")  # the local backend sizes chunks to its model
        if chosen_backend:
            values["PMD_LLM_BACKEND"] = chosen_backend
            values.update(settings.PMD_MODEL_DEFAULTS.get(chosen_backend, {}))
    elif chosen_backend and "PMD_LLM_BACKEND" not in stored:
        values["PMD_LLM_BACKEND"] = chosen_backend
    values.update(given)
    try:
        index_config_set(values=values)
    except ReplacesVectors as exc:
        kept = sorted(name for name in given if name in VECTOR_SETTINGS)
        warn(f"{', '.join(kept)} from this environment not used: {exc}. This run keeps the index's "
             "configuration; `pmd config set NAME=VALUE --yes` changes it")
        for name in kept:
            env.pop(name, None)
        index_config_set(values={k: v for k, v in values.items() if k not in VECTOR_SETTINGS})


def _int8_copy_before_start(env: dict, console) -> None:
    """With local models in int8 (the small profile's default), the embedding model is downloaded
    and its int8 copy made now, before the services start: making it holds the fp32 graph for a few
    seconds, which beside the running services was the first start's peak (README, Memory). A failure only warns: the worker tries again when it first embeds."""
    from django.conf import settings

    from indexing.errors import LLMBackendError

    precision = env.get("PMD_LOCAL_PRECISION") or settings.PMD_LOCAL_PRECISION
    if settings.PMD_LLM_BACKEND != "local" or precision != "int8":
        return
    from indexing.llm import models_dir
    from indexing.llm.local import LocalBackend
    from pmd_site.cli.output import progress_bar

    model = settings.PMD_EMBED_MODEL
    try:
        with progress_bar(f"embedding model {model}") as bar:
            LocalBackend(models_dir(), precision="int8").pull(model, progress=lambda p: bar(p.completed, p.total, p.status))
    except LLMBackendError as exc:
        warn(f"the embedding model is not ready ({exc}): the worker tries again when it first embeds")
        return
    console.print(f"models: {escape(model)} ready in int8")


def _one_pmd_up(url: str):
    """Hold the lock that lets one `pmd up` run per PMD_HOME and index (each runs a scheduler, and
    two would share its schedule file); a second one is refused, naming the first."""
    from django.conf import settings

    from indexing.errors import ServerSetupError
    from pmd_site.runtime.server_files import hold_lock, private_dir, run_dir_for

    home = settings.PMD_HOME
    try:
        private_dir(home, create_marker=True)
        folder = private_dir(run_dir_for(home))
    except (OSError, ServerSetupError) as exc:
        raise CommandError(f"pmd up keeps its run files in {run_dir_for(home)}: {exc}") from None
    lock, holder = hold_lock(folder / f"up-{settings.PMD_INDEX}.lock", f"pid {os.getpid()}, {url}")
    if lock is None:
        raise CommandError(f"pmd up is already running for {home} (index {settings.PMD_INDEX}): {holder}. "
                           "Stop it first, or use another PMD_HOME or --index")
    return lock


SMALL_PROFILE_BATCH = 2  # texts per inference of the local models under the small profile


def up_children(args, *, broker: bool, watch: bool, profile: str = "default") -> list[tuple[str, ...]]:
    """The processes `pmd up` runs: (name, pmd command…). Each worker runs its one task slot as a
    thread of its own process: a prefork pool doubled the workers' processes, each a whole Django
    and celery (about 100 MB apiece) for nothing, since one task at a time runs in each. The small
    profile goes further: one worker for both queues (two task threads), the scheduler and the
    watcher as threads of it."""
    children = [("web", "serve", "--host", args.host, "--port", str(args.port))]
    watching = watch and not args.no_watch
    if broker and profile == "small":
        worker = ["worker", "--concurrency", "2", "--pool", "threads", "--queues", "all", "--with-beat"]
        return [*children, ("worker", *worker, *(["--with-watcher"] if watching else []))]
    if broker:
        children += [("worker", "worker", "--concurrency", "1", "--pool", "threads", "--queues", "index"),
                     ("embedder", "worker", "--concurrency", "1", "--pool", "threads", "--queues", "embed"),
                     ("beat", "beat")]
    if watching:
        children.append(("watcher", "watch"))
    return children


def cmd_up(args) -> int:
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from pmd_site.runtime.process import embedded_server, ensure_database, migrate_if_needed

    console = stdout_console()
    if not 0 < args.port < 65536:
        raise CommandError(f"--port {args.port}: use 1-65535")
    if not _port_free(args.host, args.port):
        raise CommandError(f"{args.host}:{args.port} is in use: choose another with --port")

    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{'127.0.0.1' if args.host in {'0.0.0.0', '::'} else host}:{args.port}/"
    running = _one_pmd_up(url)

    _stop_on_sigterm()  # until the hand-over: a Ctrl-C during the setup ends it cleanly
    pg_started = redis_started = handed_over = False
    server = redis_server = None
    try:
        pg_started = ensure_database()
        server = embedded_server()
        if server is not None:
            console.print(f"database: embedded PostgreSQL in {escape(server.data_dir)}"
                          f" ({'started' if pg_started else 'already running'})")
        else:
            console.print("database: DATABASE_URL")
        if migrate_if_needed():
            console.print("database: migrations applied")
        call_command("collectstatic", interactive=False, verbosity=0)
        username, password = _ensure_admin(reset=args.reset_admin_password)
        if args.dirs:
            _add_folders(args.dirs, console)
        connections.close_all()  # the children open their own; keep none idle here

        broker_url, redis_server, redis_started = _start_broker()
        env = dict(os.environ, PYTHONUNBUFFERED="1", PMD_HOME=str(settings.PMD_HOME),
                   PMD_INDEX=settings.PMD_INDEX, PMD_SUPERVISOR_PID=str(os.getpid()))
        env.setdefault("PMD_LOG_LEVEL", "INFO")  # the watcher and tasks report what they do
        if args.dirs:
            env["PMD_COLLECTION_ROOTS"] = collection_roots_env(args.dirs)
        env = absolute_paths_env(env)
        backend, why = choose_llm_backend()
        console.print(escape(why))
        _index_config_from_up(env, backend)
        connections.close_all()
        if broker_url:
            env["CELERY_BROKER_URL"] = broker_url
            # The process that embeds serves the local models to the others (one copy in memory).
            from pmd_site.runtime.server_files import run_dir_for

            env["PMD_MODEL_SOCKET"] = str(run_dir_for(settings.PMD_HOME) / f"models-{settings.PMD_INDEX}.sock")
            console.print(f"broker: {'embedded Redis' if not settings.CELERY_BROKER_URL else 'CELERY_BROKER_URL'}"
                          f" ({'started' if redis_started else 'reused'})")
        else:
            warn("no task queue available: embeddings will not be computed in the background")

        profile = args.profile or settings.PMD_PROFILE
        if profile == "small" and not os.environ.get("PMD_LOCAL_BATCH", "").strip():
            env["PMD_LOCAL_BATCH"] = str(SMALL_PROFILE_BATCH)
        if profile == "small" and not os.environ.get("PMD_LOCAL_PRECISION", "").strip():
            env["PMD_LOCAL_PRECISION"] = "int8"  # what PMD_PROFILE=small gives by default
        _int8_copy_before_start(env, console)
        # Every embedded server the children use is kept running, also one found running (`pmd db
        # start`): the children cannot work without it. On the way out only what this run started is stopped.
        spec = {
            "env": env, "json_logs": settings.PMD_LOG_FORMAT == "json", "color": color_enabled(sys.stdout),
            "home": str(settings.PMD_HOME),
            "children": [list(child) for child in up_children(args, broker=bool(broker_url), watch=settings.PMD_WATCH,
                                                               profile=profile)],
            "keep": [name for name, kept in (("postgres", server), ("redis", redis_server)) if kept is not None],
            "stop": [name for name, started in (("postgres", pg_started), ("redis", redis_started)) if started],
        }

        console.print(f"\n[bold green]pmd is up[/]: {escape(url)}  (MCP: {escape(url)}mcp)")
        if password:
            console.print(f"log in as [bold]{escape(username)}[/] with password [bold]{escape(password)}[/]"
                          " (shown once; reset with `pmd up --reset-admin-password`)")
        else:
            console.print(f"log in as [bold]{escape(username)}[/] (forgot the password? `pmd user password {escape(username)}`,"
                          " or `pmd up --reset-admin-password`)")
        console.print("press Ctrl-C to stop\n")
        handed_over = True
    finally:
        if not handed_over:  # the setup failed: stop what this run started
            if redis_started:
                redis_server.stop()
            connections.close_all()
            if pg_started and server is not None:
                server.stop()
            running.close()
    # The loop runs without Django: this process becomes pmd_site.runtime.supervisor (same pid, the lock kept).
    from pmd_site.runtime.server_files import run_dir_for

    connections.close_all()
    return hand_over(spec, str(run_dir_for(settings.PMD_HOME) / f"up-{settings.PMD_INDEX}.json"), running.fileno())
