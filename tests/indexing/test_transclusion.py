"""Transclusion: with it on, a note that embeds a section (`![[Note#Section]]`) is found by that
section's words; off (the default), only the embedded note is."""

import json

import pytest

from indexing.access import Access
from indexing.keyword.keyword_index import embedded_text
from indexing.services.collections import collection_configure, collection_create
from indexing.services.scanning import collection_index
from search.request import SearchRequest
from search.retrieval.keyword import keyword_search
from tests.support.factories import api_client, make_user, write_notes

NOTES = {
    "Setup guide.md": "# Setup guide\n\n## Install\n\nRun the zanzibar installer.\n\n"
    "## Other\n\nA quokka lives here.\n",
    "Whole.md": "# Whole\n\nThe narwhal note, embedded whole.\n",
    "Blocks.md": "# Blocks\n\nFirst paragraph with a tapir. ^tap\n\nSecond paragraph with an okapi.\n",
    "Hub.md": "# Hub\n\nSee below.\n\n![[Setup guide#Install]]\n\n![[Whole]]\n\n![[Blocks#^tap]]\n",
}


def found(query: str) -> set[str]:
    response = keyword_search(SearchRequest(query=query, access=Access.local_user(), limit=10))
    return {r.path for r in response.results}


@pytest.fixture
def vault(db, tmp_path):
    root = write_notes(tmp_path / "vault", NOTES)
    collection = collection_create(path=root, name="vault")
    collection_index(collection)
    return root, collection


def test_off_by_default_a_note_is_not_found_by_what_it_embeds(vault):
    _, collection = vault
    assert collection.transclude is False
    assert found("zanzibar") == {"Setup guide.md"}
    assert found("narwhal") == {"Whole.md"}


def test_on_the_embedding_note_is_found_by_the_embedded_section_only(vault):
    collection_configure(name="vault", access=Access.local_user(), transclude=True)
    assert found("zanzibar") == {"Setup guide.md", "Hub.md"}
    assert found("quokka") == {"Setup guide.md"}  # another section of the embedded note
    assert found("narwhal") == {"Whole.md", "Hub.md"}  # a whole note
    assert found("tapir") == {"Blocks.md", "Hub.md"}  # a block by its id
    assert found("okapi") == {"Blocks.md"}
    collection_configure(name="vault", access=Access.local_user(), transclude=False)
    assert found("zanzibar") == {"Setup guide.md"}


def test_an_edit_of_the_embedded_note_reaches_the_note_that_embeds_it(vault):
    root, collection = vault
    collection_configure(name="vault", access=Access.local_user(), transclude=True)
    (root / "Setup guide.md").write_text(NOTES["Setup guide.md"].replace("zanzibar", "xylophone"))
    collection_index(collection)
    assert found("xylophone") == {"Setup guide.md", "Hub.md"}
    assert found("zanzibar") == set()
    (root / "Whole.md").unlink()
    collection_index(collection)
    assert found("narwhal") == set()


def test_the_hit_points_at_the_line_that_embeds(vault):
    collection_configure(name="vault", access=Access.local_user(), transclude=True)
    response = keyword_search(SearchRequest(query="zanzibar", access=Access.local_user(), limit=10))
    hub = next(r for r in response.results if r.path == "Hub.md")
    assert hub.line == 5


def test_embedded_text_cuts_the_section_at_a_heading_of_its_level():
    body = "# T\n\n## A\n\none\n\n### A.1\n\ntwo\n\n## B\n\nthree\n"
    assert "one" in embedded_text(body, "A") and "two" in embedded_text(body, "A")
    assert "three" not in embedded_text(body, "A")
    assert embedded_text(body, "missing") == ""
    assert embedded_text("```\n## A\n```\n## A\nreal\n", "A").strip() == "real"


def test_every_face_sets_it(db, tmp_path, run_cli):
    root = write_notes(tmp_path / "v2", NOTES)
    code, out, _ = run_cli("collection", "add", str(root), "--name", "v2", "--transclude", "--json")
    assert code == 0
    assert found("zanzibar") == {"Setup guide.md", "Hub.md"}
    code, out, _ = run_cli("collection", "set", "v2", "--transclude", "off", "--json")
    assert code == 0 and json.loads(out)["transclude"] is False
    assert found("zanzibar") == {"Setup guide.md"}
    code, _, err = run_cli("collection", "set", "v2")
    assert code != 0 and "nothing to change" in err
    api = api_client(make_user("root", superuser=True, staff=True))
    response = api.patch("/api/collections/v2", {"transclude": True}, content_type="application/json")
    assert response.status_code == 200 and response.json()["transclude"] is True
    assert found("zanzibar") == {"Setup guide.md", "Hub.md"}
