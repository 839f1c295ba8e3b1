"""`pmd up`: pmd on one machine, the whole stack in one command.

`pmd up` starts (or reuses) the embedded PostgreSQL and Redis, prepares the database,
then runs the web server, a celery worker, the scheduler and the folder watcher as
child processes, each in its own process group with its output prefixed by its name.
Ctrl-C or SIGTERM stops the children (SIGTERM, then SIGKILL for the whole group after
a grace period) and then the embedded servers this run started. The supervisor itself
(children, restarts, backoff for the embedded servers) is pmd_site/runtime/supervisor.py; here
are the arguments, the preparation and the order of things. The children are the single
services of pmd_site/cli/services.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from indexing.errors import CommandError
from pmd_site.cli.output import (
    FOLLOW_JOB,
    color_enabled,
    escape,
    local_access,
    stdout_console,
    warn,
)
from pmd_site.cli.services import stop_on_sigterm
from pmd_site.runtime.supervisor import hand_over  # standard library only: cheap

ADMIN_USERNAME = "admin"


def register(sub) -> None:
    up = sub.add_parser(
        "up",
        help="run pmd on this machine: web UI + API + /mcp, worker, scheduler and folder watcher",
        description="Start (or reuse) the embedded PostgreSQL and Redis, add and index each DIR as a "
        "collection, then serve until Ctrl-C. Data lives in $PMD_HOME.",
    )
    up.add_argument("dirs", nargs="*", metavar="DIR", help="folders to add as collections (reused if known)")
    up.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    up.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    up.add_argument("--no-watch", action="store_true", help="do not watch collection folders")
    up.add_argument(
        "--profile",
        choices=["default", "small"],
        default=None,
        help="default (PMD_PROFILE): web, an index worker, an embedder, the scheduler and the watcher, "
        "each a process; small: web and ONE worker process running both queues with the "
        "scheduler and the watcher as threads (about half the memory; indexing may then wait "
        "behind an embedding batch). Either way only the process that embeds loads the local "
        "models; the web server asks it for query vectors",
    )
    up.add_argument(
        "--reset-admin-password",
        action="store_true",
        help=f"give the '{ADMIN_USERNAME}' account a new generated password and print it",
    )
    up.set_defaults(func=cmd_up, needs_db=False)


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
    """The backend `pmd up`'s children should use, and the summary's line saying so and why.

    A backend a person chose (PMD_LLM_BACKEND in the environment or `pmd config set`) is kept. A
    backend pmd chose on an earlier run is kept too, unless this environment names a model server
    (OLLAMA_URL, PMD_EMBED_MODEL, …) that answers. Otherwise Ollama when it answers; when it does
    not and the local extra is installed, the in-process models, so semantic search works on a
    machine that has nothing else. (None, why) keeps the settings."""
    import importlib.util

    import httpx
    from django.conf import settings

    from indexing.services.index_config import SOURCE_WORDS, environment_names_a_model_server, setting_source

    source = setting_source("PMD_LLM_BACKEND")
    backend = settings.PMD_LLM_BACKEND
    if source in {"environment", "index"}:
        line = f"models: {backend} backend (PMD_LLM_BACKEND from {SOURCE_WORDS[source]})"
        return None, line + (f": {_models_line(backend, automatic=False)}" if backend == "local" else "")
    earlier = backend if source == "automatic" else None
    if earlier and not environment_names_a_model_server():
        return earlier, _models_line(earlier, automatic=True)
    try:
        httpx.get(settings.OLLAMA_URL.rstrip("/") + "/api/version", timeout=2.0).raise_for_status()
        return "ollama", f"models: Ollama at {settings.OLLAMA_URL} (backend chosen automatically: it answers)"
    except httpx.HTTPError:
        pass
    if earlier:
        return earlier, f"models: no Ollama at {settings.OLLAMA_URL}: " + _models_line(earlier, automatic=True)
    if all(importlib.util.find_spec(name) for name in ("onnxruntime", "tokenizers")):
        return "local", f"models: no Ollama at {settings.OLLAMA_URL}: " + _models_line("local", automatic=False)
    return None, (
        f"models: no Ollama at {settings.OLLAMA_URL} and no local extra (pip install 'pmd[local]'): keyword search only"
    )


def _models_line(backend: str, *, automatic: bool) -> str:
    """What the summary says of a backend pmd chose: for the local one, its model and whether it
    is here, can be downloaded, or cannot (offline)."""
    from django.conf import settings

    if backend != "local":
        return f"models: {backend} at {settings.OLLAMA_URL} (backend chosen automatically on an earlier run)"
    from indexing.llm import models_dir
    from indexing.llm.local import DEFAULT_EMBED_MODEL, LocalBackend, is_path
    from indexing.services.model_server import hub_problem

    model = (
        os.environ.get("PMD_EMBED_MODEL", "").strip()
        or (settings.PMD_EMBED_MODEL if settings.PMD_LLM_BACKEND == "local" else "")
        or DEFAULT_EMBED_MODEL
    )
    line = f"embedding in-process with {model}"
    if not is_path(model) and not LocalBackend(models_dir()).has_model(model):
        problem = hub_problem(timeout=3.0)
        line += (
            f" (cannot be downloaded: {problem}; `pmd config set PMD_EMBED_MODEL=/path/to/folder` uses a copy)"
            if problem
            else f" (downloaded into {settings.PMD_HOME / 'models'} on first use)"
        )
    if automatic:
        line += (
            "; the local backend was chosen automatically: OLLAMA_URL and PMD_EMBED_MODEL in the environment "
            "choose a model server"
        )
    return line


def _index_config_from_up(env: dict, chosen_backend: str | None, console) -> None:
    """`pmd up` writes the index's configuration, which every process then uses (whatever shell
    starts it): its environment's values as set by a person, pmd's own choices (the defaults on the
    first run, the backend it picked and that backend's models) as chosen automatically
    (indexing.services.index_config.index_config_from_start)."""
    from django.conf import settings

    from indexing.services.background import embedding_request
    from indexing.services.index_config import INDEX_SETTINGS, index_config_from_start, index_config_get

    given = {name: os.environ[name].strip() for name in INDEX_SETTINGS if os.environ.get(name, "").strip()}
    chosen: dict[str, str] = {}
    first_run = not index_config_get()
    if first_run:
        chosen = {name: str(getattr(settings, name, "") or "") for name in INDEX_SETTINGS}
        if settings.PMD_CHUNK_TOKENS_FROM_MODEL:
            chosen.pop("PMD_CHUNK_TOKENS")  # the local backend sizes chunks to its model
    if chosen_backend:
        chosen["PMD_LLM_BACKEND"] = chosen_backend
        chosen.update(settings.PMD_MODEL_DEFAULTS.get(chosen_backend, {}))
    done = index_config_from_start(given=given, chosen=chosen)
    if done.not_used:
        warn(
            f"{', '.join(done.not_used)} from this environment not used: {done.why_not_used}. This run keeps the "
            "index's configuration; `pmd config set NAME=VALUE --yes` changes it"
        )
        for name in done.not_used:
            env.pop(name, None)
    if not first_run:
        for name, (before, after) in done.change.changed.items():
            was = "(not set)" if before is None else (before or '""')  # "": chosen empty (no model)
            now = after or '""'
            console.print(f"configuration: {name}: {escape(was)} → {escape(now)}", highlight=False)
    if done.change.replaces_vectors and not first_run:
        job = embedding_request(no_worker="queue")
        console.print(
            "embedding again with the new configuration" + (f": queued; {FOLLOW_JOB}" if job else ""), markup=False
        )


def _int8_copy_before_start(env: dict, console) -> None:
    """With local models in int8 (the small profile's default), the embedding model is downloaded
    and its int8 copy made now, before the services start: making it holds the fp32 graph for a few
    seconds, which beside the running services was the first start's peak (README, Memory). A failure
    only warns: the worker tries again when it first embeds."""
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
            LocalBackend(models_dir(), precision="int8").pull(
                model, progress=lambda p: bar(p.completed, p.total, p.status)
            )
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
        raise CommandError(
            f"pmd up is already running for {home} (index {settings.PMD_INDEX}): {holder}. "
            "Stop it first, or use another PMD_HOME or --index"
        )
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
        children += [
            ("worker", "worker", "--concurrency", "1", "--pool", "threads", "--queues", "index"),
            ("embedder", "worker", "--concurrency", "1", "--pool", "threads", "--queues", "embed"),
            ("beat", "beat"),
        ]
    if watching:
        children.append(("watcher", "watch"))
    return children


@dataclasses.dataclass
class _Servers:
    """The embedded servers this `pmd up` uses (None: an external one) and whether it started them:
    the supervisor keeps them all running, and only those it started are stopped on the way out."""

    postgres: object | None = None
    postgres_started: bool = False
    redis: object | None = None
    redis_started: bool = False
    broker_url: str | None = None


def cmd_up(args) -> int:
    from django.conf import settings
    from django.db import connections

    from pmd_site.runtime.server_files import run_dir_for

    console = stdout_console()
    _folders_exist(args.dirs)  # before the database starts: a typo is said at once, not after 30 s
    url = _free_url(args)
    running = _one_pmd_up(url)

    stop_on_sigterm()  # until the hand-over: a Ctrl-C during the setup ends it cleanly
    servers = _Servers()
    handed_over = False
    try:
        username, password = _prepare_database(args, servers, console)
        env = _children_env(args, servers, console)
        profile = _apply_profile(args, env)
        _int8_copy_before_start(env, console)
        spec = _supervisor_spec(args, env, servers, profile)
        _print_welcome(url, username, password, console)
        handed_over = True
    finally:
        if not handed_over:  # the setup failed: stop what this run started
            _stop_what_was_started(servers)
            running.close()
    # The loop runs without Django: this process becomes pmd_site.runtime.supervisor (same pid, the lock kept).
    connections.close_all()
    return hand_over(spec, str(run_dir_for(settings.PMD_HOME) / f"up-{settings.PMD_INDEX}.json"), running.fileno())


def _folders_exist(dirs: list[str]) -> None:
    """Refuse a folder to index that is not one, before anything starts."""
    from pathlib import Path

    for raw in dirs:
        if not Path(raw).expanduser().is_dir():
            raise CommandError(f"{raw}: not a folder" if Path(raw).expanduser().exists() else f"{raw}: no such folder")


def _free_url(args) -> str:
    """The URL `pmd up` will serve at; refused when its port is not one, or is in use."""
    if not 0 < args.port < 65536:
        raise CommandError(f"--port {args.port}: use 1-65535")
    if not _port_free(args.host, args.port):
        raise CommandError(f"{args.host}:{args.port} is in use: choose another with --port")

    host = f"[{args.host}]" if ":" in args.host else args.host
    return f"http://{'127.0.0.1' if args.host in {'0.0.0.0', '::'} else host}:{args.port}/"


def _prepare_database(args, servers: _Servers, console) -> tuple[str, str | None]:
    """The database up to date, with its admin account and the folders given as collections: the
    admin's name and, when just generated, its password."""
    from django.core.management import call_command
    from django.db import connections

    from pmd_site.runtime.process import embedded_server, ensure_database, migrate_if_needed

    servers.postgres_started = ensure_database()
    servers.postgres = embedded_server()
    if servers.postgres is not None:
        console.print(
            f"database: embedded PostgreSQL in {escape(servers.postgres.data_dir)}"
            f" ({'started' if servers.postgres_started else 'already running'})"
        )
    else:
        console.print("database: DATABASE_URL")
    if migrate_if_needed():
        console.print("database: migrations applied")
    call_command("collectstatic", interactive=False, verbosity=0)
    username, password = _ensure_admin(reset=args.reset_admin_password)
    if args.dirs:
        _add_folders(args.dirs, console)
    connections.close_all()  # the children open their own; keep none idle here
    return username, password


def _children_env(args, servers: _Servers, console) -> dict[str, str]:
    """The children's environment: the broker (started here when embedded), the folders they may
    open, the models they use and the index's configuration they read."""
    from django.conf import settings
    from django.db import connections

    from pmd_site.runtime.server_files import run_dir_for

    servers.broker_url, servers.redis, servers.redis_started = _start_broker()
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PMD_HOME=str(settings.PMD_HOME),
        PMD_INDEX=settings.PMD_INDEX,
        PMD_SUPERVISOR_PID=str(os.getpid()),
    )
    env.setdefault("PMD_LOG_LEVEL", "INFO")  # the watcher and tasks report what they do
    if args.dirs:
        env["PMD_COLLECTION_ROOTS"] = collection_roots_env(args.dirs)
    env = absolute_paths_env(env)
    backend, why = choose_llm_backend()
    console.print(escape(why))
    _index_config_from_up(env, backend, console)
    connections.close_all()
    if servers.broker_url:
        env["CELERY_BROKER_URL"] = servers.broker_url
        # The process that embeds serves the local models to the others (one copy in memory).
        env["PMD_MODEL_SOCKET"] = str(run_dir_for(settings.PMD_HOME) / f"models-{settings.PMD_INDEX}.sock")
        console.print(
            f"broker: {'embedded Redis' if not settings.CELERY_BROKER_URL else 'CELERY_BROKER_URL'}"
            f" ({'started' if servers.redis_started else 'reused'})"
        )
    else:
        warn("no task queue available: embeddings will not be computed in the background")
    return env


def _apply_profile(args, env: dict[str, str]) -> str:
    """The profile this run uses (--profile, else PMD_PROFILE), with what it sets in the children's
    environment unless the user set it."""
    from django.conf import settings

    profile = args.profile or settings.PMD_PROFILE
    if profile == "small" and not os.environ.get("PMD_LOCAL_BATCH", "").strip():
        env["PMD_LOCAL_BATCH"] = str(SMALL_PROFILE_BATCH)
    if profile == "small" and not os.environ.get("PMD_LOCAL_PRECISION", "").strip():
        env["PMD_LOCAL_PRECISION"] = "int8"  # what PMD_PROFILE=small gives by default
    return profile


def _supervisor_spec(args, env: dict[str, str], servers: _Servers, profile: str) -> dict:
    """What the supervisor is handed: the children to run and the embedded servers to keep or stop."""
    from django.conf import settings

    # Every embedded server the children use is kept running, also one found running (`pmd db
    # start`): the children cannot work without it. On the way out only what this run started is stopped.
    return {
        "env": env,
        "json_logs": settings.PMD_LOG_FORMAT == "json",
        "color": color_enabled(sys.stdout),
        "home": str(settings.PMD_HOME),
        "children": [
            list(child)
            for child in up_children(args, broker=bool(servers.broker_url), watch=settings.PMD_WATCH, profile=profile)
        ],
        "keep": [name for name, kept in (("postgres", servers.postgres), ("redis", servers.redis)) if kept is not None],
        "stop": [
            name
            for name, started in (("postgres", servers.postgres_started), ("redis", servers.redis_started))
            if started
        ],
    }


def _print_welcome(url: str, username: str, password: str | None, console) -> None:
    """Where pmd is, and how to log in."""
    console.print(f"\n[bold green]pmd is up[/]: {escape(url)}  (MCP: {escape(url)}mcp)")
    if password:
        console.print(
            f"log in as [bold]{escape(username)}[/] with password [bold]{escape(password)}[/]"
            " (shown once; reset with `pmd up --reset-admin-password`)"
        )
    else:
        console.print(
            f"log in as [bold]{escape(username)}[/] (forgot the password? "
            f"`pmd user password {escape(username)}`, or `pmd up --reset-admin-password`)"
        )
    console.print("press Ctrl-C to stop\n")


def _stop_what_was_started(servers: _Servers) -> None:
    """After a failed setup: the embedded servers this run started are stopped, the others left running."""
    from django.db import connections

    if servers.redis_started:
        servers.redis.stop()
    connections.close_all()
    if servers.postgres_started and servers.postgres is not None:
        servers.postgres.stop()
