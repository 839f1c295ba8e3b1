"""`pmd up` for real: a subprocess over its own embedded PostgreSQL (and Redis), a fresh PMD_HOME.

These start real servers, so there are few of them and each checks several things.
Waits are bounded polls (they end as soon as the condition holds), not timing assertions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support.paths import ROOT
from tests.support.servers import free_port

START_TIMEOUT = 120.0
CHANGE_TIMEOUT = 30.0


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def _env(home: Path) -> dict[str, str]:
    env = dict(
        os.environ,
        PMD_HOME=str(home),
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
        OLLAMA_URL=_closed_port_url(),
        PMD_LLM_BACKEND="ollama",
        PMD_WATCH_DEBOUNCE_MS="100",
        PMD_LOG_LEVEL="INFO",
    )
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "PMD_INDEX"):
        env.pop(name, None)
    return env


def _pmd(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", *args],
        env=_env(home),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _wait_for(condition, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(
                f"pmd up exited ({proc.returncode}) while waiting for {what}:\n{log.read_text() if log else ''}"
            )
        try:
            value = condition()
        except (OSError, ValueError):
            value = None
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"gave up waiting for {what} after {timeout:.0f}s" + (f":\n{log.read_text()}" if log else ""))


class Up:
    """A running `pmd up`, its log, and every pid it is responsible for."""

    def __init__(self, home: Path, *dirs: Path, port: int | None = None, env: dict[str, str] | None = None):
        self.home = home
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = home.parent / f"up-{self.port}.log"
        home.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.log, "w")  # noqa: SIM115 - pmd up writes to it while it runs
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pmd_site.cli", "up", *map(str, dirs), "--port", str(self.port)],
            env={**_env(home), **(env or {})},
            cwd=ROOT,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log.read_text()

    def wait_ready(self) -> None:
        _wait_for(lambda: _get(self.base + "/healthz")[0] == 200, START_TIMEOUT, "/healthz", self.proc, self.log)
        _wait_for(lambda: "watching" in self.output(), START_TIMEOUT, "the watcher", self.proc, self.log)

    def pids(self) -> dict[str, int]:
        pids = {f"child {p.pid} {p.name()}": p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        postmaster = (self.home / "postgres" / "data" / "postmaster.pid").read_text().split()[0]
        pids["postgres"] = int(postmaster)
        redis_pid = _redis_pid(self.home)
        if redis_pid:
            pids["redis"] = redis_pid
        return pids

    def stop(self, sig=signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(60)
        finally:
            self.handle.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                child.kill()
            self.proc.kill()
            self.proc.wait(10)
        self.handle.close()


def _redis_pid(home: Path) -> int | None:
    for proc in psutil.process_iter(["name", "cmdline", "cwd"]):
        try:
            if "redis-server" in (proc.info["name"] or "") and str(home) in " ".join(proc.info["cmdline"] or []) + (
                proc.info["cwd"] or ""
            ):
                return proc.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _documents(home: Path) -> dict[str, str]:
    result = _pmd(home, "ls", "notes", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    return {row["uri"].removeprefix("pmd://notes/"): row["title"] for row in rows}


@pytest.fixture
def stack():
    # Not under tmp_path: pytest resets /tmp/pytest-of-<user> to 0700 whenever a session starts,
    # which locks the (unprivileged) embedded PostgreSQL out of its data when run as root.
    base = Path(tempfile.mkdtemp(prefix="pmd-up-test-"))
    base.chmod(0o755)  # the server user must be able to enter it: pmd never opens folders it did not create
    started: list[Up] = []

    def start(*dirs: Path, env: dict[str, str] | None = None) -> Up:
        up = Up(base / "home", *dirs, env=env)
        started.append(up)
        return up

    start.home = base / "home"
    yield start
    for up in started:
        up.kill()
    _pmd(base / "home", "db", "stop", timeout=60)
    from pmd_site.runtime.redis_server import EmbeddedRedis

    EmbeddedRedis(base / "home").stop()  # a killed pmd up leaves its Redis behind
    shutil.rmtree(base, ignore_errors=True)


def test_up_serves_the_ui_follows_the_folder_and_stops_without_orphans(tmp_path, stack):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "first.md").write_text("# First note\n\nAbout tomatoes.\n")
    up = stack(notes)
    up.wait_ready()
    first_output = up.output()
    assert re.search(r"log in as admin with password \S{8,}", first_output)
    assert f"http://127.0.0.1:{up.port}/" in first_output

    status, body = _get(up.base + "/healthz")
    assert status == 200 and json.loads(body)["database"] is True
    status, body = _get(up.base + "/accounts/login/")
    assert status == 200 and b"password" in body.lower()
    assert "first.md" in _documents(up.home)

    # A new file is indexed by the watcher, and embedding of it is queued.
    (notes / "fresh.md").write_text("# Fresh arrival\n\nCucumbers and watchfiles.\n")
    _wait_for(lambda: "fresh.md" in _documents(up.home), CHANGE_TIMEOUT, "fresh.md in the index", up.proc, up.log)
    _wait_for(
        lambda: re.search(r"embedding task [0-9a-f-]{36}", up.output()),
        CHANGE_TIMEOUT,
        "the embedding task",
        up.proc,
        up.log,
    )

    # Deletion and rename go through the same incremental scan.
    (notes / "first.md").rename(notes / "renamed.md")
    _wait_for(
        lambda: set(_documents(up.home)) == {"fresh.md", "renamed.md"}, CHANGE_TIMEOUT, "the rename", up.proc, up.log
    )

    # One pmd up per home and index (each runs the scheduler): a second one is refused and names the first.
    second = _pmd(up.home, "up", "--port", str(free_port()), timeout=60)
    assert second.returncode == 1, second.stdout + second.stderr
    assert f"pmd up is already running for {up.home}" in second.stderr
    assert f"pid {up.proc.pid}, http://127.0.0.1:{up.port}/" in second.stderr
    assert "renamed.md" in _documents(up.home) and _get(up.base + "/healthz")[0] == 200  # the first is unharmed
    # After the setup the same process runs the loop without Django (about 25 MB, not 115),
    # still holding the lock that refused the second one.
    with open(f"/proc/{up.proc.pid}/cmdline", "rb") as cmdline:
        assert b"pmd_site.runtime.supervisor" in cmdline.read()

    pids = up.pids()
    assert len(pids) >= 3, pids  # web + watcher children, postgres (+ worker, beat, redis)
    assert up.stop(signal.SIGINT) == 0, up.output()
    survivors = {name: pid for name, pid in pids.items() if _alive(pid)}
    assert not survivors, f"left running: {survivors}\n{up.output()}"
    assert "stopped" in up.output()


def test_second_run_reuses_the_data_and_catches_up_on_offline_changes(tmp_path, stack):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.md").write_text("# Keep\n\nunchanged\n")
    (notes / "edit.md").write_text("# Before\n\nold text\n")
    (notes / "gone.md").write_text("# Gone soon\n")
    first = stack(notes)
    first.wait_ready()
    assert first.stop(signal.SIGTERM) == 0, first.output()
    assert set(_documents(first.home)) == {"keep.md", "edit.md", "gone.md"}

    # Changes while nothing runs: an edit, a deletion, a new file, a touch without content change.
    (notes / "edit.md").write_text("# After\n\nnew text\n")
    (notes / "gone.md").unlink()
    (notes / "added.md").write_text("# Added offline\n")
    os.utime(notes / "keep.md", (time.time() + 60, time.time() + 60))

    second = stack()  # no DIR: the collection is already known
    second.wait_ready()
    assert "with password" not in second.output()  # the admin account was kept
    _wait_for(
        lambda: _documents(second.home) == {"keep.md": "Keep", "edit.md": "After", "added.md": "Added offline"},
        CHANGE_TIMEOUT,
        "the catch-up scan",
        second.proc,
        second.log,
    )
    summary = re.search(r"catch-up scan: (\d+) changed, (\d+) removed", second.output())
    assert summary and summary.groups() == ("2", "1"), second.output()  # the touched file is not "changed"
    assert second.stop() == 0


def _api(up: Up, token: str, path: str = "/api/collections") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(up.base + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_killed_postgres_and_redis_are_restarted_and_the_api_says_503_meanwhile(tmp_path, stack):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "one.md").write_text("# One\n")
    up = stack(notes)
    up.wait_ready()
    created = _pmd(up.home, "token", "create", "--user", "admin")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    for _ in range(3):  # the web server's pool now holds connections to this server
        assert _api(up, token)[0] == 200

    postgres = up.pids()["postgres"]
    os.kill(postgres, signal.SIGKILL)
    status, headers, body = _api(up, token)
    if status != 200:  # unless the restart already happened, and no pooled connection was handed out
        assert status == 503, body
        assert headers["Retry-After"].isdigit()
        assert json.loads(body)["message"] == "the database is not reachable right now; retry in a few seconds"
    _wait_for(lambda: _api(up, token)[0] == 200, CHANGE_TIMEOUT, "the API to answer again", up.proc, up.log)
    assert up.pids()["postgres"] != postgres
    # The supervisor says so on its next look at the server, which can trail the API's first answer.
    _wait_for(
        lambda: "postgres is running again" in up.output(),
        CHANGE_TIMEOUT,
        "the restart to be reported",
        up.proc,
        up.log,
    )

    redis = _redis_pid(up.home)
    assert redis
    os.kill(redis, signal.SIGKILL)
    _wait_for(lambda: _redis_pid(up.home) not in {None, redis}, CHANGE_TIMEOUT, "a new Redis", up.proc, up.log)
    # The supervisor says so once the new server answers, which can trail its pid on a busy machine.
    _wait_for(
        lambda: "redis is running again" in up.output(), CHANGE_TIMEOUT, "the restart to be reported", up.proc, up.log
    )

    # Still whole: no child gave up meanwhile, and a stop leaves nothing behind.
    assert _get(up.base + "/healthz")[0] == 200
    pids = up.pids()
    assert up.stop() == 0, up.output()
    survivors = {name: pid for name, pid in pids.items() if _alive(pid)}
    assert not survivors, f"left running: {survivors}\n{up.output()}"


def test_children_of_pmd_up_import_nothing_from_the_folder_it_was_started_in(tmp_path, monkeypatch, capsys):
    """A `django/__init__.py` (or pmd_site, celery) planted in the working folder must not run in a child."""
    from pmd_site.runtime.supervisor import Supervisor

    planted = tmp_path / "world-writable"
    marker = tmp_path / "planted-code-ran"
    for package in ("pmd_site", "django", "celery"):
        (planted / package).mkdir(parents=True)
        (planted / package / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({package!r} + '\\n')\n")
    monkeypatch.chdir(planted)
    url = _closed_port_url() + "/healthz"
    supervisor = Supervisor(_env(tmp_path / "home"), json_logs=False, console=None, color=False)
    supervisor.add("probe", "healthcheck", "web", "--url", url)  # imports pmd_site.cli, django's settings
    supervisor.start_all()
    try:
        assert supervisor.children[0].proc.wait(60) == 1
    finally:
        supervisor.stop_all()
    assert not marker.exists(), f"planted code ran in a child of pmd up: {marker.read_text()}"
    assert url in capsys.readouterr().out  # pmd's own healthcheck ran and said why it failed


def test_relative_paths_in_the_settings_keep_their_meaning_in_the_children(tmp_path, monkeypatch):
    from pmd_site.cli.up import absolute_paths_env

    monkeypatch.chdir(tmp_path)
    env = absolute_paths_env(
        {
            "PMD_STATIC_ROOT": "static",
            "PMD_COLLECTION_ROOTS": "notes, /srv/notes",
            "PMD_EMBED_MODEL": "./models/e5",
            "PMD_RERANK_MODEL": "cross-encoder/ms-marco",
        }
    )
    assert env == {
        "PMD_STATIC_ROOT": str(tmp_path / "static"),
        "PMD_COLLECTION_ROOTS": f"{tmp_path / 'notes'},/srv/notes",
        "PMD_EMBED_MODEL": str(tmp_path / "models" / "e5"),
        "PMD_RERANK_MODEL": "cross-encoder/ms-marco",
    }


def test_servers_running_before_pmd_up_are_restarted_too_and_left_running(tmp_path, stack):
    """`pmd db start` first (as the README recommends): a kill -9 of that PostgreSQL or Redis is healed."""
    from pmd_site.runtime.redis_server import EmbeddedRedis

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "one.md").write_text("# One\n")
    started = _pmd(stack.home, "db", "start")
    assert started.returncode == 0, started.stderr
    redis = EmbeddedRedis(stack.home)
    try:
        assert redis.start() is True
        up = stack(notes)
        up.wait_ready()
        assert "already running" in up.output() and "(reused)" in up.output()

        postgres = up.pids()["postgres"]
        os.kill(postgres, signal.SIGKILL)
        _wait_for(
            lambda: "postgres is running again" in up.output(),
            CHANGE_TIMEOUT,
            "postgres to be restarted",
            up.proc,
            up.log,
        )
        _wait_for(
            lambda: json.loads(_get(up.base + "/healthz")[1]).get("database") is True,
            CHANGE_TIMEOUT,
            "the database to answer again",
            up.proc,
            up.log,
        )
        assert up.pids()["postgres"] != postgres

        old_redis = redis.status().pid
        os.kill(old_redis, signal.SIGKILL)
        _wait_for(
            lambda: "redis is running again" in up.output(), CHANGE_TIMEOUT, "redis to be restarted", up.proc, up.log
        )
        assert redis.status().running and redis.status().pid != old_redis

        # They were running before pmd up: they are running after it too.
        postgres, redis_pid = up.pids()["postgres"], redis.status().pid
        assert up.stop() == 0, up.output()
        assert _alive(postgres) and _alive(redis_pid)
    finally:
        redis.stop()


def test_a_second_scheduler_on_one_schedule_file_is_refused(run_cli, settings):
    from pmd_site.runtime.server_files import hold_lock, private_dir, run_dir_for

    folder = private_dir(run_dir_for(settings.PMD_HOME))
    lock, holder = hold_lock(folder / f"celerybeat-{settings.PMD_INDEX}.lock", "pid 4242")
    assert holder is None
    try:
        code, out, err = run_cli("beat")
    finally:
        lock.close()
    assert code == 1
    assert "a scheduler is already running" in err and "pid 4242" in err


def test_stopping_pmd_up_ends_the_embedder_at_once_while_the_model_server_holds_a_batch(tmp_path, stack, ollama_server):
    """The embedder's warm shutdown does not wait for the batch in flight: the supervisor never
    has to kill it, and the vectors already stored stay."""
    import threading

    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(6):
        (notes / f"n{i}.md").write_text(f"# Zebra {i}\n\nstriped zebra number {i} grazes\n")
    asked, answer = threading.Event(), threading.Event()

    def hold(call, texts):  # the notes' batches: the model server takes one and does not answer
        if any("zebra" in text for text in texts):
            asked.set()
            answer.wait(120)

    ollama_server.reset()
    ollama_server.on_embed = hold
    env = {
        "OLLAMA_URL": ollama_server.url,
        "PMD_EMBED_MODEL": "embeddinggemma",
        "PMD_EMBED_BATCH": "2",
        "PMD_LLM_RETRIES": "0",
        "PMD_LLM_TIMEOUT": "300",
        "PYTHONPATH": str(ROOT),  # the children run from "/": this checkout's code, not the installed one
    }
    try:
        up = stack(notes, env=env)
        up.wait_ready()
        _wait_for(asked.is_set, START_TIMEOUT, "the embedder to send a batch", up.proc, up.log)
        assert up.stop(signal.SIGINT) == 0, up.output()
        assert not answer.is_set()  # it ended while the batch was still in the model server
        assert "did not stop" not in up.output(), up.output()
    finally:
        answer.set()
        ollama_server.on_embed = None


def test_config_set_while_pmd_up_runs_is_carried_out_by_the_running_embedder(tmp_path, stack, ollama_server):
    """`pmd config set PMD_CHUNK_TOKENS=… --yes` against a running `pmd up`: its embedder embeds
    everything again with the new chunking, and status says so (no restart)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\n" + " ".join(f"word{j}" for j in range(400)) + "\n")
    ollama_server.reset()
    env = {
        "OLLAMA_URL": ollama_server.url,
        "PMD_EMBED_MODEL": "embeddinggemma",
        "PYTHONPATH": str(ROOT),  # the children run from "/": this checkout's code, not the installed one
    }
    up = stack(notes, env=env)
    up.wait_ready()

    def embeddings():
        done = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", "status", "--json"],
            env={**_env(up.home), "OLLAMA_URL": ollama_server.url},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return json.loads(done.stdout)["embeddings"] if done.returncode == 0 else None

    first = _wait_for(
        lambda: (e := embeddings()) and e["pending"] == 0 and e["chunks"] and e, START_TIMEOUT, "embedding"
    )
    new = 200  # from the default, several chunks a note
    changed = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "config", "set", f"PMD_CHUNK_TOKENS={new}", "--yes"],
        env={**_env(up.home), "OLLAMA_URL": ollama_server.url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert changed.returncode == 0, changed.stderr
    after = _wait_for(
        lambda: (e := embeddings()) and e["chunking"]["max_tokens"] == new and e["pending"] == 0 and e,
        START_TIMEOUT,
        "embedding again with the new chunking",
        up.proc,
        up.log,
    )
    assert after["chunks"] > first["chunks"], (first, after)  # smaller chunks: more of them
    assert "0 chunks embedded" not in up.output()
    assert up.stop() == 0
