"""Indexing the git history of a collection (indexing/services/history.py) on a repository the test builds."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.history_repo import BOB, build_notes_repo, commit, git

pytestmark = pytest.mark.django_db


@pytest.fixture
def notes_repo(tmp_path):
    repo = tmp_path / "notes"
    return repo, build_notes_repo(repo)


@pytest.fixture
def history_collection(notes_repo):
    from indexing.access import Access
    from indexing.services.refresh import collection_add

    repo, shas = notes_repo
    added = collection_add(path=repo, name="handbook", access=Access.local_user())
    return added.collection, repo, shas, added.refreshed


def test_every_commit_of_the_branch_is_indexed_with_its_changes(history_collection):
    from indexing.models import CollectionHistory, Commit

    collection, repo, shas, refreshed = history_collection
    assert refreshed.history.added == 9 and refreshed.history.state == "indexed"
    by_sha = {c.sha: c for c in Commit.objects.filter(collection=collection)}
    assert set(by_sha) == set(shas.values())
    change = by_sha[shas["change"]]
    assert change.author_name == BOB[0] and change.title == "Change the on-call rota: Bob takes weekends"
    assert "Alice was burning out." in change.message
    assert change.changes == [{"status": "M", "path": "oncall.md", "old_path": ""}]
    assert "+Bob covers weekends; Alice covers weekdays." in change.diff
    rename = by_sha[shas["rename"]]
    assert rename.changes == [{"status": "R", "path": "guides/deploy.md", "old_path": "deploy.md"}]
    assert set(rename.paths) == {"guides/deploy.md", "deploy.md"}
    assert by_sha[shas["delete"]].changes[0]["status"] == "D"
    merge = by_sha[shas["merge"]]
    assert len(merge.parents) == 2 and [c["path"] for c in merge.changes] == ["postmortem.md"]
    assert "Caf\ufffd machine" in by_sha[shas["latin1"]].title  # not UTF-8: replacement characters
    big = by_sha[shas["big"]]
    assert big.diff_truncated and "more line(s) of diff not shown" in big.diff
    assert len(big.diff.splitlines()) <= 201
    # blob.bin is outside the mask (**/*.md): neither listed nor in the diff, as note search would not
    assert [c["path"] for c in big.changes] == ["log.md"] and "blob.bin" not in big.diff
    status = CollectionHistory.objects.get(collection=collection)
    assert status.head == shas["big"] and status.branch == "main" and status.commits == 9


def test_refresh_reads_only_new_commits_and_drops_rewritten_ones(history_collection):
    from indexing.models import Commit, Content
    from indexing.services.history import history_index

    collection, repo, shas, _ = history_collection
    again = history_index(collection)
    assert again.unchanged and again.added == 0
    (repo / "oncall.md").write_text("# On-call rota\n\nCarol joins the rota.\n")
    new = commit(repo, "Carol joins the on-call rota", date="2025-05-01T09:00:00+00:00")
    report = history_index(collection)
    assert report.added == 1 and report.removed == 0
    dropped_content = Commit.objects.get(collection=collection, sha=new).content_id
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # a history rewrite: the commit is unreachable
    (repo / "oncall.md").write_text("# On-call rota\n\nDave joins the rota.\n")
    replaced = commit(repo, "Dave joins the on-call rota", date="2025-05-02T09:00:00+00:00")
    report = history_index(collection)
    assert report.added == 1 and report.removed == 1
    shas_now = set(Commit.objects.filter(collection=collection).values_list("sha", flat=True))
    assert new not in shas_now and replaced in shas_now
    assert not Content.objects.filter(hash=dropped_content).exists()


def test_a_shallow_clone_is_indexed_as_far_as_it_goes(notes_repo, tmp_path):
    from indexing.access import Access
    from indexing.models import Commit
    from indexing.services.refresh import collection_add

    repo, shas = notes_repo
    clone = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "2", f"file://{repo}", str(clone)], check=True, capture_output=True
    )
    added = collection_add(path=clone, name="shallow", access=Access.local_user())
    history = added.refreshed.history
    assert history.state == "indexed" and "shallow clone" in history.message
    assert set(Commit.objects.filter(collection=added.collection).values_list("sha", flat=True)) == {
        shas["big"],
        shas["latin1"],
    }


def test_a_folder_that_stops_being_a_repository_loses_its_commits(history_collection):
    import shutil

    from indexing.models import CollectionHistory, Commit
    from indexing.services.history import history_index

    collection, repo, _, _ = history_collection
    shutil.rmtree(repo / ".git")
    report = history_index(collection)
    assert report.state == "not_repository" and report.removed == 9
    assert not Commit.objects.filter(collection=collection).exists()
    assert CollectionHistory.objects.get(collection=collection).message == "the folder is not inside a git work tree"


def test_a_subfolder_collection_indexes_the_commits_touching_it(tmp_path):
    from indexing.access import Access
    from indexing.models import Commit
    from indexing.services.refresh import collection_add

    repo = tmp_path / "mono"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "docs").mkdir()
    (repo / "docs" / "a.md").write_text("# A\n")
    commit(repo, "docs: add a", date="2025-01-01T00:00:00+00:00")
    (repo / "code.py").write_text("print(1)\n")
    commit(repo, "code only", date="2025-01-02T00:00:00+00:00")
    added = collection_add(path=repo / "docs", name="docs", access=Access.local_user())
    rows = list(Commit.objects.filter(collection=added.collection).values_list("title", "paths"))
    assert rows == [("docs: add a", ["a.md"])]


def test_the_commit_cap_keeps_the_newest(notes_repo, settings):
    from indexing.access import Access
    from indexing.models import CollectionHistory, Commit
    from indexing.services.refresh import collection_add

    settings.PMD_HISTORY_MAX_COMMITS = 3
    repo, shas = notes_repo
    added = collection_add(path=repo, name="capped", access=Access.local_user())
    assert Commit.objects.filter(collection=added.collection).count() == 3
    assert CollectionHistory.objects.get(collection=added.collection).capped
    assert "PMD_HISTORY_MAX_COMMITS" in added.refreshed.history.message


def test_notes_are_embedded_before_commits(history_collection, ollama):
    """Semantic search over the notes should not wait for a long history."""
    from indexing.models import Commit, Document
    from indexing.services.embedding import fingerprint_ensure
    from indexing.services.embedding.run import _notes_first

    collection, *_ = history_collection
    order = _notes_first(fingerprint_ensure(), None)
    notes = set(Document.objects.filter(active=True).values_list("content_id", flat=True))
    commits = set(Commit.objects.values_list("content_id", flat=True)) - notes
    assert notes and commits
    assert set(order[: len(notes)]) == notes and set(order[len(notes) :]) == commits
