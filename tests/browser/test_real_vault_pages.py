"""Real vaults in a real browser: a note's callouts and embeds rendered as the user's editor would,
and a results page over READMEs full of anchor links whose tag facets stay short."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _add(folder: Path, name: str, **options):
    from indexing.access import Access
    from indexing.services.refresh import collection_add

    collection_add(path=folder, name=name, access=Access.local_user(), **options)


def test_a_callout_and_embeds_are_rendered_and_lead_to_their_target(live_server, make_user, login, tmp_path, shot):
    shutil.copytree(FIXTURES / "dialects", tmp_path / "dialects")
    _add(tmp_path / "dialects", "dialects", title_from="heading")
    make_user("ana")
    page = login("ana")
    page.goto(f"{live_server.url}/doc/dialects/Callouts.md")

    warning = page.locator(".pmd-callout-warning").first
    assert warning.locator(".pmd-callout-title").inner_text().strip() == "Mind the quokka"
    assert "marmalade" in warning.inner_text() and "[!warning]" not in page.locator("main").inner_text()
    # styled by its type: a coloured edge, not a plain quote
    edge = warning.evaluate("e => getComputedStyle(e).borderLeftColor")
    plain = page.evaluate("() => getComputedStyle(document.querySelector('main')).borderLeftColor")
    assert edge != plain
    # the image embed is the collection's own file, loaded at the size asked
    image = page.locator("img.pmd-embed")
    image.wait_for()
    assert image.evaluate("img => img.complete && img.naturalWidth > 0")
    assert image.get_attribute("width") == "300"
    assert page.locator("mark", has_text="highlighted saffron").count() == 1
    assert "xylophone" not in page.content()  # a %% comment %% is never shown
    shot(page, "real-vaults-01-callouts-and-embeds")

    # the note embed leads to the embedded section of the other note
    page.locator("a.pmd-embed", has_text="Glossary › Terms").click()
    page.wait_for_url(re.compile(r"/doc/dialects/Glossary\.md#h-terms$"))
    assert page.locator("#h-terms").count() == 1
    assert page.locator("#h-terms").evaluate("e => e.closest('h2') !== null")


def test_tag_facets_stay_short_on_readmes_full_of_anchor_links(live_server, make_user, login, tmp_path, shot):
    readmes = tmp_path / "readmes"
    shutil.copytree(FIXTURES / "real_vaults" / "readme", readmes)
    toc = "\n".join(f"- [Section {i}](#section-{i})" for i in range(150))
    tags = " ".join(f"#topic-{i}" for i in range(30))
    for n in range(4):
        (readmes / f"package-{n}.md").write_text(f"# package-{n} [![ci][ci]][url]\n\n{toc}\n\nmicrotask {tags}\n")
    _add(readmes, "readmes")
    make_user("ana")
    page = login("ana")
    page.locator("#q").press_sequentially("microtask", delay=20)
    page.locator("#results .facets").wait_for()

    shown = page.locator("#results .facets > ul.tag-facets a.tag")
    assert shown.count() == 10
    assert all(not t.startswith("section-") for t in shown.evaluate_all("els => els.map(e => e.dataset.tag)"))
    more = page.locator("#results details.more-tags")
    assert not more.locator("#more-tags").is_visible()  # behind "more tags" until asked
    box = page.locator("#results .facets").bounding_box()
    assert box["height"] < page.viewport_size["height"]  # the results are not pushed off the first screen
    more.locator("summary").click()
    assert more.locator("#more-tags").is_visible()  # the rest, on demand
    page.locator("#results .tag-filter").fill("topic-2")
    page.wait_for_function(
        "() => { const shown = [...document.querySelectorAll('#more-tags a.tag')]"
        ".filter(a => a.offsetParent !== null);"
        " return shown.length > 0 && shown.every(a => a.dataset.tag.includes('topic-2')); }"
    )
    visible = page.locator("#more-tags a.tag").evaluate_all(
        "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.tag)"
    )
    assert visible and all("topic-2" in tag for tag in visible)
    # leaving the search box searched nothing again; the order and dates still search when changed
    page.locator("select[name=sort]").select_option("date")
    page.wait_for_url(re.compile(r"sort=date"))
    page.locator("#after").fill("2020-01-01")
    page.locator("#after").press("Tab")
    page.wait_for_url(re.compile(r"after=2020-01-01"))
    shot(page, "real-vaults-02-short-facets")
