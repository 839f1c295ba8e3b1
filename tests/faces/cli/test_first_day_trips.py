"""Small trips of a first day with pmd, each fixed: said early, said right."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pmd_site.runtime.postgres_server import data_dir_of
from tests.support.paths import ROOT


def test_pmd_up_with_a_folder_that_does_not_exist_says_so_before_the_database_starts(tmp_path):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "PMD_INDEX", "CELERY_BROKER_URL"}}
    env.update(PMD_HOME=str(home), PMD_CLIENT="never")
    done = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "up", str(tmp_path / "notse"), "--port", "1"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"{tmp_path / 'notse'}: no such folder" in done.stderr
    assert not (data_dir_of(home) / "PG_VERSION").exists() and "database:" not in done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: the embedded PostgreSQL then runs as its own user")
def test_following_the_advice_to_close_pmd_home_keeps_the_embedded_postgresql_able_to_enter_it(settings):
    from pmd_site.reports.safety import unsafe_settings
    from pmd_site.runtime.postgres_server import EmbeddedPostgres

    home = Path(tempfile.mkdtemp(prefix="pmd-home-", dir="/tmp"))  # a folder the user made, open to others
    try:
        home.chmod(0o755)
        settings.PMD_HOME = home
        settings.EMBEDDED_DATABASE = True
        [advice] = [w for w in unsafe_settings(settings) if w.startswith(f"PMD_HOME ({home}) is open")]
        command = advice.split(": ", 1)[1].split(" (")[0]
        assert command.startswith("chgrp ") and "chmod o-rwx" not in command
        subprocess.run(command, shell=True, check=True)
        assert not [w for w in unsafe_settings(settings) if w.startswith("PMD_HOME")]  # closed to others now
        server = EmbeddedPostgres(home)
        assert server._server_can(("-x", home))  # and the server's user still enters it
    finally:
        shutil.rmtree(home)


def test_history_of_a_folder_without_git_says_there_is_no_git_history(run_cli, indexed_collection):
    code, out, err = run_cli("history", "tuning", "-c", "notes")
    assert "no commits to search: history reads the git log of collections in a git work tree" in out + err
    assert "not embedded" not in out + err
    code, out, err = run_cli("history", "tuning", "--mode", "vector", "--json")
    assert code == 0 and json.loads(out)["results"] == []
