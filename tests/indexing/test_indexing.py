"""The indexing service: scanning, incremental updates and bad input."""

from __future__ import annotations

import os
import time

import pytest

from indexing.errors import CollectionExists, CollectionPathMissing, FolderTaken, InvalidCollection
from indexing.models import Content, Document, FileProblem
from indexing.services.collections import collection_create
from indexing.services.scanning import collection_index

pytestmark = pytest.mark.django_db


def _paths(collection):
    return set(Document.objects.filter(collection=collection, active=True).values_list("path", flat=True))


def test_first_scan_indexes_markdown_and_skips_hidden_vendor_and_other_files(indexed_collection):
    assert _paths(indexed_collection) == {
        "README.md",
        "guides/postgres-tuning.md",
        "guides/identifiers.md",
        "meetings/2025-01-standup.md",
        "meetings/no-heading.md",
        "meetings/latin1.md",
    }


def test_titles_come_from_frontmatter_then_heading_then_file_name(indexed_collection):
    titles = dict(Document.objects.filter(collection=indexed_collection).values_list("path", "title"))
    assert titles["guides/postgres-tuning.md"] == "Tuning PostgreSQL for search"
    assert titles["README.md"] == "Project Handbook"
    assert titles["meetings/no-heading.md"] == "no-heading"


def test_frontmatter_is_kept_as_json(indexed_collection):
    doc = Document.objects.get(collection=indexed_collection, path="guides/postgres-tuning.md")
    assert doc.frontmatter["tags"] == ["database", "performance"]
    assert doc.frontmatter["date"] == "2025-03-14"


def test_docid_is_the_first_six_hex_digits_of_the_content_hash(indexed_collection):
    for doc in Document.objects.filter(collection=indexed_collection):
        assert doc.docid == doc.content_id[:6]
        assert len(doc.content_id) == 64


def test_invalid_utf8_is_indexed_with_replacement_and_a_warning(indexed_collection):
    doc = Document.objects.get(collection=indexed_collection, path="meetings/latin1.md")
    assert "\ufffd" in doc.content.body
    problem = FileProblem.objects.get(collection=indexed_collection, path="meetings/latin1.md")
    assert "invalid UTF-8" in problem.message


def test_binary_file_is_skipped_with_a_warning(indexed_collection):
    assert not Document.objects.filter(path="guides/diagram.md").exists()
    assert "binary" in FileProblem.objects.get(path="guides/diagram.md").message


def test_a_nul_byte_past_the_start_is_a_problem_of_that_note_not_of_the_collection(db, tmp_path):
    from indexing.services.collections import collection_create

    (tmp_path / "good.md").write_text("# Good\n\nalpha bravo charlie\n")
    (tmp_path / "late-nul.md").write_bytes(b"# Late\n\n" + b"word " * 3000 + b"\x00 after the nul\n")
    collection = collection_create(path=tmp_path, name="nul")
    report = collection_index(collection)
    assert report.added == 2
    late = Document.objects.get(collection=collection, path="late-nul.md")
    assert "\x00" not in late.content.body and "after the nul" in late.content.body
    assert "NUL" in FileProblem.objects.get(collection=collection, path="late-nul.md").message


def test_a_file_name_that_is_not_utf8_is_a_problem_not_a_failed_scan(db, tmp_path):
    from indexing.services.collections import collection_create

    (tmp_path / "good.md").write_text("# Good\n\nalpha bravo charlie\n")
    with open(os.fsencode(tmp_path) + b"/bad\xff.md", "wb") as bad:
        bad.write(b"# Bad name\n")
    (tmp_path / "sub\udcfe").mkdir()  # a folder too: its notes are not reachable by any stored path
    collection = collection_create(path=tmp_path, name="names")
    report = collection_index(collection)
    assert report.added == 1 and Document.objects.filter(collection=collection, path="good.md").exists()
    problems = set(FileProblem.objects.filter(collection=collection).values_list("path", "message"))
    assert ("bad\ufffd.md", "the file name is not valid UTF-8: skipped") in problems


def test_unchanged_rescan_reads_no_file_and_changes_nothing(indexed_collection):
    report = collection_index(indexed_collection)
    assert (report.added, report.updated, report.removed) == (0, 0, 0)
    assert report.unchanged == 6


