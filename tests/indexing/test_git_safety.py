"""A repository's own configuration never makes pmd run a program (indexing/git.py): history
indexing and `pmd update --pull` on a checkout whose .git/config names a program for every hook
git has (signatures, external diff, textconv, filters, pager, credential helper, ssh, upload-pack),
and a pull that hangs is killed with everything it started."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from tests.support.history_repo import commit, git

pytestmark = pytest.mark.django_db

# What each planted program does when run, after writing its name to the marker file: the filters
# and upload-pack do their job, so a run shows as a marker, not as a broken command.
_ROLES = {
    "gpg": "exit 0",
    "external-diff": "exit 0",
    "diff-command": "exit 0",
    "textconv": 'cat "$1"',
    "smudge": "cat",
    "clean": "cat",
    "process": "exit 1",
    "pager": "cat",
    "fsmonitor": "exit 0",
    "credential": "exit 0",
    "ssh-command": "exit 1",
    "askpass": "exit 0",
    "alternate-refs": "exit 0",
    "uploadpack": 'exec git-upload-pack "$@"',
    "proxy": "exit 1",
    "editor": "exit 0",
    "hook": "exit 0",
}


def _plant(folder: Path, marker: Path) -> dict[str, str]:
    folder.mkdir()
    programs = {}
    for role, body in _ROLES.items():
        path = folder / role
        path.write_text(f"#!/bin/sh\necho \"{role} $*\" >> '{marker}'\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        programs[role] = str(path)
    hooks = folder / "hooks"
    hooks.mkdir()
    for hook in ("post-merge", "post-checkout", "pre-merge-commit", "reference-transaction", "post-rewrite"):
        (hooks / hook).write_text(f"#!/bin/sh\necho \"hook {hook}\" >> '{marker}'\n")
        (hooks / hook).chmod(0o755)
    programs["hooks"] = str(hooks)
    return programs


def _configure(repo: Path, programs: dict[str, str]) -> None:
    """What a writer of .git/config (and of the notes, for .gitattributes) can plant."""
    settings = {
        "log.showSignature": "true",
        "gpg.program": programs["gpg"],
        "gpg.openpgp.program": programs["gpg"],
        "diff.external": programs["external-diff"],
        "diff.conv.command": programs["diff-command"],
        "diff.conv.textconv": programs["textconv"],
        "filter.smudgy.smudge": programs["smudge"],
        "filter.smudgy.clean": programs["clean"],
        "filter.smudgy.required": "true",
        "filter.proc.process": programs["process"],
        "core.pager": programs["pager"],
        "core.fsmonitor": programs["fsmonitor"],
        "core.hooksPath": programs["hooks"],
        "credential.helper": programs["credential"],
        "credential.https://example.org.helper": programs["credential"],
        "core.sshCommand": programs["ssh-command"],
        "core.askPass": programs["askpass"],
        "core.alternateRefsCommand": programs["alternate-refs"],
        "core.gitProxy": programs["proxy"],
        "core.editor": programs["editor"],
        "sequence.editor": programs["editor"],
        "pager.log": programs["pager"],
        "protocol.ext.allow": "always",
    }
    for key, value in settings.items():
        git(repo, "config", key, value)


def _signed_commit(repo: Path, message: str) -> str:
    """A commit carrying a (fake) signature: `log.showSignature` hands it to gpg.program."""
    git(repo, "add", "-A")
    tree = git(repo, "write-tree")
    parent = git(repo, "rev-parse", "HEAD")
    raw = (
        f"tree {tree}\nparent {parent}\nauthor Alice Martin <alice@example.org> 1743584400 +0000\n"
        f"committer Alice Martin <alice@example.org> 1743584400 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n"
        f"\n{message}\n"
    ).encode()
    sha = git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=raw)
    git(repo, "update-ref", "HEAD", sha)
    return sha


def _notes(repo: Path) -> list[str]:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitattributes").write_text("*.md diff=conv filter=smudgy\n*.txt filter=proc\n")
    (repo / "oncall.md").write_text("# On-call\n\nAlice covers weekdays.\n")
    shas = [commit(repo, "Add the on-call rota", date="2025-01-10T10:00:00+00:00")]
    (repo / "oncall.md").write_text("# On-call\n\nBob covers weekends.\n")
    shas.append(_signed_commit(repo, "Bob takes the weekends (signed)"))
    return shas


def _marks(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


def test_history_indexing_runs_nothing_the_repositorys_config_names(tmp_path):
    from indexing.access import Access
    from indexing.models import Commit
    from indexing.services.history import history_index
    from indexing.services.refresh import collection_add

    marker = tmp_path / "ran.log"
    repo = tmp_path / "notes"
    shas = _notes(repo)
    _configure(repo, _plant(tmp_path / "planted", marker))
    added = collection_add(path=repo, name="notes", access=Access.local_user())
    assert added.refreshed.history.state == "indexed", added.refreshed.history.message
    stored = {c.sha: c for c in Commit.objects.filter(collection=added.collection)}
    assert set(stored) == set(shas)
    assert "+Bob covers weekends." in stored[shas[1]].diff  # git's own diff, no textconv
    (repo / "oncall.md").write_text("# On-call\n\nCarol joins.\n")
    _signed_commit(repo, "Carol joins (signed)")  # the test's own git runs the planted programs
    marker.unlink(missing_ok=True)
    assert history_index(added.collection).added == 1
    assert _marks(marker) == []


def _pull_world(tmp_path):
    """A bare `remote.git` with one commit more than the checkout `notes` (a collection)."""
    from indexing.access import Access
    from indexing.services.refresh import collection_add

    upstream = tmp_path / "upstream"
    _notes(upstream)
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(remote))
    notes = tmp_path / "notes"
    git(tmp_path, "clone", "-q", str(remote), str(notes))
    (upstream / "pulled.md").write_text("# Pulled\n\nThe new runbook arrives by pull.\n")
    new = commit(upstream, "Add the runbook", date="2025-02-01T10:00:00+00:00")
    git(upstream, "push", "-q", str(remote), "main")
    added = collection_add(path=notes, name="notes", access=Access.local_user())
    return added.collection, notes, remote, new


def test_pull_runs_nothing_the_repositorys_config_names(tmp_path):
    from indexing.access import Access
    from indexing.models import Commit
    from indexing.services.refresh import collections_refresh

    collection, notes, _, new = _pull_world(tmp_path)
    marker = tmp_path / "ran.log"
    programs = _plant(tmp_path / "planted", marker)
    _configure(notes, programs)
    git(notes, "config", "remote.origin.uploadpack", programs["uploadpack"])
    git(notes, "remote", "add", "other", str(tmp_path / "remote.git"))
    git(notes, "config", "remote.other.uploadpack", programs["uploadpack"])
    [refreshed] = collections_refresh(names=[collection.name], pull=True, access=Access.local_user()).collections
    assert refreshed.pulled.ran and refreshed.pulled.ok, refreshed.pulled.output
    assert (notes / "pulled.md").read_text().startswith("# Pulled")  # no smudge filter: the file as committed
    assert Commit.objects.filter(collection=collection, sha=new).exists()
    assert _marks(marker) == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_pull_that_hangs_is_killed_with_everything_it_started(tmp_path, settings, monkeypatch):
    """The remote never answers (an ssh that sleeps): after PMD_GIT_PULL_TIMEOUT, git and its
    children are gone, and the refresh reports the timeout."""
    from indexing.access import Access
    from indexing.services.refresh import collections_refresh

    collection, notes, _, _ = _pull_world(tmp_path)
    git(notes, "remote", "set-url", "origin", "ssh://git@unreachable.invalid/notes.git")
    pids = tmp_path / "ssh.pid"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ssh").write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 600\n")
    (fake / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    settings.PMD_GIT_PULL_TIMEOUT = 3
    [refreshed] = collections_refresh(names=[collection.name], pull=True, access=Access.local_user()).collections
    assert refreshed.pulled.ran and not refreshed.pulled.ok
    assert "timed out" in refreshed.pulled.output
    started = [int(p) for p in pids.read_text().split()]
    assert started  # the remote was reached: its ssh ran, and is gone
    for _ in range(50):
        if not any(_alive(pid) for pid in started):
            break
        time.sleep(0.1)  # SIGKILL is delivered asynchronously
    assert not any(_alive(pid) for pid in started)
    assert refreshed.report is not None  # the scan ran all the same


def test_keys_with_any_name_that_run_programs_are_found(tmp_path):
    from indexing.git import repository_command_keys

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    included = tmp_path / "included.cfg"
    included.write_text('[filter "a=b"]\n\tsmudge = /tmp/evil\n[diff "X.Y"]\n\ttextconv = /tmp/evil\n')
    git(repo, "config", "include.path", str(included))
    git(repo, "config", "remote.up.uploadpack", "/tmp/evil")
    git(repo, "config", "merge.ours.driver", "/tmp/evil %A")
    git(repo, "config", "http.https://example.org.saveCookies", "true")
    keys = dict(repository_command_keys(str(repo)))
    assert keys["http.https://example.org.savecookies"] == "false"
    assert keys["filter.a=b.smudge"] == "" and keys["diff.X.Y.textconv"] == ""
    assert keys["remote.up.uploadpack"] == "git-upload-pack" and keys["merge.ours.driver"] == ""
