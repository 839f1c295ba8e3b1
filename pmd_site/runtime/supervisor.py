"""The process supervisor behind `pmd up`: child processes, and the embedded servers it keeps alive.

Each child (web, worker, beat, watcher) runs in its own process group with its output
prefixed by its name (or, with JSON logs, tagged with a "service" field), started with
`python -P` from "/" so nothing in the folder `pmd up` was started in can be imported. A child that
exits is restarted, up to MAX_RESTARTS times within RESTART_WINDOW; an embedded server
(PostgreSQL, Redis) the children use, started by this run or found running, is restarted
whenever it is found dead, with a
backoff of 1, 2, 4… up to SERVER_RESTART_MAX_DELAY seconds. Stopping sends SIGTERM,
waits STOP_GRACE_SECONDS, then kills each child's whole process group.

It imports nothing of pmd's (the CLI hands in its console) and only the standard library
at start-up, so a child can call `die_with_supervisor` first thing for free. After its setup
`pmd up` replaces itself (exec, same pid) with `python -m pmd_site.runtime.supervisor`, whose loop
(`supervise`) loads no Django: the embedded servers' classes are all it imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# Children never see the folder `pmd up` was started in: -P keeps it off sys.path (a planted
# `django/__init__.py` there would run as pmd's user, root included) and they run from "/".
CHILD_PYTHON_FLAGS = ("-P",)
CHILD_CWD = "/"

STOP_GRACE_SECONDS = 10.0
MAX_RESTARTS = 3  # per child within RESTART_WINDOW; more means it is broken, not unlucky
RESTART_WINDOW = 60.0
SERVER_RESTART_MAX_DELAY = 30.0  # an embedded server is retried for ever, at most this far apart

_COLORS = ["cyan", "magenta", "green", "yellow", "blue", "bright_red"]


@dataclass
class Child:
    name: str
    argv: list[str]
    color: str
    proc: subprocess.Popen | None = None
    starts: list[float] = field(default_factory=list)
    reader: threading.Thread | None = None


@dataclass
class KeptServer:
    """An embedded server (PostgreSQL, Redis) `pmd up`'s children use, restarted when it dies."""

    name: str
    server: object  # EmbeddedPostgres / EmbeddedRedis: status().running, start()
    attempts: list[float] = field(default_factory=list)
    down_since: float | None = None

    def delay(self, now: float) -> float:
        """No wait for the first restart; then 1, 2, 4… up to 30 s while it keeps dying within a minute."""
        recent = [t for t in self.attempts if now - t < RESTART_WINDOW]
        return 0.0 if not recent else min(SERVER_RESTART_MAX_DELAY, 2.0 ** (len(recent) - 1))


def die_with_supervisor() -> None:
    """In a child of `pmd up`: ask Linux to SIGTERM us if `pmd up` dies without cleaning up."""
    parent = os.environ.get("PMD_SUPERVISOR_PID")
    if not parent:
        return
    try:
        import ctypes  # noqa: PLC0415 - start-up: `pmd --help` imports this module

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the process group still gets cleaned up
        pass
    if str(os.getppid()) != parent:  # it died before we asked
        sys.exit(1)


