"""A process that starts says nothing at INFO that tells an operator nothing (issue 33 item 8)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_starting_django_logs_no_axes_banner():
    env = {**os.environ, "PMD_LOG_LEVEL": "INFO", "DJANGO_SETTINGS_MODULE": "pmd_site.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "AXES: BEGIN" not in done.stderr
