"""The notes' structure in the web UI: tag facets with counts, tag links that filter, and a note's
outgoing links and backlinks in the document view, all within what the member may see."""

from __future__ import annotations

import re
import shutil
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client

from indexing.access import Access
from indexing.models import Collection
from tests.support.factories import make_user
from tests.support.paths import FIXTURE_VAULT as VAULT

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "results"}


@pytest.fixture
def vault(db, tmp_path):
    from indexing.services.refresh import collection_add

    target = tmp_path / "vault"
    shutil.copytree(VAULT, target)
    collection_add(path=target, name="vault", access=Access.local_user())
    return Collection.objects.get(name="vault")


def _facets(html: str) -> dict[str, int]:
    nav = re.search(r'<nav class="facets.*?</nav>', html, re.S)
    assert nav, "no facets on the page"
    return {
        m[0]: int(m[1])
        for m in re.findall(
            r'class="tag facet[^"]*"[^>]*data-tag="([^"]+)"[^>]*>#[^<]*<span class="count">(\d+)</span>', nav[0]
        )
    }


def _result_paths(html: str) -> list[str]:
    return re.findall(r'<span class="path">([^<:]+):\d+</span>', html)


def test_facets_show_the_tags_of_the_results_with_counts(member_client, vault):
    html = member_client.get("/", {"q": "alpha"}).content.decode()
    paths = _result_paths(html)
    assert "vault/projects/alpha.md" in paths and "vault/projects/beta.md" in paths
    facets = _facets(html)
    # alpha carries db (frontmatter), beta carries DB (tag: DB): one tag, two notes
    assert facets.get("db") == 2
    assert facets.get("search") == 1 and facets.get("project/alpha") == 1
    assert "home" not in facets or "vault/Home.md" in paths


def test_a_tag_link_filters_the_results_and_the_facets_follow(member_client, vault):
    html = member_client.get("/", {"q": "alpha"}).content.decode()
    link = re.search(r'href="([^"]+)"[^>]*data-tag="search"', html)
    assert link, "no link for the tag 'search'"
    url = link[1].replace("&amp;", "&")
    assert parse_qs(urlparse(url).query)["q"] == ["alpha tag:search"]
    fragment = member_client.get(url, **HTMX).content.decode()
    assert _result_paths(fragment) == ["vault/projects/alpha.md"]
    assert set(_facets(fragment)) == {"db", "search", "project/alpha"}
    assert 'aria-current="true">#search' in fragment  # the chosen tag is marked
    assert 'data-query="alpha tag:search"' in fragment  # the search box follows the click
    # the full page (no JS) filters the same way
    page = member_client.get(url).content.decode()
    assert _result_paths(page) == ["vault/projects/alpha.md"]
    assert 'value="alpha tag:search"' in page


def test_tags_on_result_cards_are_links(member_client, vault):
    html = member_client.get("/", {"q": "Ship beta"}).content.decode()
    card = re.search(r'<li class="result" data-href="[^"]*projects/beta\.md.*?</li>', html, re.S)
    assert card
    assert re.search(r'<a class="tag" href="/\?q=Ship\+beta\+tag%3Adb"', card[0])


def test_the_date_range_filters_the_results(member_client, vault):
    html = member_client.get("/", {"q": "alpha", "after": "2025-01-01"}).content.decode()
    assert _result_paths(html) and "vault/projects/alpha.md" not in _result_paths(html)  # created 2024-12-01
    assert "vault/projects/beta.md" in _result_paths(html)
    assert "Dated from 2025-01-01" in html
    bad = member_client.get("/", {"q": "alpha", "after": "someday"}).content.decode()
    assert 'class="state problem' in bad


def test_document_view_shows_tags_outgoing_links_and_backlinks(member_client, vault):
    html = member_client.get("/doc/vault/projects/alpha.md").content.decode()
    # tags, clickable: the search filtered by the tag
    assert re.search(r'<a class="tag" href="/\?q=tag%3Adb" data-tag="db">#db</a>', html)
    outgoing = re.search(r'<section class="links" id="outgoing-links".*?</section>', html, re.S)[0]
    assert 'href="/doc/vault/projects/beta.md"' in outgoing and "The Beta Project" in outgoing
    assert 'href="/doc/vault/Home.md"' in outgoing
    backlinks = re.search(r'<section class="links" id="backlinks".*?</section>', html, re.S)[0]
    # projects/beta.md links to alpha on its line 8, with the sentence around it
    assert 'href="/doc/vault/projects/beta.md?line=8#L8"' in backlinks
    assert "See Home and projects/alpha" in backlinks  # the sentence as read, never its markdown
    assert "[[Home]]" not in backlinks
    assert 'href="/doc/vault/journal/20250320-retro.md?line=3#L3"' in backlinks
    assert "Looking back at" in backlinks
    # Home links to it by its alias [[Alpha Plan|the plan]]
    assert 'href="/doc/vault/Home.md?line=8#L8"' in backlinks and "Start with Ideas and the plan." in backlinks
    assert "Looking back at Alpha" in backlinks and "](../projects/alpha.md)" not in backlinks


