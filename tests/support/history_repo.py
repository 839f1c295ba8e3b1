"""A git repository of notes that the history tests build: adds, changes, a rename, a delete,
two authors, a merge, a message that is not UTF-8, and a big binary file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ALICE = ("Alice Martin", "alice@example.org")
BOB = ("Bob Stone", "bob@example.org")


def git(repo: Path, *args: str, author=ALICE, date: str | None = None, input: bytes | None = None) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_AUTHOR_NAME": author[0],
        "GIT_AUTHOR_EMAIL": author[1],
        "GIT_COMMITTER_NAME": author[0],
        "GIT_COMMITTER_EMAIL": author[1],
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),
    }
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    result = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, input=input, check=True)
    return result.stdout.decode("utf-8", "replace").strip()


def commit(repo: Path, message: str, *, author=ALICE, date: str) -> str:
    git(repo, "add", "-A", author=author, date=date)
    git(repo, "commit", "-q", "-m", message, author=author, date=date)
    return git(repo, "rev-parse", "HEAD")


def build_notes_repo(repo: Path) -> dict[str, str]:
    """The repository; returns the sha of each named step."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "commit.gpgsign", "false")
    shas = {}
    (repo / "oncall.md").write_text("# On-call rota\n\nAlice covers weekdays.\n")
    (repo / "deploy.md").write_text("# Deploy\n\nRun the deploy script.\n")
    shas["add"] = commit(repo, "Add the on-call rota and deploy notes", date="2025-01-10T10:00:00+00:00")
    (repo / "oncall.md").write_text("# On-call rota\n\nBob covers weekends; Alice covers weekdays.\n")
    shas["change"] = commit(
        repo,
        "Change the on-call rota: Bob takes weekends\n\nAlice was burning out.",
        author=BOB,
        date="2025-02-01T09:00:00+00:00",
    )
    (repo / "guides").mkdir()
    (repo / "deploy.md").rename(repo / "guides" / "deploy.md")
    shas["rename"] = commit(repo, "Move deploy notes into guides", date="2025-03-01T09:00:00+00:00")
    git(repo, "checkout", "-q", "-b", "topic")
    (repo / "postmortem.md").write_text("# Postmortem\n\nThe database failover took nine minutes.\n")
    shas["topic"] = commit(repo, "Write the failover postmortem", author=BOB, date="2025-03-05T09:00:00+00:00")
    git(repo, "checkout", "-q", "main")
    (repo / "scratch.md").write_text("# Scratch\n\ntemporary\n")
    shas["scratch"] = commit(repo, "Add a scratch note", date="2025-03-06T09:00:00+00:00")
    git(
        repo,
        "merge",
        "-q",
        "--no-ff",
        "topic",
        "-m",
        "Merge the postmortem branch",
        author=BOB,
        date="2025-03-07T09:00:00+00:00",
    )
    shas["merge"] = git(repo, "rev-parse", "HEAD")
    (repo / "scratch.md").unlink()
    shas["delete"] = commit(repo, "Delete the scratch note", author=BOB, date="2025-04-01T09:00:00+00:00")
    # A message in Latin-1 without an encoding header: `git commit` would repair it, so the commit
    # object is written as it is.
    (repo / "cafe.md").write_text("# Café\n\nThe coffee machine.\n")
    git(repo, "add", "-A")
    tree = git(repo, "write-tree")
    parent = git(repo, "rev-parse", "HEAD")
    raw = (
        f"tree {tree}\nparent {parent}\nauthor Alice Martin <alice@example.org> 1743584400 +0000\n"
        f"committer Alice Martin <alice@example.org> 1743584400 +0000\n\n"
    ).encode() + "Caf\xe9 machine notes: d\xe9tartrage\n".encode("latin-1")
    shas["latin1"] = git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=raw)
    git(repo, "update-ref", "HEAD", shas["latin1"])
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4096)
    big = "\n".join(f"line {i} of the big meeting log" for i in range(5000))
    (repo / "log.md").write_text(f"# Big log\n\n{big}\n")
    shas["big"] = commit(repo, "Add the big meeting log and a binary blob", date="2025-04-03T09:00:00+00:00")
    return shas