def test_changed_file_gets_new_content_and_touched_file_keeps_it(indexed_collection, corpus_dir):
    readme = corpus_dir / "README.md"
    before = Document.objects.get(collection=indexed_collection, path="README.md").content_id
    readme.write_text(readme.read_text() + "\nA new paragraph about rollbacks.\n")
    touched = corpus_dir / "guides" / "identifiers.md"
    later = time.time() + 5
    os.utime(touched, (later, later))
    report = collection_index(indexed_collection)
    assert report.updated == 1
    assert report.unchanged == 5
    after = Document.objects.get(collection=indexed_collection, path="README.md")
    assert after.content_id != before
    assert "rollbacks" in after.content.body
    ident = Document.objects.get(collection=indexed_collection, path="guides/identifiers.md")
    assert ident.mtime == pytest.approx(later)


def test_deleted_file_is_deactivated_then_restored_when_it_reappears(indexed_collection, corpus_dir):
    note = corpus_dir / "meetings" / "no-heading.md"
    text = note.read_text()
    note.unlink()
    report = collection_index(indexed_collection)
    assert report.removed == 1
    doc = Document.objects.get(collection=indexed_collection, path="meetings/no-heading.md")
    assert doc.active is False
    note.write_text(text)
    report = collection_index(indexed_collection)
    assert report.reactivated == 1
    doc.refresh_from_db()
    assert doc.active is True


def test_identical_files_share_one_content_row(db, tmp_path):
    (tmp_path / "a.md").write_text("# Same\n\nbody\n")
    (tmp_path / "b.md").write_text("# Same\n\nbody\n")
    collection = collection_create(path=tmp_path, name="twins")
    collection_index(collection)
    hashes = set(Document.objects.filter(collection=collection).values_list("content_id", flat=True))
    assert len(hashes) == 1
    assert Content.objects.filter(hash__in=hashes).count() == 1


def test_file_over_the_size_limit_is_skipped(db, tmp_path):
    (tmp_path / "big.md").write_text("# Big\n" + "x" * 5000)
    (tmp_path / "small.md").write_text("# Small\n")
    collection = collection_create(path=tmp_path, name="sizes")
    report = collection_index(collection, max_file_bytes=1000)
    assert report.skipped == 1
    assert _paths(collection) == {"small.md"}
    assert "over the 1,000-byte limit" in FileProblem.objects.get(path="big.md").message


