"""The watcher never follows a symbolic link out of a collection: nothing outside is watched, and
writes out there never re-index the collection."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from indexing.models import Document
from indexing.services.collections import collection_create
from pmd_site.watcher import WatchTarget, collections_for_changes, run_watcher
from pmd_site.watcher.loop import watch_folders


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path.resolve()
    notes, outside = base / "notes", base / "outside"
    (notes / "sub").mkdir(parents=True)
    (outside / "deep" / "deeper").mkdir(parents=True)
    (notes / "first.md").write_text("# First\n\nHello.\n")
    (outside / "deep" / "secret.md").write_text("# Secret\n\nNot in the collection.\n")
    (notes / "link").symlink_to(outside, target_is_directory=True)
    (notes / "sub" / "to-root").symlink_to("/", target_is_directory=True)
    return notes, outside


def test_the_folders_watched_are_the_collections_own(tmp_path):
    notes, outside = _folders(tmp_path)
    (notes / ".git" / "refs" / "heads").mkdir(parents=True)
    (notes / ".git" / "objects" / "ab").mkdir(parents=True)
    (notes / "node_modules" / "pkg").mkdir(parents=True)
    folders = watch_folders([WatchTarget("notes", notes, "**/*.md")])
    assert folders == sorted(
        str(p)
        for p in (notes, notes / "sub", notes / ".git", notes / ".git" / "refs", notes / ".git" / "refs" / "heads")
    )


def test_events_through_a_link_touch_no_collection(tmp_path):
    notes, outside = _folders(tmp_path)
    targets = [WatchTarget("notes", notes, "**/*.md")]
    through_link = {
        (2, str(notes / "link" / "deep" / "secret.md")),
        (1, str(notes / "link" / "deep" / "deeper")),
        (2, str(notes / "link")),
        (2, str(notes / "sub" / "to-root" / "etc")),
    }
    assert collections_for_changes(through_link, targets) == set()
    assert collections_for_changes({(2, str(notes / "first.md"))}, targets) == {"notes"}


def _inotify_inodes() -> set[int]:
    """The inodes this process's inotify instances watch (from /proc/self/fdinfo)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            text = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("inotify wd:"):
                fields = dict(part.split(":", 1) for part in line.split()[1:] if ":" in part)
                inodes.add(int(fields["ino"], 16))
    return inodes


def _wait(condition, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="needs Linux /proc")
@pytest.mark.django_db(transaction=True)  # the watcher thread reads with its own connection
def test_the_watcher_does_not_follow_a_link_out_of_the_collection(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pmd.watcher")
    notes, outside = _folders(tmp_path)
    collection_create(path=notes, name="notes")
    before = _inotify_inodes()
    stop = threading.Event()
    crashed: list[BaseException] = []

    def watch() -> None:
        try:
            run_watcher(stop_event=stop, polling=False, debounce_ms=50, catch_up=False)
        except BaseException as exc:  # noqa: BLE001 - what the test is about
            crashed.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert _wait(lambda: os.stat(notes).st_ino in _inotify_inodes() - before, 30), crashed
        watched = _inotify_inodes() - before
        assert os.stat(notes / "sub").st_ino in watched
        for far in (outside, outside / "deep", outside / "deep" / "deeper", Path("/"), Path("/etc")):
            assert os.stat(far).st_ino not in watched, far
        assert len(watched) == 2  # notes and notes/sub: nothing through the two links

        for i in range(5):  # writes outside, seen only through the link
            (outside / "deep" / f"out-{i}.md").write_text("# Out\n\nElsewhere.\n")
            (outside / f"top-{i}.md").write_text("# Top\n\nElsewhere.\n")
            time.sleep(0.2)
        time.sleep(3)  # longer than the watcher's debounce (2 s)
        assert "re-indexed" not in caplog.text

        # The watcher still works inside, in a folder made after it started too.
        (notes / "sub" / "inside.md").write_text("# Inside\n\nIndexed.\n")
        assert _wait(lambda: Document.objects.filter(collection__name="notes", path="sub/inside.md").exists(), 30)
        (notes / "new").mkdir()
        time.sleep(0.05)
        (notes / "new" / "a.md").write_text("# A\n\nIn a new folder.\n")
        assert _wait(lambda: Document.objects.filter(collection__name="notes", path="new/a.md").exists(), 30)
        assert _wait(lambda: os.stat(notes / "new").st_ino in _inotify_inodes() - before, 30)
        (notes / "new" / "b.md").write_text("# B\n\nWritten after the new folder is watched.\n")
        assert _wait(lambda: Document.objects.filter(collection__name="notes", path="new/b.md").exists(), 30)
        assert not Document.objects.filter(path__contains="out-").exists()
        assert thread.is_alive() and crashed == []
    finally:
        stop.set()
        thread.join(timeout=30)
    assert crashed == []
