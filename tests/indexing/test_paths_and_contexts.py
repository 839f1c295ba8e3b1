"""Virtual paths, document references, and path contexts."""

from __future__ import annotations

import pytest

from indexing.access import Access
from indexing.errors import DocumentNotFound, InvalidPath
from indexing.paths import glob_match, parse_reference
from indexing.selectors import contexts_for, document_resolve, documents_multi_get
from indexing.services.contexts import context_remove, context_set


@pytest.mark.parametrize(
    "pattern,path,expected",
    [
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/a.md", True),
        ("**/*.md", "a.txt", False),
        ("notes/*.md", "notes/x/a.md", False),
        ("*.{md,markdown}", "a.markdown", True),
        ("docs/**", "docs/a/b.md", True),
    ],
)
def test_glob_masks(pattern, path, expected):
    assert glob_match(pattern, path) is expected


def test_references_parse_docids_virtual_paths_and_lines():
    assert parse_reference("#ABC123").docid == "abc123"
    ref = parse_reference("pmd://notes/a/b.md:42")
    assert (ref.collection, ref.path, ref.line) == ("notes", "a/b.md", 42)
    with pytest.raises(InvalidPath):
        parse_reference("pmd://notes/../../etc/passwd")


@pytest.mark.django_db
class TestResolve:
    def test_by_docid_virtual_path_and_relative_path(self, indexed_collection):
        from indexing.models import Document

        doc = Document.objects.get(collection=indexed_collection, path="README.md")
        assert document_resolve(f"#{doc.docid}", access=Access.local_user()).document == doc
        assert document_resolve("pmd://notes/README.md", access=Access.local_user()).document == doc
        assert document_resolve("notes/README.md", access=Access.local_user()).document == doc
        assert (
            document_resolve("guides/identifiers.md", access=Access.local_user()).document.path
            == "guides/identifiers.md"
        )
        assert (
            document_resolve(str(indexed_collection.root_path) + "/README.md", access=Access.local_user()).document
            == doc
        )

    def test_traversal_never_escapes_the_index(self, indexed_collection):
        for attempt in (
            "../../../../etc/passwd",
            "pmd://notes/../../etc/passwd",
            "/etc/passwd",
            "notes/../../etc/hostname",
        ):
            with pytest.raises(DocumentNotFound):
                document_resolve(attempt, access=Access.local_user())

    def test_a_miss_suggests_close_matches(self, indexed_collection):
        with pytest.raises(DocumentNotFound) as info:
            document_resolve("guides/postgres-tunning.md", access=Access.local_user())
        assert "pmd://notes/guides/postgres-tuning.md" in info.value.suggestions

    def test_multi_get_glob_and_list_with_byte_limit(self, indexed_collection):
        result = documents_multi_get("notes/guides/*.md", access=Access.local_user())
        assert [i.document.path for i in result.items] == ["guides/identifiers.md", "guides/postgres-tuning.md"]
        result = documents_multi_get(
            "README.md,guides/identifiers.md,missing.md", max_bytes=150, access=Access.local_user()
        )
        skipped = {i.document.path: i.skipped_reason for i in result.items}
        assert skipped["README.md"] is not None  # 220 bytes > 150
        assert skipped["guides/identifiers.md"] is None
        assert result.missing == ["missing.md"]


@pytest.mark.django_db
def test_contexts_inherit_from_global_collection_and_prefix(indexed_collection):
    context_set(target="/", text="Company knowledge base", access=Access.local_user())
    context_set(target="pmd://notes/", text="Team handbook", access=Access.local_user())
    context_set(target="pmd://notes/meetings", text="Meeting notes", access=Access.local_user())
    assert contexts_for(indexed_collection, "meetings/2025-01-standup.md") == [
        "Company knowledge base",
        "Team handbook",
        "Meeting notes",
    ]
    assert contexts_for(indexed_collection, "guides/identifiers.md") == ["Company knowledge base", "Team handbook"]
    context_remove(target="pmd://notes/meetings", access=Access.local_user())
    assert contexts_for(indexed_collection, "meetings/x.md") == ["Company knowledge base", "Team handbook"]
