"""Small trips of a first day with pmd, each fixed: said early, said right."""

from __future__ import annotations

import os
import subprocess
import sys

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
