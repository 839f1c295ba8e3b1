"""Client mode: every read command prints the same bytes, on the same streams, with the same exit
status, whether a running `pmd serve` answers it (PMD_CLIENT=always) or the process runs it itself
(PMD_CLIENT=never). A real `pmd serve` runs over its own index of the fixture corpus.
"""

from __future__ import annotations

import os
import pty
import re
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pmd_site.cli.client import ClientModeError, answer_from_server, peer_uid, read_command, socket_path
from tests.support.paths import FIXTURE_CORPUS, ROOT
from tests.support.servers import free_port, pmd_serve

INDEX = "clientmode"

pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="the embedded server's PMD_HOME")


CLOSED_PORT = free_port()  # no model server: one address, as the server's settings name it too


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PMD_CLIENT", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "PMD_DEBUG", "DJANGO_SETTINGS_MODULE"}
    }  # as a user runs pmd: read commands pick the lean settings
    env.update(PMD_INDEX=INDEX, PYTHONUNBUFFERED="1", OLLAMA_URL=f"http://127.0.0.1:{CLOSED_PORT}")
    env.update(extra)
    return env


def _pmd(*args: str, cwd: Path = ROOT, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", *args], env=_env(**extra), cwd=cwd, capture_output=True, timeout=120
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The fixture corpus indexed in its own index, and `pmd serve` running for it."""
    corpus = tmp_path_factory.mktemp("clientmode") / "corpus"
    shutil.copytree(FIXTURE_CORPUS, corpus, symlinks=True)
    added = _pmd("collection", "add", str(corpus), "--name", "notes")
    assert added.returncode == 0, added.stderr.decode()
    assert _pmd("context", "add", "pmd://notes/guides", "How-to guides").returncode == 0
    log = corpus.parent / "serve.log"
    with pmd_serve(env=_env(), log=log, timeout=90) as (proc, port):
        yield {"corpus": corpus, "log": log, "proc": proc}


def _normalised(data: bytes) -> bytes:
    """Stage timings and "N s ago" differ between any two runs: everything else must be equal."""
    data = re.sub(rb'"timings_ms": \{[^}]*\}', b'"timings_ms": {}', data)
    return re.sub(rb"\b\d+ (s|min|h) ago\b", rb"N \1 ago", data)


def _both_ways(*args: str, cwd: Path = ROOT, **extra: str):
    local = _pmd(*args, cwd=cwd, PMD_CLIENT="never", **extra)
    remote = _pmd(*args, cwd=cwd, PMD_CLIENT="always", **extra)
    assert remote.returncode == local.returncode, (args, remote.stderr, local.stderr)
    assert _normalised(remote.stdout) == _normalised(local.stdout), args
    assert remote.stderr == local.stderr, args
    return local


FORMATS = ([], ["--json"], ["--csv"], ["--md"], ["--xml"], ["--files"])


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f[0] if f else "cli")
def test_search_prints_the_same_in_every_format(served, fmt):
    out = _both_ways("search", "postgresql", "-n", "3", *fmt)
    assert out.returncode == 0 and out.stdout
    _both_ways("search", "postgresql tuning", "--line-numbers", "--full", "-c", "notes", *fmt)
    _both_ways("search", "zzzznothingmatches", *fmt)  # "no results" on stderr in the cli format


@pytest.mark.parametrize("command", ["vsearch", "query"])
def test_vector_and_hybrid_search_warn_and_fail_alike(served, command):
    """No embeddings and no model server: the same warnings or errors, the same status."""
    _both_ways(command, "postgresql", "--no-expand", "--no-rerank") if command == "query" else _both_ways(
        command, "postgresql"
    )
    _both_ways(command, "postgresql", "--json")


@pytest.mark.parametrize(
    "args",
    [
        ["links", "notes/guides/postgres-tuning.md"],
        ["backlinks", "notes/guides/postgres-tuning.md"],
        ["related", "notes/guides/postgres-tuning.md"],
        ["history", "postgresql"],
        ["links", "notes/nosuch.md"],
    ],
    ids=lambda a: " ".join(a),
)
@pytest.mark.parametrize("fmt", [[], ["--json"]], ids=["cli", "json"])
def test_structure_and_history_reads_print_the_same(served, args, fmt):
    _both_ways(*args, *fmt)


def test_errors_and_usage_errors_are_the_same(served):
    out = _both_ways("search", "postgresql", "-c", "nosuchcollection")
    assert out.returncode == 1 and b"nosuchcollection" in out.stderr
    out = _both_ways("collection", "show", "nope")
    assert out.returncode == 1 and b"pmd collection list" in out.stderr
    out = _both_ways("search", "postgresql", "--bogus-option")
    assert out.returncode == 2 and b"usage:" in out.stderr
    assert _both_ways("search", "postgresql", "-n", "0").returncode == 1
    assert _both_ways("get", "#ffffff").returncode == 1


def test_documents_listings_contexts_and_collections(served):
    for args in (
        ["get", "pmd://notes/guides/postgres-tuning.md"],
        ["get", "guides/postgres-tuning.md:3", "-l", "4", "--line-numbers"],
        ["get", "pmd://notes/README.md", "--json"],
        ["multi-get", "guides/*.md"],
        ["multi-get", "guides/*.md", "--json"],
        ["multi-get", "guides/postgres-tuning.md,missing.md"],
        ["ls"],
        ["ls", "--json"],
        ["ls", "notes"],
        ["ls", "notes/guides", "--json"],
        ["context", "list"],
        ["context", "list", "--json"],
        ["collection", "list"],
        ["collection", "list", "--json"],
        ["collection", "show", "notes"],
        ["collection", "show", "notes", "--json"],
    ):
        out = _both_ways(*args)
        assert out.stdout, args


def test_a_relative_path_is_read_from_the_clients_folder(served):
    guides = served["corpus"] / "guides"
    out = _both_ways("get", "./postgres-tuning.md", cwd=guides)
    assert out.returncode == 0 and out.stdout == (guides / "postgres-tuning.md").read_bytes().rstrip(b"\n") + b"\n"
    assert _both_ways("get", "../guides/nope.md", cwd=guides).returncode == 1


def test_status_is_the_same(served):
    _both_ways("status", "--json")
    _both_ways("status")


@pytest.mark.parametrize(
    "colour",
    [{"FORCE_COLOR": "1"}, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, {"FORCE_COLOR": "1", "TERM": "xterm-256color"}],
    ids=["force", "no-color", "256"],
)
def test_colours_follow_the_clients_environment(served, colour):
    out = _both_ways("search", "postgresql", "-n", "2", **colour)
    assert (b"\x1b[" in out.stdout) == ("NO_COLOR" not in colour)
    _both_ways("collection", "list", **colour)
    _both_ways("collection", "show", "nope", **colour)


def _on_a_terminal(*args: str, columns: int, **extra: str) -> tuple[int, bytes]:
    """Run pmd with stdin, stdout and stderr on a pseudo-terminal `columns` wide; (status, what it showed)."""
    import fcntl
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pmd_site.cli", *args],
        env=_env(TERM="xterm", **extra),
        cwd=ROOT,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return proc.wait(30), shown


@pytest.mark.parametrize(
    "args",
    [["search", "postgresql", "-n", "2"], ["collection", "list"], ["ls", "notes"], ["status"], ["search", "--bogus"]],
    ids=lambda a: " ".join(a),
)
def test_a_terminal_gets_the_same_colours_and_width(served, args):
    local = _on_a_terminal(*args, columns=70, PMD_CLIENT="never")
    remote = _on_a_terminal(*args, columns=70, PMD_CLIENT="always")
    assert remote == local
    if args[0] != "status":
        assert b"\x1b[" in local[1] or args[-1] == "--bogus"


def test_the_client_does_not_import_django_psycopg_or_rich(served):
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pmd_site.cli", "search", "postgresql", "--json"],
        env=_env(PMD_CLIENT="always"),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 0 and b'"results"' in run.stdout
    imported = {
        line.rsplit(b"|", 1)[-1].strip().split(b".")[0]
        for line in run.stderr.splitlines()
        if line.startswith(b"import time:")
    }
    assert b"pmd_site" in imported  # the check can see what was imported
    assert not imported & {b"django", b"psycopg", b"rich", b"celery", b"httpx"}


def _top_level_imports(run: subprocess.CompletedProcess) -> set[str]:
    return {
        line.rsplit(b"|", 1)[-1].strip().decode()
        for line in run.stderr.splitlines()
        if line.startswith(b"import time:")
    }


@pytest.mark.parametrize("pool", ["", "true"])
def test_in_process_reads_load_neither_the_web_apps_nor_celery_nor_rich(served, pool):
    """Without a server, a search imports what it needs: no admin, no django-ninja, no celery, no HTTP
    client; and no connection pool when the environment asks the web server for one (PMD_DB_POOL)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pmd_site.cli", "search", "postgresql"],
        env=_env(PMD_CLIENT="never", PMD_DB_POOL=pool),
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stdout
    imported = _top_level_imports(run)
    assert "django.db.models" in imported and "psycopg" in imported  # the check sees the imports
    unwanted = {
        "django.contrib.admin",
        "ninja",
        "pydantic",
        "axes",
        "celery",
        "httpx",
        "rich",
        "django.db.migrations.executor",
        "psutil",  # only when the embedded server must be started or stopped
        "psycopg_pool",
        "search.pipeline.hybrid",
        "search.retrieval.vector",
        "indexing.llm",  # a keyword search
        "markdown_it",
        "yaml",
        "tomllib",  # rendering a note, reading its frontmatter
        "indexing.structure",
        "indexing.language",  # a note's links and tags, a collection's language
        "django.views.debug",
        "django.template.defaulttags",  # the error reporter (DEFAULT_EXCEPTION_REPORTER)
        "pmd_site.cli.bench",
        "pmd_site.cli.up",
        "pmd_site.cli.services",
        "pmd_site.cli.collections",
    }  # other commands' modules
    assert not imported & unwanted, sorted(imported & unwanted)


def test_the_lean_settings_report_errors_with_djangos_reporter():
    """The CLI's settings name a stand-in reporter (nothing imported at start-up); a report made with it
    is Django's own."""
    from django.utils.module_loading import import_string
    from django.views.debug import ExceptionReporter

    from pmd_site.settings import cli as settings_cli

    reporter = import_string(settings_cli.DEFAULT_EXCEPTION_REPORTER)(None, ValueError, ValueError("x"), None)
    assert type(reporter) is ExceptionReporter and "ValueError" in reporter.get_traceback_text()


def test_each_command_is_registered_by_the_module_that_says_so():
    """A run imports only its command's module (COMMANDS_BY_MODULE): the map must say what the modules add."""
    import argparse
    import importlib

    from pmd_site.cli import COMMANDS_BY_MODULE, build_parser

    for module, commands in COMMANDS_BY_MODULE.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == commands, module
    for command in ("search", "collection", "up", "history"):
        only = build_parser(command)._subparsers._group_actions[0].choices
        assert command in only and len(only) < 10
    everything = build_parser()._subparsers._group_actions[0].choices
    assert set(everything) == {c for commands in COMMANDS_BY_MODULE.values() for c in commands}


def test_help_and_unknown_commands_still_list_every_command():
    usage = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "serach", "x"],
        env=_env(PMD_CLIENT="never"),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert usage.returncode == 2
    assert b"invalid choice: 'serach'" in usage.stderr and b"'search'" in usage.stderr and b"'bench'" in usage.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "--index", "x", "--help"],
        env=_env(PMD_CLIENT="never"),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert helped.returncode == 0
    assert all(word in helped.stdout for word in (b"search", b"history", b"bench", b"collection", b"up"))


