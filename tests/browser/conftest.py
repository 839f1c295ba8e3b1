"""Playwright (Python) driving Debian's Chromium against a live pmd server.

Run in their own pytest invocation (`pytest -m browser tests/browser`, as scripts/test
does): Playwright's event loop must not share a process with other async tests. Never
`playwright install`: the browser is the system's /usr/bin/chromium.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PMD_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "browser test passphrase"

# Playwright's sync API keeps an event loop running in the test thread; the ORM calls the
# tests make there (fixtures, users) are still plain synchronous code, so allow them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _skip_loudly(reason: str):
    message = f"BROWSER TESTS SKIPPED: {reason}"
    print("\n" + "!" * 78 + f"\n!!! {message}\n" + "!" * 78, file=sys.stderr)
    warnings.warn(message, stacklevel=2)
    pytest.skip(message)


@pytest.fixture(scope="session")
def chromium():
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _skip_loudly(f"no Chromium at {CHROMIUM}: install it with `apt-get install -y chromium` (scripts/test does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_loudly("the `playwright` Python package is missing: `.venv/bin/pip install -e .[dev]`")
    manager = sync_playwright().start()
    try:
        browser = manager.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    except Exception as exc:  # noqa: BLE001 - report why, then skip loudly
        manager.stop()
        _skip_loudly(f"Chromium at {CHROMIUM} did not start: {exc}")
    yield browser
    browser.close()
    manager.stop()


@pytest.fixture
def shot():
    """Save a full-page screenshot as test-artifacts/<name>.png."""
    ARTIFACTS.mkdir(exist_ok=True)

    def take(page, name: str):
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    return take


@pytest.fixture
def corpus_copy(tmp_path):
    target = tmp_path / "handbook"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "corpus", target, symlinks=True)
    return target


@pytest.fixture
def make_user(transactional_db):
    from django.contrib.auth import get_user_model

    def make(username: str, *, staff: bool = False):
        return get_user_model().objects.create_user(username, password=PASSWORD, is_staff=staff)

    return make


@pytest.fixture
def login(chromium, live_server):
    """A logged-in Playwright page for a user, through the real login form."""
    contexts = []

    def do(username: str, *, color_scheme: str = "light"):
        context = chromium.new_context(viewport={"width": 1280, "height": 860}, color_scheme=color_scheme)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.goto(f"{live_server.url}/")
        assert "/accounts/login/" in page.url
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield do
    for context in contexts:
        context.close()
