"""pmd as a user installs it: the wheel built from this checkout, installed (not editable) into a
fresh virtual environment, runs `pmd up` and serves its pages from what the wheel carries.

The dependencies are not downloaded: the fresh environment reads them from the test run's own
environment through a .pth file naming its site-packages folder (a plain path line, so the
editable install of this checkout that lives there is not loaded, and pmd itself comes from the
wheel). Every command runs outside the checkout, so nothing finds pmd through the working folder.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from pmd_site.version import VERSION
from tests.support.paths import ROOT
from tests.support.servers import free_port
from tests.support.signed_in import PageClient

START_TIMEOUT = 180.0
# What a copy of the checkout leaves out before building: environments, caches, earlier builds,
# and the tests (not part of the package).
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "tests", ".pmd-*"
)


def _build_wheel(into: Path) -> Path:
    source = into / "source"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(into), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = into.glob("pmd-*.whl")
    return wheel


def _fresh_venv(path: Path, wheel: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site_packages) / "test-run-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return path


def _env(home: Path) -> dict[str, str]:
    env = dict(
        os.environ,
        PMD_HOME=str(home),
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
        OLLAMA_URL=f"http://127.0.0.1:{free_port()}",  # nothing answers: keyword search only
        PMD_LLM_BACKEND="ollama",
    )
    for name in (
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "PMD_INDEX",
        "PYTHONPATH",
        "DJANGO_SETTINGS_MODULE",
    ):
        env.pop(name, None)
    return env


def _wait_for(condition, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"pmd up exited ({proc.returncode}) while waiting for {what}:\n{log.read_text()}"
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"gave up waiting for {what}:\n{log.read_text()}")


@pytest.fixture
def workdir():
    # Not under tmp_path: pytest resets /tmp/pytest-of-<user> to 0700 at each session, which locks
    # the (unprivileged) embedded PostgreSQL out of its data when the tests run as root.
    base = Path(tempfile.mkdtemp(prefix="pmd-installed-test-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_the_installed_wheel_serves_its_sign_in_search_and_api_pages(workdir):
    wheel = _build_wheel(workdir)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    shipped_templates = sorted(n.removeprefix("pmd_site/templates/") for n in names if n.endswith(".html"))
    checkout_templates = sorted(str(p.relative_to(ROOT / "templates")) for p in (ROOT / "templates").rglob("*.html"))
    assert shipped_templates == checkout_templates and "registration/login.html" in shipped_templates
    assert "pmd_site/web/static/pmd/pmd.css" in names

    venv = _fresh_venv(workdir / "venv", wheel)
    outside = workdir / "elsewhere"  # the working folder of every command: not the checkout
    outside.mkdir()
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pmd_site; print(pmd_site.__file__)"],
        cwd=outside,
        env=_env(workdir / "home"),
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    version = subprocess.run(
        [str(venv / "bin" / "pmd"), "--version"],
        cwd=outside,
        env=_env(workdir / "home"),
        capture_output=True,
        text=True,
    )
    assert version.stdout == f"pmd {VERSION}\n", version.stdout + version.stderr  # from the wheel's metadata

    notes = workdir / "notes"
    notes.mkdir()
    (notes / "tomatoes.md").write_text("# Growing tomatoes\n\nTomatoes want sun and a stake.\n")
    home = workdir / "home"
    port = free_port()
    log = workdir / "up.log"
    with open(log, "w") as output:
        up = subprocess.Popen(
            [str(venv / "bin" / "pmd"), "up", str(notes), "--port", str(port)],
            cwd=outside,
            env=_env(home),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        browser = PageClient(f"http://127.0.0.1:{port}")
        password = _wait_for(
            lambda: re.search(r"log in as admin with password (\S{8,})", log.read_text()), "the admin password", up, log
        ).group(1)
        _wait_for(lambda: browser.get("/healthz")[0] == 200, "/healthz", up, log)

        status, page = browser.get("/accounts/login/")
        assert status == 200 and 'name="password"' in page and f"pmd {VERSION}</footer>" in page, page
        assert browser.get("/static/pmd/pmd.css")[0] == 200
        assert browser.sign_in("admin", password)
        _wait_for(lambda: "Growing tomatoes" in browser.get("/?q=tomatoes")[1], "the note in the results", up, log)
        status, page = browser.get("/?q=tomatoes")
        assert status == 200 and "tomatoes.md" in page
        status, page = browser.get("/api/docs")
        assert status == 200 and "swagger" in page.lower(), page
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait(10)
        subprocess.run(
            [str(venv / "bin" / "pmd"), "db", "stop"], cwd=outside, env=_env(home), capture_output=True, timeout=60
        )
