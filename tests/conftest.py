"""Shared fixtures. The embedded PostgreSQL for the session comes from `tests.plugin` (loaded with
`-p tests.plugin`, see pyproject.toml)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.factories import make_user, web_client
from tests.support.paths import FIXTURE_CORPUS
from tests.support.servers import child_database_url

pytest_plugins = ["tests.support.ollama_fixtures"]  # the Ollama-compatible test server (tests/support/ollama_server.py)

PASSWORD = "correct horse battery"  # of the `member` and `staff` users

# Tests that start servers (pmd's own processes, uvicorn, slapd, the OpenID provider, a second
# PostgreSQL) are marked `system`: `pytest -m "not system and not browser"` is the fast loop.
SYSTEM_FOLDER = Path(__file__).parent / "system"
SERVER_FIXTURES = {"asgi_server"}  # fixtures that start a web server
SERVER_MODULES = {"test_signin_ldap.py", "test_signin_oidc.py", "test_mcp.py"}


def pytest_collection_modifyitems(items):
    for item in items:
        path = Path(str(item.fspath))
        if (
            SYSTEM_FOLDER in path.parents
            or path.name in SERVER_MODULES
            or SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.system)


@pytest.fixture(autouse=True, scope="session")
def _cheap_password_hashing():
    """One PBKDF2 round per password in this process (see tests/support/hashers.py)."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.support.hashers.OneRoundPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _content_types_read_afresh():
    """Django keeps content type ids per process and per database alias, and forgets them only when
    it recreates the rows itself: after an earlier test's rollback or flush the admin's log wrote an
    id that no longer exists (seen once per full run on a 2-worker machine, in tests/faces/web/
    test_web_teams.py). Each test starts without them."""
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()


@pytest.fixture
def member(db):
    """A member (not staff) named `member`; password PASSWORD."""
    return make_user("member", password=PASSWORD)


@pytest.fixture
def staff(db):
    """A staff user named `boss`; password PASSWORD."""
    return make_user("boss", password=PASSWORD, staff=True)


@pytest.fixture
def member_client(member):
    """The browser UI's client, logged in as `member`."""
    return web_client(member)


@pytest.fixture
def staff_client(staff):
    """The browser UI's client, logged in as `staff`."""
    return web_client(staff)


@pytest.fixture
def corpus_dir(tmp_path) -> Path:
    """A private copy of the fixture corpus that a test may change."""
    target = tmp_path / "corpus"
    shutil.copytree(FIXTURE_CORPUS, target, symlinks=True)
    return target


@pytest.fixture
def indexed_collection(db, corpus_dir):
    """The fixture corpus, added and indexed as collection `notes`."""
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    collection = collection_create(path=corpus_dir, name="notes")
    collection_index(collection)
    return collection


@pytest.fixture
def run_cli(capsys):
    """Run `pmd ARGS…` in-process against the test database; returns (exit code, stdout, stderr)."""
    from pmd_site.cli import main

    def run(*args: str):
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def database_url(db) -> str:
    """The test database as a DATABASE_URL, for child processes that must neither start nor stop a server."""
    return child_database_url()


@pytest.fixture
def eager_tasks(settings):
    """Jobs run inline (as with PMD_TASKS_EAGER), so a test sees them finished."""
    from pmd_site.celery import app  # first: celery copies the Django settings when it is first imported

    before = app.conf.task_always_eager
    settings.CELERY_TASK_ALWAYS_EAGER = True
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before
