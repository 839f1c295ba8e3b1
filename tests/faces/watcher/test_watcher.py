"""The folder watcher's decisions: which collections a change touches, and what a re-index costs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from indexing.access import Access
from indexing.services.refresh import collections_refresh
from pmd_site.watcher import WatchTarget, collections_for_changes


def reindex(names):
    """What the watcher asks of the one refresh service for a batch of file events."""
    return collections_refresh(names=names, missing="skip", access=Access.local_user()).logged_summary()


def test_changes_map_to_the_collections_that_contain_them(tmp_path):
    notes, work = tmp_path / "notes", tmp_path / "work"
    for folder in (notes / "sub", work, tmp_path / "elsewhere"):
        folder.mkdir(parents=True)
    targets = [WatchTarget("notes", notes, "**/*.md"), WatchTarget("work", work, "**/*.md")]
    (notes / "sub" / "a.md").write_text("x")
    assert collections_for_changes({(1, str(notes / "sub" / "a.md"))}, targets) == {"notes"}
    # git's churn, files outside the mask and paths outside every collection cost nothing
    (work / "image.png").write_bytes(b"\x89PNG")
    ignored = {
        (2, str(work / ".git" / "index")),
        (2, str(work / "image.png")),
        (2, str(tmp_path / "elsewhere" / "x.md")),
        (1, str(notes / "node_modules" / "pkg.md")),
    }
    assert collections_for_changes(ignored, targets) == set()
    # a deleted (or renamed-away) folder may have held documents
    assert collections_for_changes({(3, str(work / "old-folder"))}, targets) == {"work"}


@pytest.mark.django_db
def test_touching_mtimes_without_changing_content_costs_no_reembedding(indexed_collection, ollama):
    from indexing.models import EmbeddingFingerprint
    from indexing.services.embedding import embed_pending, pending_contents

    embed_pending()
    calls = len(ollama.requests_to("/api/embed"))
    later = time.time() + 120
    for path in Path(indexed_collection.root_path).rglob("*.md"):
        os.utime(path, (later, later))  # what sync tools do

    summary = reindex([indexed_collection.name])
    assert summary["changed"] == 0 and summary["removed"] == 0
    assert summary["embedding_task"] is None
    assert summary["reports"][0]["unchanged"] > 0
    assert not pending_contents(EmbeddingFingerprint.objects.get()).exists()
    report = embed_pending()
    assert report.contents == 0
    assert len(ollama.requests_to("/api/embed")) == calls


@pytest.mark.django_db
def test_reindex_reports_what_changed_for_the_embedding_queue(indexed_collection):
    root = Path(indexed_collection.root_path)
    (root / "new-note.md").write_text("# New note\n\nSomething to embed.\n")
    (root / "guides" / "identifiers.md").unlink()
    summary = reindex([indexed_collection.name])
    assert (summary["changed"], summary["removed"]) == (1, 1)
    assert summary["collections"] == [indexed_collection.name]
    # a collection removed between the file event and the scan is skipped quietly
    assert reindex(["no-such-collection"])["changed"] == 0
