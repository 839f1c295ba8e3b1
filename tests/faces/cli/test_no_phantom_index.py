"""Commands that only read never create an index: without one they say where they looked and fail."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pmd_site.cli import only_reads
from tests.support.paths import ROOT


def _without_an_index(home, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"PMD_HOME", "DATABASE_URL", "PMD_INDEX"}}
    env.update(XDG_DATA_HOME=str(home), PMD_CLIENT="never", PMD_LOG_LEVEL="WARNING")
    return subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command",
    [
        ("search", "callouts"),
        ("query", "x"),
        ("get", "a.md"),
        ("collection", "list"),
        ("status",),
        ("update",),
        ("ask", "x"),
    ],
)
def test_a_read_command_without_an_index_says_where_it_looked_and_creates_none(tmp_path, command):
    done = _without_an_index(tmp_path, *command)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"no pmd index in {tmp_path / 'pmd'} (PMD_HOME is not set" in done.stderr
    assert "set PMD_HOME" in done.stderr and "MCP client" not in done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_pmd_mcp_without_an_index_names_the_agents_configuration(tmp_path):
    done = _without_an_index(tmp_path, "mcp")
    assert done.returncode == 1 and done.stdout == ""
    assert '"env": {"PMD_HOME": "…"} in the MCP client\'s configuration' in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "reads"),
    [
        (["search", "x"], True),
        (["collection", "show", "notes"], True),
        (["collection", "remove", "notes"], True),
        (["context", "add", "pmd://notes/", "x"], True),
        (["--index", "work", "status"], True),
        (["config", "show"], True),
        (["user", "list"], True),
        (["token", "list", "--json"], True),
        (["config", "set", "PMD_EMBED_MODEL=all-minilm"], False),
        (["models", "list"], False),
        (["collection", "add", "/notes"], False),
        (["up", "/notes"], False),
        (["user", "create", "ana"], False),
        (["db", "start"], False),
    ],
)
def test_only_the_commands_meant_to_create_an_index_may_create_one(argv, reads):
    assert only_reads(argv) is reads
