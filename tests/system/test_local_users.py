"""Another OS user on the same machine cannot reach pmd's embedded servers or secrets.

These tests probe the session's real embedded PostgreSQL and a real embedded Redis the
way an attacker with a shell account would: as the user `nobody`, through the socket
files and folders themselves.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from pmd_site.runtime.postgres_server import EmbeddedPostgres, password_file_for, run_dir_for
from pmd_site.runtime.redis_server import EmbeddedRedis

pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="embedded servers only")

AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="switching to another OS user needs root")


def _home() -> Path:
    from django.conf import settings

    return Path(settings.PMD_HOME)


@pytest.fixture(scope="module")
def running_postgres(django_db_setup, django_db_blocker):
    """The session's embedded PostgreSQL (started by tests/plugin.py)."""
    server = EmbeddedPostgres(_home())
    assert server.status().running
    return server


def _as_nobody(action) -> str:
    """Run `action()` in a forked child that has become the OS user `nobody`; returns what happened.

    Forked rather than exec'd: `nobody` cannot even start the virtualenv's interpreter, which
    lives under root's home. The result is "ok" or the name of the OSError the action raised.
    """
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls from here, then _exit
        outcome = b"ok"
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            action()
        except OSError as exc:
            outcome = type(exc).__name__.encode()
        except BaseException:  # noqa: BLE001 - report, never run pytest's code in the child
            outcome = b"unexpected"
        os.write(write_end, outcome)
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


def _connect_unix(path: Path):
    def action():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))

    return action


def _read(path: Path):
    return lambda: Path(path).read_bytes()


def _create(path: Path):
    return lambda: os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def _other_bits(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode) & 0o007


def test_run_folder_socket_folder_and_password_file_are_closed_to_others(running_postgres):
    server = running_postgres
    socket_file = server.socket_dir / ".s.PGSQL.5432"
    assert socket_file.exists()
    for path in (server.run_dir, server.socket_dir, socket_file, server.root, server.data_dir):
        assert _other_bits(path) == 0, f"{path} is open to other users: {oct(os.stat(path).st_mode)}"
    password_file = password_file_for(_home())
    assert stat.S_IMODE(os.stat(password_file).st_mode) == 0o600
    assert password_file.stat().st_uid == os.geteuid()


def test_server_demands_the_password_even_on_the_local_socket(running_postgres):
    import psycopg

    server = running_postgres
    hba = (server.data_dir / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert rules and all(rule[-1] == "scram-sha-256" for rule in rules), hba
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(
            host=str(server.socket_dir), port=5432, user="postgres", dbname="postgres", connect_timeout=5
        ).close()
    with psycopg.connect(server.conninfo(), connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@needs_root
def test_another_os_user_cannot_connect_to_postgres_or_read_its_password(running_postgres):
    assert _as_nobody(_connect_unix(running_postgres.socket_dir / ".s.PGSQL.5432")) == "PermissionError"
    assert _as_nobody(_read(password_file_for(_home()))) == "PermissionError"
    assert _as_nobody(_read(_home() / "secret_key")) in {"PermissionError", "FileNotFoundError"}


@needs_root
def test_server_started_by_root_has_no_root_group(running_postgres):
    pid = running_postgres.status().pid
    proc = psutil.Process(pid)
    assert proc.uids().real != 0 and proc.uids().effective != 0
    assert 0 not in proc.gids()
    status = Path(f"/proc/{pid}/status").read_text()
    groups = next(line.split()[1:] for line in status.splitlines() if line.startswith("Groups:"))
    assert "0" not in groups, status


@needs_root
def test_redis_socket_and_beat_schedule_folder_are_closed_to_others(running_postgres):
    server = EmbeddedRedis(_home())
    started = server.start()
    try:
        assert server.ping(2)
        assert _as_nobody(_connect_unix(server.socket_path)) == "PermissionError"
        # celery beat keeps its schedule (a pickle it loads) in the same run folder
        assert _other_bits(run_dir_for(_home())) == 0
        assert _as_nobody(_create(run_dir_for(_home()) / "celerybeat-default")) == "PermissionError"
    finally:
        if started:
            server.stop()


@pytest.fixture
def closed_parent():
    """A folder like /root: closed to everyone but its owner."""
    folder = Path(tempfile.mkdtemp(prefix="pmd-closed-"))
    folder.chmod(0o700)
    yield folder
    EmbeddedPostgres(folder / "home").destroy()
    shutil.rmtree(folder, ignore_errors=True)


@needs_root
def test_db_start_as_root_never_opens_parent_folders_and_says_which_home_to_use(closed_parent):
    env = {**os.environ, "PMD_HOME": str(closed_parent / "home")}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "db", "start"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "PMD_HOME=" in result.stderr and "cannot enter" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert stat.S_IMODE(closed_parent.stat().st_mode) == 0o700  # untouched
    assert EmbeddedPostgres(closed_parent / "home").status().running is False


def test_root_default_home_is_outside_roots_home(monkeypatch):
    from pmd_site import env

    monkeypatch.delenv("PMD_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    home = env.pmd_home()
    if AS_ROOT:
        assert home == env.ROOT_DEFAULT_HOME
    else:
        assert home == (Path.home() / ".local" / "share" / "pmd").resolve()


def test_a_users_own_pmd_home_keeps_its_permissions(tmp_path):
    """pmd only tightens folders it created; a folder the user made stays as they set it."""
    from pmd_site.runtime.server_files import private_dir

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    mine.chmod(0o755)
    private_dir(mine, create_marker=True)
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755
    created = tmp_path / "created"
    private_dir(created, create_marker=True)
    assert stat.S_IMODE(created.stat().st_mode) == 0o700


def test_a_planted_symlink_in_place_of_the_run_folder_is_refused(tmp_path):
    from indexing.errors import ServerSetupError
    from pmd_site.runtime.server_files import private_dir

    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "run").symlink_to(target)
    with pytest.raises(ServerSetupError, match="symbolic link"):
        private_dir(tmp_path / "run")


def test_socket_path_is_connectable_by_pmds_own_user(running_postgres):
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.connect(str(running_postgres.socket_dir / ".s.PGSQL.5432"))
    finally:
        sock.close()