def test_document_view_shows_an_unresolved_link_as_such(member_client, vault):
    html = member_client.get("/doc/vault/Home.md").content.decode()
    outgoing = re.search(r'<section class="links" id="outgoing-links".*?</section>', html, re.S)[0]
    unresolved = re.search(r'<li class="link unresolved".*?</li>', outgoing, re.S)
    assert unresolved and "[[Missing Note]]" in unresolved[0] and "unresolved" in unresolved[0]
    assert "/doc/" not in unresolved[0]
    assert re.search(r'<li class="link resolved"[^>]*>\s*<a href="/doc/vault/projects/Ideas.md"', outgoing)


def test_a_member_sees_no_facet_or_link_from_a_collection_they_cannot_see(member_client, vault, tmp_path):
    from indexing.services.refresh import collection_add

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "alpha.md").write_text("---\ntags: [classified]\n---\n# Secret alpha\n\nAlpha, see [[plans]].\n")
    (secret / "plans.md").write_text("# Plans\n\nAlpha plans #hidden, back to [[alpha]].\n")
    owner = make_user("owner", password="x", staff=True)
    collection_add(path=secret, name="secret", access=Access.for_user(owner), visibility=Collection.Visibility.PRIVATE)
    owner_client = Client()
    owner_client.force_login(owner)
    assert "classified" in _facets(owner_client.get("/", {"q": "alpha"}).content.decode())  # the test can fail

    html = member_client.get("/", {"q": "alpha"}).content.decode()
    assert "secret/" not in html
    facets = _facets(html)
    assert "classified" not in facets and "hidden" not in facets
    assert facets.get("db") == 2
    assert member_client.get("/", {"q": "tag:classified"}).content.decode().count('class="result"') == 0
    assert member_client.get("/doc/secret/plans.md").status_code == 404
    doc = member_client.get("/doc/vault/projects/alpha.md").content.decode()
    assert "/doc/secret/" not in doc and "Secret alpha" not in doc


# --- the Related panel of the document view ----------------------------------------------------------

RELATED_HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "related-notes"}


def _related(html: str) -> dict[str, list[str]]:
    """{path: reasons} of the related notes in a page or fragment."""
    return {
        m[0]: re.findall(r'<span class="badge reason">([^<]+)</span>', m[1])
        for m in re.findall(r'<li class="related-note" data-path="([^"]+)">(.*?)</li>', html, re.S)
    }


def test_the_document_view_loads_its_related_notes_with_reasons(member_client, vault):
    html = member_client.get("/doc/vault/projects/alpha.md").content.decode()
    panel = re.search(r'<section class="links" id="related".*?</section>', html, re.S)
    assert panel, "no Related panel"
    assert 'hx-get="/related/vault/projects/alpha.md"' in panel[0] and 'hx-trigger="load"' in panel[0]
    assert 'href="/related/vault/projects/alpha.md"' in panel[0]  # without JavaScript: a link to it

    fragment = member_client.get("/related/vault/projects/alpha.md", **RELATED_HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="related-notes">')
    related = _related(fragment)
    # beta links to alpha and alpha links to beta; both carry the tag db
    assert related["projects/beta.md"] == ["links to it", "linked from it", "shares tags: db"]
    assert related["Home.md"][:2] == ["links to it", "linked from it"]
    assert related["journal/20250320-retro.md"] == ["links to it"]
    assert "projects/alpha.md" not in related
    assert 'href="/doc/vault/projects/beta.md"' in fragment
    # nothing is embedded: the link and tag neighbours, and why there is no similar text
    assert "showing links and tags only" in fragment

    page = member_client.get("/related/vault/projects/alpha.md").content.decode()
    assert "<html" in page and _related(page) == related


def test_the_related_panel_shows_similar_text_when_notes_are_embedded(member_client, vault, ollama):
    from indexing.services.embedding import embed_pending

    embed_pending()
    fragment = member_client.get("/related/vault/projects/alpha.md", **RELATED_HTMX).content.decode()
    related = _related(fragment)
    assert any(r.startswith("similar text (") for reasons in related.values() for r in reasons)
    assert "showing links and tags only" not in fragment


def test_the_related_panel_never_shows_what_the_member_cannot_see(member_client, vault, tmp_path, ollama):
    from indexing.services.embedding import embed_pending
    from indexing.services.refresh import collection_add

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "copy.md").write_text(
        "---\ntags: [db, search]\n---\n# Alpha again\n\nAlpha depends on beta and reports home. The details of alpha.\n"
    )
    owner = make_user("owner", password="x", staff=True)
    collection_add(path=secret, name="secret", access=Access.for_user(owner), visibility=Collection.Visibility.PRIVATE)
    embed_pending()
    owner_client = Client()
    owner_client.force_login(owner)
    as_owner = owner_client.get("/related/vault/projects/alpha.md", **RELATED_HTMX).content.decode()
    assert "copy.md" in _related(as_owner), "the owner sees it (the test can fail)"

    as_member = member_client.get("/related/vault/projects/alpha.md", **RELATED_HTMX).content.decode()
    assert "copy.md" not in _related(as_member) and "secret" not in as_member
    assert "projects/beta.md" in _related(as_member)
    assert member_client.get("/related/secret/copy.md", **RELATED_HTMX).status_code == 404
    assert member_client.get("/related/secret/copy.md").status_code == 404
