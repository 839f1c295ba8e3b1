"""Bring up what a pmd process needs before it touches the database.

Every entry point (CLI, manage.py, ASGI server, celery worker, tests) calls
`database_lease()` or `ensure_database()`; with DATABASE_URL set they do nothing
but check, with the embedded default they start the server under PMD_HOME.
"""

from __future__ import annotations

import contextlib
import logging
import os

import django
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections
from django.db.utils import OperationalError, ProgrammingError

from indexing.errors import IndexMissing, IndexOutdated
from indexing.locks import MIGRATIONS, advisory_lock
from pmd_site import env
from pmd_site.runtime.postgres_server import EmbeddedPostgres, data_dir_of
from pmd_site.runtime.startup import start_up_over


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmd_site.settings")

    django.setup()
    start_up_over()


def require_existing_index(*, for_agents: bool = False) -> None:
    """Refuse to start an empty embedded index where none is: for a command that only reads
    (`pmd search`, `pmd mcp`), whose environment may lack the PMD_HOME `pmd up` was given. Reads
    the environment only, so it runs before the settings create anything under PMD_HOME."""
    if os.environ.get("DATABASE_URL"):
        return
    home = env.pmd_home()
    # The data folder's path alone: making an EmbeddedPostgres would create a run folder (and the
    # home holding its pointer) when the home's path is too long for a socket.
    if not (data_dir_of(home) / "PG_VERSION").exists():
        home_from = "from PMD_HOME" if os.environ.get("PMD_HOME") else "PMD_HOME is not set: the default for this user"
        raise IndexMissing(home=str(home), home_from=home_from, for_agents=for_agents)


def embedded_server():
    """The embedded server for the configured PMD_HOME, or None when DATABASE_URL is set."""
    if not settings.EMBEDDED_DATABASE:
        return None
    return EmbeddedPostgres(settings.PMD_HOME)


def ensure_database() -> bool:
    """Start the embedded server if needed and create the index's database.

    Returns True when this call started the server.
    """
    server = embedded_server()
    if server is None:
        return False
    started = server.start()
    server.ensure_database(settings.DATABASES["default"]["NAME"])
    return started


def database_answers() -> bool:
    """Whether the index's database takes connections already: the usual case, where nothing needs
    starting or creating (and a command need not take the server's lock, look for its process and
    open a second connection to find that out)."""
    if connection.settings_dict["OPTIONS"].get("pool"):
        return False  # PMD_DB_POOL: a pool would wait its whole timeout for a server that is not up
    try:
        connection.ensure_connection()
    except OperationalError:
        return False
    return True


@contextlib.contextmanager
def database_lease():
    """Use the database for the length of a command; stop what we started.

    A server that was already running (`pmd db start`, `pmd up`) is left alone;
    one we started is stopped afterwards unless other clients still use it.
    """
    # With DATABASE_URL there is nothing to start: no probe (a server that is down would make the
    # user wait its connect timeout twice before the same error).
    started = settings.EMBEDDED_DATABASE and not database_answers() and ensure_database()
    try:
        yield
    finally:
        if started:
            connections.close_all()
            for connection in connections.all(initialized_only=True):
                if getattr(connection, "pool", None) is not None:
                    connection.close_pool()  # PMD_DB_POOL: pooled connections outlive close()
            server = embedded_server()
            if server is not None and server.wait_for_no_clients(timeout=1.0):
                server.stop()


@contextlib.contextmanager
def _one_migration_at_a_time():
    """Two processes migrating one database together (commands started at once on a fresh index,
    `pmd up` beside a CLI command) both created the same tables, and one failed: they take turns."""

    def waiting() -> None:  # a first start can migrate for a minute: say why nothing happens
        logging.getLogger(__name__).warning("waiting for another process to finish migrating this index's database")

    with advisory_lock(key=MIGRATIONS, on_wait=waiting):
        yield


def migrate(verbosity: int = 0) -> None:
    with _one_migration_at_a_time():
        call_command("migrate", interactive=False, verbosity=verbosity)


def _migrations_on_disk() -> set[tuple[str, str]]:
    """(app label, migration name) of every migration file of the installed apps."""
    found = set()
    for config in apps.get_app_configs():
        folder = os.path.join(config.path, "migrations")
        if os.path.isdir(folder):
            found.update((config.label, n[:-3]) for n in os.listdir(folder) if n[:1].isdigit() and n.endswith(".py"))
    return found


def _migrations_applied() -> set[tuple[str, str]]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT app, name FROM django_migrations")
            return set(cursor.fetchall())
    except ProgrammingError:
        return set()


def _migrations_missing() -> bool:
    return not _migrations_on_disk() <= _migrations_applied()


def require_current_index() -> None:
    """For a command that only reads: an index behind this pmd's migrations is refused in one line
    and left as it is (the older pmd that made it may still be using it); `pmd migrate` or
    `pmd up` brings it forward."""
    applied = _migrations_applied()
    if not _migrations_on_disk() <= applied:
        raise IndexOutdated(empty=not any(app == "indexing" for app, _ in applied))


def migrate_if_needed() -> bool:
    """Apply migrations when one of the installed apps' is not recorded yet (one cheap query; the
    migration machinery is imported only then). Compared by name, so the rows of apps a lean
    command leaves out (pmd_site/settings/cli.py) do not hide a missing one. Asked again once
    the lock is ours: whoever held it may have applied them."""
    if not _migrations_missing():
        return False
    with _one_migration_at_a_time():
        if not _migrations_missing():
            return False
        call_command("migrate", interactive=False, verbosity=0)
    from indexing.services.index_config import index_config_apply_once  # noqa: PLC0415 - imports models

    index_config_apply_once(connection)  # unreadable before the migration: read now
    return True