class Supervisor:
    """Runs the children, prefixes their output, restarts a crashed one a few times."""

    def __init__(self, env: dict[str, str], *, json_logs: bool, console, color: bool):
        """`console` is a rich Console on stdout, used when `color` (stdout is a colour terminal)."""
        self.env = env
        self.json_logs = json_logs
        self.color = color
        self.children: list[Child] = []
        self.servers: list[KeptServer] = []
        self.console = console
        self.width = 7
        self._print_lock = threading.Lock()

    def add(self, name: str, *cli_args: str) -> None:
        argv = [sys.executable, *CHILD_PYTHON_FLAGS, "-m", "pmd_site.cli", *cli_args]
        self.children.append(Child(name, argv, _COLORS[len(self.children) % len(_COLORS)]))
        self.width = max(self.width, len(name))

    def say(self, name: str, line: str, color: str = "white") -> None:
        with self._print_lock:
            if self.json_logs:
                try:
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ValueError
                except ValueError:
                    record = {"message": line}
                record.setdefault("service", name)
                sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
                sys.stdout.flush()
                return
            prefix = f"{name:<{self.width}} |"
            if self.color:
                from rich.markup import escape  # noqa: PLC0415 - start-up: `pmd --help` imports this module

                self.console.print(f"[{color}]{prefix}[/] {escape(line)}", highlight=False)
            else:
                sys.stdout.write(f"{prefix} {line}\n")
                sys.stdout.flush()

    def _pump(self, child: Child, proc: subprocess.Popen) -> None:
        for raw in iter(proc.stdout.readline, b""):
            self.say(child.name, raw.decode("utf-8", "replace").rstrip("\n"), child.color)
        proc.stdout.close()

    def start(self, child: Child) -> None:
        child.proc = subprocess.Popen(
            child.argv,
            env=self.env,
            cwd=CHILD_CWD,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: Ctrl-C reaches only us, we stop it in order
        )
        child.starts.append(time.monotonic())
        child.reader = threading.Thread(target=self._pump, args=(child, child.proc), daemon=True)
        child.reader.start()

    def start_all(self) -> None:
        for child in self.children:
            self.start(child)

    def keep(self, name: str, server) -> None:
        """Restart `server` whenever it is found dead (kill -9, the OOM killer); the stale pid goes with start()."""
        self.servers.append(KeptServer(name, server))

    def check_servers(self) -> None:
        for kept in self.servers:
            now = time.monotonic()
            try:
                running = kept.server.status().running
            except Exception:  # noqa: BLE001 - an unreadable pid file: try a start, which sorts it out
                running = False
            if running:
                continue
            if kept.down_since is None:
                kept.down_since = now
                self.say("pmd", f"{kept.name} is not running any more; restarting it", "red")
            if kept.attempts and now < kept.attempts[-1] + kept.delay(now):
                continue
            kept.attempts.append(now)
            try:
                kept.server.start()
            except Exception as exc:  # noqa: BLE001 - report, and try again later
                first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                self.say(
                    "pmd",
                    f"{kept.name} did not start: {first_line} (trying again in {kept.delay(time.monotonic()):.0f}s)",
                    "red",
                )
                continue
            self.say("pmd", f"{kept.name} is running again (down {time.monotonic() - kept.down_since:.1f}s)", "green")
            kept.down_since = None

    def check(self) -> str | None:
        """Restart children that died; returns a reason to give up, or None."""
        self.check_servers()
        for child in self.children:
            code = child.proc.poll() if child.proc else None
            if code is None:
                continue
            _kill_group(child.proc.pid)
            recent = [t for t in child.starts if time.monotonic() - t < RESTART_WINDOW]
            if len(recent) >= MAX_RESTARTS:
                return f"{child.name} exited with status {code} {len(recent)} times within {RESTART_WINDOW:.0f}s"
            self.say("pmd", f"{child.name} exited with status {code}; restarting", "red")
            self.start(child)
        return None

    def stop_all(self, grace: float = STOP_GRACE_SECONDS) -> None:
        running = [c for c in self.children if c.proc and c.proc.poll() is None]
        for child in running:
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in running:
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say("pmd", f"{child.name} did not stop within {grace:.0f}s: killing it", "red")
        for child in self.children:
            if child.proc:
                _kill_group(child.proc.pid)  # also whatever the child itself started (worker pool)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.proc.wait(5)
                if child.reader:
                    child.reader.join(2)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# --- after the setup: pmd up's loop in a process of its own ----------------------------------------
# `pmd up` prepares the database, indexes the folders and decides the children with Django loaded
# (about 115 MB by then); it then replaces itself (exec, same pid) with this loop, which needs only
# the standard library and the embedded servers' classes (about 25 MB).


def hand_over(spec: dict, spec_file: str, lock_fd: int) -> int:
    """Replace this process with `python -m pmd_site.runtime.supervisor SPEC_FILE` (same pid, so the
    children's PMD_SUPERVISOR_PID holds), keeping the `pmd up` lock open; in-process if exec fails."""
    fd = os.open(spec_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(spec, out)
    os.set_inheritable(lock_fd, True)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable, *CHILD_PYTHON_FLAGS, "-m", "pmd_site.runtime.supervisor", spec_file])
    except OSError:
        pass
    return supervise(_read_spec(spec_file))


def _read_spec(spec_file: str) -> dict:
    with open(spec_file) as handle:
        spec = json.load(handle)
    with contextlib.suppress(OSError):
        os.unlink(spec_file)
    return spec


def supervise(spec: dict) -> int:
    """Run the children and keep the embedded servers alive until SIGINT/SIGTERM; then stop the
    children and the servers this run started. spec: env, children [[name, arg…]], json_logs,
    color, home, keep (server names), stop (server names)."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    console = None
    if spec["color"]:
        from rich.console import Console  # noqa: PLC0415 - start-up: `pmd --help` imports this module

        console = Console()
    supervisor = Supervisor(spec["env"], json_logs=spec["json_logs"], console=console, color=spec["color"])
    servers = {}
    if "postgres" in spec["keep"] or "postgres" in spec["stop"]:
        from pmd_site.runtime.postgres_server import EmbeddedPostgres  # noqa: PLC0415 - start-up: `pmd --help` imports this module

        servers["postgres"] = EmbeddedPostgres(Path(spec["home"]))
    if "redis" in spec["keep"] or "redis" in spec["stop"]:
        from pmd_site.runtime.redis_server import EmbeddedRedis  # noqa: PLC0415 - start-up: `pmd --help` imports this module

        servers["redis"] = EmbeddedRedis(Path(spec["home"]))
    for name in spec["keep"]:
        supervisor.keep(name, servers[name])
    for name, *argv in spec["children"]:
        supervisor.add(name, *argv)
    code = 0
    try:
        supervisor.start_all()
        while not stop.wait(0.5):
            reason = supervisor.check()
            if reason:
                supervisor.say("pmd", f"{reason}: shutting down", "red")
                code = 1
                break
    finally:
        _print("stopping…")
        supervisor.stop_all()
        for name in ("redis", "postgres"):  # the broker first, the database last
            if name in spec["stop"]:
                with contextlib.suppress(Exception):
                    servers[name].stop()
        _print("stopped")
    return code


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(supervise(_read_spec(sys.argv[1])))
