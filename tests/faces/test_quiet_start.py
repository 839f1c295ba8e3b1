"""A process that starts says nothing at INFO that tells an operator nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_starting_django_logs_no_axes_banner():
    env = {**os.environ, "PMD_LOG_LEVEL": "INFO", "DJANGO_SETTINGS_MODULE": "pmd_site.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "AXES: BEGIN" not in done.stderr


@pytest.mark.django_db
def test_pmd_up_does_not_repeat_the_same_link_warnings_at_every_start(tmp_path, capsys):
    from pmd_site.cli.output import stdout_console
    from pmd_site.cli.up import _add_folders

    (tmp_path / "a.md").write_text("# A\n\nsee [[Nowhere]]\n")
    _add_folders([str(tmp_path)], stdout_console())
    first = capsys.readouterr()
    assert "unresolved link [[Nowhere]]" in first.err
    _add_folders([str(tmp_path)], stdout_console())  # the next `pmd up`
    again = capsys.readouterr()
    assert "unresolved link" not in again.err and "1 problem(s) reported before, unchanged" in again.err
    (tmp_path / "b.md").write_text("# B\n\n[[Elsewhere]]\n")
    _add_folders([str(tmp_path)], stdout_console())
    third = capsys.readouterr()
    assert "[[Elsewhere]]" in third.err and "[[Nowhere]]" not in third.err
