"""Related notes (search.retrieval.related.related_notes): link, tag and meaning neighbours with
their reasons, access, identical copies, notes without embeddings, and the same list through the
CLI, the API and MCP.

The vault: A links to B, C links to A, D shares a tag with A, E is written much like A, G is an
identical copy of A, H is unrelated; F, in a private collection a member cannot see, is written
almost exactly like A (the most similar of all).
"""

from __future__ import annotations

import json

import pytest

from indexing.access import Access
from search.retrieval.related import LINK_BONUS, related_notes
from tests.support.factories import api_client, make_user, make_vault
from tests.support.mcp_client import SERVED_DB, call_tool, close_other_connections

pytestmark = pytest.mark.django_db

A_TEXT = (
    "---\ntags: [bread, kitchen]\n---\n# Sourdough starter\n\n"
    "Sourdough bread baking with a wild yeast starter: hydration levels, long cold fermentation, "
    "stretch and fold, crumb and crust. See [[b]] for the oven.\n"
)
VAULT = {
    "a.md": A_TEXT,
    "b.md": "# Oven\n\nThe oven thermostat was replaced in March; the warranty covers parts for two years.\n",
    "c.md": "# Weekend plans\n\nHiking on Saturday, then [[a]] on Sunday morning if the weather turns.\n",
    "d.md": "---\ntags: [bread]\n---\n# Shopping list\n\nFlour, salt, olives, coffee beans and dish soap.\n",
    "e.md": (
        "# Rye loaf\n\nSourdough bread baking with a rye starter: hydration levels, cold fermentation "
        "and a dense crumb.\n"
    ),
    "g.md": A_TEXT,
    "h.md": "# Tax return\n\nReceipts for the accountant: invoices, pension statements, insurance letters.\n",
}
F_TEXT = (
    "# Secret sourdough\n\nSourdough bread baking with a wild yeast starter: hydration levels, long cold "
    "fermentation, stretch and fold, crumb and crust. See the oven.\n"
)


def _build(tmp_path, django_user_model, *, embed=True):
    from indexing.models import Collection
    from indexing.services.embedding import embed_pending

    make_vault(tmp_path / "vault", VAULT, name="vault")
    owner = make_user("owner")
    member = make_user("member")
    make_vault(
        tmp_path / "secret", {"f.md": F_TEXT}, name="secret", owner=owner, visibility=Collection.Visibility.PRIVATE
    )
    if embed:
        embed_pending()
    return member


@pytest.fixture
def vault(tmp_path, ollama, settings, django_user_model):
    settings.PMD_CHUNK_TOKENS = 40
    settings.PMD_EMBED_BATCH = 4
    return _build(tmp_path, django_user_model)


def _by_path(found):
    return {r.document.path: r for r in found.results}


def test_reasons_of_links_tags_and_text(vault):
    found = related_notes("vault/a.md", access=Access.for_user(vault), limit=20)
    rows = _by_path(found)
    assert found.warnings == []
    assert rows["b.md"].linked_from_it and not rows["b.md"].links_to_it
    assert rows["b.md"].reasons[0] == "linked from it"
    assert rows["c.md"].links_to_it and not rows["c.md"].linked_from_it
    assert rows["c.md"].reasons[0] == "links to it"
    assert "shares tags: bread" in rows["d.md"].reasons
    assert rows["e.md"].similarity is not None
    assert rows["e.md"].reasons == [f"similar text ({rows['e.md'].similarity:.2f})"]
    assert rows["e.md"].similarity > max(rows[p].similarity or 0 for p in ("b.md", "c.md", "d.md", "h.md"))
    as_dict = found.as_dict()
    assert as_dict["uri"] == "pmd://vault/a.md"
    assert {"docid", "uri", "title", "score", "similarity", "reasons", "shared_tags"} <= set(as_dict["results"][0])


def test_ordering_is_by_score(vault):
    found = related_notes("vault/a.md", access=Access.local_user(), limit=20)
    rows = _by_path(found)
    scores = [r.score for r in found.results]
    assert scores == sorted(scores, reverse=True)
    for r in found.results:  # the score is the documented sum
        assert r.score == pytest.approx(
            (r.similarity or 0) + LINK_BONUS * (r.links_to_it + r.linked_from_it) + min(0.3, 0.1 * len(r.shared_tags))
        )
    paths = [r.document.path for r in found.results]
    assert paths.index("b.md") < paths.index("d.md") and paths.index("c.md") < paths.index("d.md")
    assert paths.index("e.md") < paths.index("h.md")
    assert rows["f.md"].similarity > rows["e.md"].similarity, "F is the most similar of all"
    assert len(related_notes("vault/a.md", access=Access.local_user(), limit=2).results) == 2


