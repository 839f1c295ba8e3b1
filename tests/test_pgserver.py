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

from pmd_site.pgserver import EmbeddedPostgres

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
    result = subprocess.run([sys.executable, "-m", "pmd_site.cli", "status", "--json"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert EmbeddedPostgres(home).status().running is False
    EmbeddedPostgres(home).destroy()
