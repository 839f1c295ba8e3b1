"""A collection removed while the watcher has changes pending for it: the watcher goes on."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from indexing.access import Access
from indexing.models import Document
from indexing.services.collections import collection_create, collection_remove
from indexing.services.refresh import collections_refresh
from pmd_site.watcher import run_watcher


def reindex(names):
    """What the watcher asks of the one refresh service for a batch of file events."""
    return collections_refresh(names=names, missing="skip", access=Access.local_user()).logged_summary()


SUMMARY_KEYS = {"collections", "changed", "removed", "embedding_task", "seconds", "reports", "skipped", "commits"}


@pytest.mark.django_db
def test_reindex_summary_has_one_shape_and_skips_only_the_vanished_collection(indexed_collection):
    gone = reindex(["no-such-collection"])
    assert set(gone) == SUMMARY_KEYS
    assert (gone["changed"], gone["collections"], gone["skipped"]) == (0, [], ["no-such-collection"])

    (Path(indexed_collection.root_path) / "new-note.md").write_text("# New note\n\nFresh words.\n")
    mixed = reindex(["no-such-collection", indexed_collection.name])
    assert set(mixed) == SUMMARY_KEYS
    assert mixed["collections"] == [indexed_collection.name] and mixed["changed"] == 1
    assert mixed["skipped"] == ["no-such-collection"]


def wait_for(condition, *, alive: threading.Thread, limit: float = 30.0) -> bool:
    """Poll until `condition()` holds, the watcher thread ends, or `limit` seconds pass."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and alive.is_alive():
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.django_db(transaction=True)  # the watcher thread reads with its own connection
def test_watcher_loop_survives_changes_to_a_collection_removed_meanwhile(tmp_path, caplog, settings):
    caplog.set_level(logging.INFO, logger="pmd.watcher")
    settings.PMD_WATCH_POLLING = True
    gone_dir, kept_dir = tmp_path / "gone", tmp_path / "kept"
    for folder in (gone_dir, kept_dir):
        folder.mkdir()
        (folder / "first.md").write_text("# First\n\nHello.\n")
    collection_create(path=gone_dir, name="gone")
    collection_create(path=kept_dir, name="kept")

    stop = threading.Event()
    crashed: list[BaseException] = []

    def watch() -> None:
        try:
            run_watcher(stop_event=stop, polling=True, debounce_ms=50, catch_up=False)
        except BaseException as exc:  # noqa: BLE001 - what the test is about
            crashed.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: "watching 2 folder(s)" in caplog.text, alive=thread)
        collection_remove(name="gone", access=Access.local_user())  # the watcher still has it in its list of folders
        written = iter(range(100))

        def gone_change_handled() -> bool:
            (gone_dir / f"change-{next(written)}.md").write_text("# Change\n\nPending.\n")
            return "skipped: collection gone no longer exists" in caplog.text

        assert wait_for(gone_change_handled, alive=thread, limit=15.0)  # seen while its folder is still watched
        (kept_dir / "later.md").write_text("# Later\n\nIndexed by the watcher.\n")
        assert wait_for(
            lambda: Document.objects.filter(collection__name="kept", path="later.md").exists(), alive=thread
        ), crashed
        assert thread.is_alive() and crashed == []
    finally:
        stop.set()
        thread.join(timeout=30)
    assert crashed == []