def test_the_socket_is_private(served):
    path = socket_path(INDEX)
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    assert os.lstat(path).st_uid == os.geteuid()


def test_peer_uid_names_the_connecting_user():
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert peer_uid(left) == os.geteuid() == peer_uid(right)


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another OS user needs root")
def test_another_user_gets_no_answer_even_when_the_socket_is_opened_up(served):
    """The folder keeps other users out; and should its modes be loosened, SO_PEERCRED still does."""
    import pwd

    path = socket_path(INDEX)

    def ask():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
            try:  # the server may hang up before the request is written (EPIPE) or after (EOF, RST)
                sock.sendall(b"\x00\x00\x00\x02{}")
                answered = sock.recv(1)
            except BrokenPipeError:
                answered = b""
            if not answered:
                raise ConnectionResetError("closed without an answer")

    assert _as_user(pwd.getpwnam("nobody"), ask) == "PermissionError"
    folders = [f for f in path.parents if not os.stat(f).st_mode & stat.S_IXOTH]  # the socket folder, PMD_HOME…
    modes = [stat.S_IMODE(os.stat(f).st_mode) for f in folders]
    try:
        for folder in folders:
            os.chmod(folder, 0o711)
        os.chmod(path, 0o666)
        assert _as_user(pwd.getpwnam("nobody"), ask) == "ConnectionResetError"
    finally:
        for folder, mode in zip(folders, modes):
            os.chmod(folder, mode)
        os.chmod(path, 0o600)
    assert b"refused a connection from uid" in served["log"].read_bytes()
    assert _pmd("search", "postgresql", PMD_CLIENT="always").returncode == 0  # still serving