def test_a_note_in_a_collection_the_member_cannot_see_is_never_suggested(vault):
    local = _by_path(related_notes("vault/a.md", access=Access.local_user(), limit=20))
    assert "f.md" in local and local["f.md"].document.collection.name == "secret"
    for limit in (1, 3, 20):
        member = related_notes("vault/a.md", access=Access.for_user(vault), limit=limit)
        assert all(r.document.collection.name == "vault" for r in member.results)
    member = related_notes("vault/a.md", access=Access.for_user(vault), limit=20).results
    assert max(member, key=lambda r: r.similarity or 0).document.path == "e.md", "F's place goes to E"


def test_identical_copies_are_not_related_to_each_other(vault):
    found = related_notes("vault/a.md", access=Access.local_user(), limit=20)
    assert "g.md" not in _by_path(found) and found.copies == 1
    copy = related_notes("vault/g.md", access=Access.local_user(), limit=20)
    assert "a.md" not in _by_path(copy) and copy.copies == 1
    assert "e.md" in _by_path(copy), "the copy still has the copy's related notes"


def test_a_note_without_embeddings_gets_its_links_and_tags_with_a_warning(vault, tmp_path):
    from indexing.models import Collection
    from indexing.services.scanning import collection_index

    (tmp_path / "vault" / "n.md").write_text("---\ntags: [bread]\n---\n# New\n\nNotes on [[a]] to try.\n")
    collection_index(Collection.objects.get(name="vault"))
    found = related_notes("vault/n.md", access=Access.local_user(), limit=20)
    rows = _by_path(found)
    assert len(found.warnings) == 1 and "no embeddings" in found.warnings[0]
    assert rows["a.md"].reasons[:2] == ["linked from it", "shares tags: bread"] and rows["a.md"].similarity is None
    assert "shares tags: bread" in rows["d.md"].reasons
    assert all(r.similarity is None for r in found.results)
    assert set(rows) == {"a.md", "d.md", "g.md"}


def test_nothing_embedded_at_all_still_answers(tmp_path, ollama, django_user_model):
    _build(tmp_path, django_user_model, embed=False)
    found = related_notes("vault/a.md", access=Access.local_user())
    assert found.warnings and "nothing is embedded" in found.warnings[0]
    assert set(_by_path(found)) == {"b.md", "c.md", "d.md"}


def test_unknown_note_is_not_found(vault):
    from indexing.errors import PmdError

    with pytest.raises(PmdError):
        related_notes("vault/nope.md", access=Access.local_user())
    with pytest.raises(PmdError):  # a member cannot ask about F either
        related_notes("secret/f.md", access=Access.for_user(vault))


@SERVED_DB
def test_cli_api_and_mcp_give_the_same_list(request, tmp_path, ollama, settings, django_user_model, run_cli):

    request.addfinalizer(close_other_connections)  # the MCP tools ran in worker threads
    settings.PMD_CHUNK_TOKENS = 40
    member = _build(tmp_path, django_user_model)
    code, out, err = run_cli("related", "vault/a.md", "-n", "5", "--json")
    assert code == 0, err
    cli = json.loads(out)
    expected = [(r["uri"], r["reasons"], r["score"]) for r in cli["results"]]
    assert len(expected) == 5 and "pmd://secret/f.md" in {uri for uri, _, _ in expected}, "the local user sees F"
    reader = django_user_model.objects.get(username="owner")  # sees both collections, as the local user does
    api = api_client(reader, write=False)
    got = api.get("/api/related", {"ref": "vault/a.md", "limit": 5})
    assert got.status_code == 200, got.content
    assert [(r["uri"], r["reasons"], r["score"]) for r in got.json()["results"]] == expected
    assert set(got.json()) == set(cli)
    mcp = call_tool("pmd_related", {"ref": "vault/a.md", "limit": 5})
    assert [(r["uri"], r["reasons"], r["score"]) for r in mcp["results"]] == expected
    code, text, _ = run_cli("related", "vault/a.md", "-n", "5")
    assert code == 0 and "links to it" in text and "pmd://vault/c.md" in text
    # a member's token: F is not there, and asking about it is "not found"
    as_member = api_client(member, write=False)
    listed = as_member.get("/api/related", {"ref": "vault/a.md", "limit": 20}).json()["results"]
    assert listed and all(r["collection"] == "vault" for r in listed)
    assert as_member.get("/api/related", {"ref": "secret/f.md"}).status_code == 404
    assert api.get("/api/related", {"ref": "vault/nope.md"}).status_code == 404
    assert run_cli("related", "vault/a.md", "-n", "0")[0] == 1