def test_symlink_loop_does_not_hang_the_scan(db, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    os.symlink(tmp_path, tmp_path / "docs" / "loop")
    collection = collection_create(path=tmp_path, name="loopy")
    report = collection_index(collection)
    assert _paths(collection) == {"docs/a.md"}
    assert any("symlink loop" in i.message for i in report.issues)


def test_ignore_patterns_and_mask(db, corpus_dir):
    collection = collection_create(
        path=corpus_dir, name="only-guides", mask="guides/**/*.md", ignore_patterns=["**/identifiers.md"]
    )
    collection_index(collection)
    assert _paths(collection) == {"guides/postgres-tuning.md"}


def test_missing_folder_and_duplicate_name_are_clear_errors(db, tmp_path, corpus_dir):
    with pytest.raises(InvalidCollection, match="does not exist"):
        collection_create(path=tmp_path / "nope", name="x")
    collection_create(path=corpus_dir, name="dup")
    (tmp_path / "other").mkdir()
    with pytest.raises(CollectionExists, match="already exists"):
        collection_create(path=tmp_path / "other", name="dup")
    with pytest.raises(FolderTaken, match=f"folder {corpus_dir} is already collection 'dup'"):
        collection_create(path=corpus_dir, name="dup-2")


def test_folder_removed_after_registration_reports_missing_path(db, tmp_path):
    folder = tmp_path / "gone"
    folder.mkdir()
    collection = collection_create(path=folder, name="gone")
    folder.rmdir()
    with pytest.raises(CollectionPathMissing, match="does not exist"):
        collection_index(collection)


def test_unreadable_file_is_reported_and_does_not_stop_the_scan(db, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file; permission errors cannot be produced")
    (tmp_path / "ok.md").write_text("# OK\n")
    locked = tmp_path / "locked.md"
    locked.write_text("# Locked\n")
    locked.chmod(0)
    collection = collection_create(path=tmp_path, name="perm")
    report = collection_index(collection)
    assert _paths(collection) == {"ok.md"}
    assert report.errors == 1


# --- one bad note never stops the rest ------------------------------

ALIAS_BOMB = (
    "---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
    + "---\n"
)


def _keyword_paths(query):
    from indexing.access import Access
    from search.request import SearchRequest
    from search.retrieval.keyword import keyword_search

    return {r.path for r in keyword_search(SearchRequest(query=query, all=True, access=Access.local_user())).results}


def test_an_alias_bomb_is_refused_and_the_collection_indexed(db, tmp_path):
    (tmp_path / "bomb.md").write_text(ALIAS_BOMB + "# Bomb\n\nA zeppelin in the body.\n")
    (tmp_path / "a.md").write_text("# A\n\nThe zeppelin hangar.\n")
    (tmp_path / "b.md").write_text("---\ntags: [ok]\n---\n# B\n\nMarmots and a zeppelin.\n")
    collection = collection_create(path=tmp_path, name="bombed")
    report = collection_index(collection)
    assert _paths(collection) == {"bomb.md", "a.md", "b.md"}
    bomb = Document.objects.get(collection=collection, path="bomb.md")
    assert (bomb.frontmatter, bomb.title) == ({}, "Bomb")
    assert Document.objects.get(collection=collection, path="b.md").frontmatter == {"tags": ["ok"]}
    assert _keyword_paths("zeppelin") == {"bomb.md", "a.md", "b.md"}
    problem = FileProblem.objects.get(collection=collection, path="bomb.md")
    assert "YAML aliases" in problem.message and problem.severity == "warning"
    assert report.errors == 0


def test_a_note_too_deep_for_the_parser_is_indexed_without_its_frontmatter(db, tmp_path):
    (tmp_path / "deep.md").write_text("---\na: " + "[" * 5000 + "]" * 5000 + "\n---\nDeep body.\n")
    (tmp_path / "ok.md").write_text("# OK\n")
    collection = collection_create(path=tmp_path, name="deep")
    collection_index(collection)
    assert _paths(collection) == {"deep.md", "ok.md"}
    assert FileProblem.objects.get(collection=collection, path="deep.md").message.startswith("frontmatter")


def test_a_note_that_fails_to_parse_is_a_problem_of_that_note_only(db, tmp_path, monkeypatch):
    from indexing.services import scanning

    real = scanning.note_structure

    def exhausted(text, frontmatter, path, mtime):
        if path == "huge.md":
            raise MemoryError()
        return real(text, frontmatter, path, mtime)

    monkeypatch.setattr(scanning, "note_structure", exhausted)
    (tmp_path / "huge.md").write_text("# Huge\n")
    (tmp_path / "fine.md").write_text("# Fine\n\n[[huge]]\n")
    collection = collection_create(path=tmp_path, name="exhausted")
    report = collection_index(collection)
    assert _paths(collection) == {"fine.md"}
    problem = FileProblem.objects.get(collection=collection, path="huge.md")
    assert (problem.severity, problem.message) == ("error", "could not be read as a note (MemoryError): skipped")
    assert report.errors == 1


def test_a_note_of_100k_links_on_one_line_keeps_the_first_5000_and_says_so(db, tmp_path):
    from indexing.models import DocumentLink
    from indexing.structure import LINKS_MAX

    (tmp_path / "map.md").write_text("# Map\n\n" + " ".join(["[[target]]"] * 100_000) + "\n")
    (tmp_path / "target.md").write_text("# Target\n")
    collection = collection_create(path=tmp_path, name="linked")
    collection_index(collection)
    assert _paths(collection) == {"map.md", "target.md"}
    links = DocumentLink.objects.filter(source__path="map.md", source__collection=collection)
    assert links.count() == LINKS_MAX == 5_000
    assert links.filter(target__path="target.md").count() == LINKS_MAX
    assert FileProblem.objects.get(collection=collection, path="map.md").message == (
        "more than 5,000 links: only the first 5,000 are kept"
    )


def test_a_nested_collection_takes_its_notes_from_the_one_around_it(db, tmp_path):
    """A collection inside another doubled hits and tag counts; a note is indexed once."""
    from indexing.access import Access
    from indexing.services.refresh import collection_add

    (tmp_path / "sub").mkdir()
    (tmp_path / "top.md").write_text("# Top\n\nkiwi\n")
    (tmp_path / "sub" / "inner.md").write_text("# Inner\n\nkiwi\n")
    outer = collection_add(path=tmp_path, name="outer", access=Access.local_user()).collection
    assert _paths(outer) == {"top.md", "sub/inner.md"}
    added = collection_add(path=tmp_path / "sub", name="inner", access=Access.local_user())
    assert added.inside == ["outer"]
    assert _paths(outer) == {"top.md"} and _paths(added.collection) == {"inner.md"}
    problems = FileProblem.objects.filter(collection=outer).values_list("path", "message")
    assert ("sub", "the folder of collection inner: the files it reads are indexed there, the others here") in set(
        problems
    )
    # The collection around a nested one, added after it, skips it too.
    around = collection_add(
        path=tmp_path.parent, name="around", mask=f"{tmp_path.name}/**/*.md", access=Access.local_user()
    )
    assert _paths(around.collection) == set()