def _as_user(user, action) -> str:
    """`action()` in a forked child running as `user`: "ok" or the name of the OSError it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        outcome = b"ok"
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            action()
        except OSError as exc:
            outcome = type(exc).__name__.encode()
        except BaseException:  # noqa: BLE001 - never run pytest's code in the child
            outcome = b"unexpected"
        os.write(write_end, outcome)
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


def test_a_stale_socket_falls_back_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("PMD_HOME", str(tmp_path))
    monkeypatch.delenv("PMD_INDEX", raising=False)
    path = socket_path()
    path.parent.mkdir(parents=True, mode=0o700)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))  # bound, never listening, then closed: the file stays
    assert path.exists()
    monkeypatch.setenv("PMD_CLIENT", "auto")
    assert answer_from_server(["search", "x"]) is None
    monkeypatch.setenv("PMD_CLIENT", "always")
    with pytest.raises(ClientModeError, match="no pmd server answers"):
        answer_from_server(["search", "x"])
    assert answer_from_server(["collection", "add", "."]) is None  # writes always run in-process
    monkeypatch.setenv("PMD_CLIENT", "sometimes")
    with pytest.raises(ClientModeError, match="PMD_CLIENT"):
        answer_from_server(["search", "x"])


def test_always_without_a_server_is_a_clear_error(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "search", "x"],
        env=_env(PMD_CLIENT="always", PMD_HOME=str(tmp_path)),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert run.stderr.startswith(b"error: PMD_CLIENT=always, but no pmd server answers")


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["search", "x"], (True, None)),
        (["--index", "b", "query", "x", "--json"], (True, "b")),
        (["--index=b", "ls"], (True, "b")),
        (["collection", "list"], (True, None)),
        (["collection", "show", "n"], (True, None)),
        (["collection", "add", "."], (False, None)),
        (["context", "list"], (True, None)),
        (["context", "add", "x"], (False, None)),
        (["update"], (False, None)),
        (["search", "x", "--help"], (False, None)),
        (["-h"], (False, None)),
        (["--index"], (False, None)),
        ([], (False, None)),
    ],
)
def test_read_commands_are_recognised_from_argv(argv, expected):
    assert read_command(argv) == expected


def test_concurrent_clients_each_get_their_own_output(served):
    """Requests run side by side in the server: each one's stdout and stderr stay its own."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [
        ("search", "postgresql", "--json"),
        ("search", "zzzznothingmatches"),
        ("ls", "notes"),
        ("collection", "show", "nope"),
        ("get", "pmd://notes/README.md"),
        ("search", "postgresql", "--md"),
    ] * 2
    expected = {case: _pmd(*case, PMD_CLIENT="never") for case in set(cases)}
    with ThreadPoolExecutor(len(cases)) as pool:
        answers = list(pool.map(lambda case: (case, _pmd(*case, PMD_CLIENT="always")), cases))
    for case, answer in answers:
        want = expected[case]
        assert (answer.returncode, _normalised(answer.stdout), answer.stderr) == (
            want.returncode,
            _normalised(want.stdout),
            want.stderr,
        ), case


def test_the_command_line_keeps_start_up_frozen_and_the_collector_on(served):
    """`pmd …` as a process (main() without argv): what start-up made stays frozen, out of every
    later collection, and the collector runs again: a long-lived command (serve, worker, watch)
    must not run with it off."""
    script = (
        "import gc, sys; sys.argv = ['pmd', 'ls']; from pmd_site.cli import main; code = main(); "
        "print(code, gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], env=_env(PMD_CLIENT="never"), cwd=ROOT, capture_output=True, timeout=120
    )
    assert run.stderr.decode().split()[-3:] == ["0", "True", "True"], run.stderr.decode()
