"""A note not found under `collection/path` is suggested from that collection, not another's
(`rustbook/ch99.md` once suggested `known/undici/Fetch.md`)."""

from __future__ import annotations

import pytest

from indexing.access import Access
from indexing.errors import DocumentNotFound
from indexing.selectors import document_resolve
from tests.support.factories import make_vault


@pytest.mark.django_db
def test_suggestions_stay_in_the_collection_the_reference_names(tmp_path):
    make_vault(tmp_path / "book", {f"ch{n:02}.md": f"# Chapter {n}\n" for n in range(1, 8)}, name="rustbook")
    make_vault(tmp_path / "known", {"undici/Fetch.md": "# Fetch\n", "ch9.md": "# Nine\n"}, name="known")
    with pytest.raises(DocumentNotFound) as raised:
        document_resolve("rustbook/ch99.md", access=Access.local_user())
    assert "pmd://rustbook/ch99.md" in raised.value.message
    assert raised.value.suggestions and all(s.startswith("pmd://rustbook/") for s in raised.value.suggestions)
