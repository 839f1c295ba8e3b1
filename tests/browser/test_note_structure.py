"""The notes' structure in a real browser: click a tag and watch results and facets change; open a
note, see its related notes load, follow a backlink to the note that writes it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VAULT = Path(__file__).resolve().parents[1] / "fixtures" / "vault"


@pytest.fixture
def vault(tmp_path, transactional_db):
    from indexing.access import Access
    from indexing.models import Collection
    from indexing.services.refresh import collection_add

    target = tmp_path / "vault"
    shutil.copytree(VAULT, target)
    collection_add(path=target, name="vault", access=Access.local_user())
    return Collection.objects.get(name="vault")


def _paths(page) -> list[str]:
    return [p.split(":")[0] for p in page.locator("#results .result .path").all_inner_texts()]


def _facets(page) -> list[str]:
    return page.locator("#results .facets a.tag").evaluate_all("els => els.map(e => e.dataset.tag)")


def test_click_a_tag_then_follow_a_backlink(live_server, make_user, login, vault, shot):
    make_user("ana")
    page = login("ana")
    page.locator("#q").press_sequentially("alpha", delay=30)
    page.locator("#results .facets a.tag[data-tag='search']").wait_for()
    before_paths, before_facets = _paths(page), _facets(page)
    assert "vault/projects/beta.md" in before_paths and "vault/projects/alpha.md" in before_paths
    assert "search" in before_facets and "project" in before_facets  # beta's and Home's tags too
    assert page.locator("#results .facets a.tag[data-tag='db'] .count").inner_text() == "2"
    shot(page, "structure-01-facets")

    # A tag facet: the results, the facets and the search box follow, through htmx, with a shareable URL.
    page.click("#results .facets a.tag[data-tag='search']")
    page.wait_for_url(re.compile(r"q=alpha(\+|%20)tag%3Asearch"))
    page.locator("#results .facets a.tag.active[data-tag='search']").wait_for()
    assert _paths(page) == ["vault/projects/alpha.md"]
    assert set(_facets(page)) == {"db", "search", "project/alpha"}
    assert page.input_value("#q") == "alpha tag:search"
    shot(page, "structure-02-tag-clicked")

    # A tag on a result card filters the same way.
    page.fill("#q", "beta")
    page.locator("#search-state[data-query='beta']").wait_for(state="attached")
    page.locator("#results .result .tags a.tag[data-tag='db']").first.wait_for()
    page.locator("#results .result .tags a.tag[data-tag='db']").first.click()
    page.wait_for_url(re.compile(r"q=beta(\+|%20)tag%3Adb"))
    page.locator("#results .facets a.tag.active[data-tag='db']").wait_for()
    assert set(_paths(page)) <= {"vault/projects/alpha.md", "vault/projects/beta.md"}
    assert page.input_value("#q") == "beta tag:db"

    # Open alpha, see its backlinks, follow the one from the retro note: it opens at the link's line.
    page.goto(f"{live_server.url}/doc/vault/projects/alpha.md")
    backlink = page.locator("#backlinks li.backlink:has-text('Looking back at') a").first
    assert "unresolved" not in page.locator("#outgoing-links").inner_text()
    # its Related panel loads after the page, with why each note is there
    related = page.locator("#related li.related-note[data-path='projects/beta.md']")
    related.wait_for()
    assert "links to it" in related.inner_text() and "shares tags: db" in related.inner_text()
    shot(page, "structure-03-document-links")
    backlink.click()
    page.wait_for_url(re.compile(r"/doc/vault/journal/20250320-retro\.md\?line=3#L3$"))
    assert page.locator(".doc-head h1").inner_text() == "Retro"
    assert page.locator("#outgoing-links").inner_text().count("Alpha") >= 1  # the retro links back to alpha
    shot(page, "structure-04-backlink-followed")

    # Home's outgoing links show its broken link as unresolved.
    page.goto(f"{live_server.url}/doc/vault/Home.md")
    assert "[[Missing Note]]" in page.locator("#outgoing-links li.unresolved").first.inner_text()
