"""History search holds only the files the collection indexes: its mask and ignore patterns and no
hidden file, exactly as note search (indexing.paths.Selection, shared with the folder scan)."""

from __future__ import annotations

import pytest

from indexing.access import Access
from tests.support.history_repo import commit, git

pytestmark = pytest.mark.django_db

SECRETS = {".env": "envsecretword", "creds.txt": "credsecretword", "private/secret.md": "privsecretword"}


@pytest.fixture
def masked(tmp_path):
    from indexing.services.refresh import collection_add

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "private").mkdir()
    (repo / "notes").mkdir()
    for path, word in SECRETS.items():
        (repo / path).write_text(f"# Secret\n\ntoken {word}\n")
    (repo / "notes" / "ok.md").write_text("# Ok\n\nthe harmlessokword note\n")
    (repo / "private" / "draft.md").write_text("# Draft\n\nthe publisheddraftword note\n")
    commit(repo, "Add the notes", date="2025-01-10T10:00:00+00:00")
    (repo / ".env").write_text("TOKEN=envsecretword2\n")
    commit(repo, "Rotate the token", date="2025-01-11T10:00:00+00:00")  # changes only a hidden file
    (repo / "private" / "draft.md").rename(repo / "notes" / "draft.md")
    commit(repo, "Move a note out of private", date="2025-01-12T10:00:00+00:00")
    added = collection_add(
        path=repo, name="masked", mask="**/*.md", ignore_patterns=["private/**"], access=Access.local_user()
    )
    return added.collection


def _search(query: str) -> list:
    from search.pipeline.history import history_search
    from search.retrieval.history import HistoryRequest

    return history_search(HistoryRequest(query=query, access=Access.local_user(), mode="keyword", diff=True)).results


def test_history_holds_only_the_files_note_search_can_return(masked):
    from indexing.models import Commit

    for word in [*SECRETS.values(), "envsecretword2", "TOKEN"]:
        assert _search(word) == [], word
    hits = _search("harmlessokword")
    assert [f.path for h in hits for f in h.files] == ["notes/ok.md"]
    stored = Commit.objects.filter(collection=masked)
    # the commit that changed only .env is not indexed; the move out of private/ is an addition
    assert sorted(c.title for c in stored) == ["Add the notes", "Move a note out of private"]
    paths = {p for c in stored for p in c.paths}
    assert paths == {"notes/ok.md", "notes/draft.md"}
    moved = stored.get(title="Move a note out of private")
    assert moved.changes == [{"status": "A", "path": "notes/draft.md", "old_path": ""}]
    assert [f.path for h in _search("publisheddraftword") for f in h.files] == ["notes/draft.md"]
    for c in stored:
        assert "private/" not in c.diff and ".env" not in c.diff and "creds" not in c.diff


def test_a_commit_stored_under_another_mask_is_not_shown(masked):
    from indexing.models import Collection

    assert _search("harmlessokword")
    # the ignore patterns change: until the history is read again, nothing outside them is shown
    Collection.objects.filter(pk=masked.pk).update(ignore_patterns=["private/**", "notes/ok.md"])
    assert _search("harmlessokword") == []


def test_another_mask_reads_the_history_again(masked):
    from indexing.models import Collection
    from indexing.services.history import history_index

    Collection.objects.filter(pk=masked.pk).update(mask="**/*", ignore_patterns=[])
    masked.refresh_from_db()
    report = history_index(masked)
    assert not report.unchanged and report.total == 2  # .env is hidden: never indexed, whatever the mask
    assert sorted(f.path for h in _search("credsecretword") for f in h.files) == [
        "creds.txt",
        "notes/ok.md",
        "private/draft.md",
        "private/secret.md",
    ]
