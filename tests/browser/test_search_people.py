"""Searching the way people ask, in a real browser: the box completes filter keys and tags,
a typo is corrected with a way back, a search is saved and re-run from /saved/ with its new results
marked, a result is rated, and the staff Searches page shows what nobody found (members: their own)."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTES = {
    "alpha.md": "---\nstatus: draft\ntags: [database, devops]\n---\n# Alpha\n\npostgres vacuum tuning\n",
    "beta.md": "---\nstatus: done\ntags: [database]\n---\n# Beta\n\nvacuum and replication\n",
    "gamma.md": "# Gamma\n\ngardening tomatoes\n",
}


@pytest.fixture
def notes(tmp_path, transactional_db):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    folder = tmp_path / "team"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    collection = collection_create(path=folder, name="team")
    collection_index(collection)
    return collection, folder


def test_completion_typo_correction_and_feedback(live_server, make_user, login, notes, shot):
    make_user("mia")
    page = login("mia")
    box = page.locator("#q")
    box.press_sequentially("vacuum sta")
    offered = page.locator("#suggestions li", has_text="status:")
    offered.wait_for()
    offered.click()
    assert box.input_value() == "vacuum status:"
    box.press_sequentially("dr")
    page.locator("#suggestions li", has_text="status:draft").wait_for()
    box.press("ArrowDown")
    box.press("Enter")
    assert box.input_value() == "vacuum status:draft"
    page.wait_for_url(re.compile(r"q=vacuum(\+|%20)status%3Adraft"))  # that search's answer, not an earlier one's
    page.locator("#results .result", has_text="Alpha").wait_for()
    assert page.locator("#results .result").count() == 1

    box.fill("")
    box.press_sequentially("tag:dat")
    page.locator("#suggestions li", has_text="tag:database").wait_for()
    assert "2 notes" in page.locator("#suggestions").inner_text()
    shot(page, "people-1-tag-completion")
    box.press("Escape")
    assert page.locator("#suggestions").is_hidden()

    page.goto(f"{live_server.url}/?q=vacuun")
    notice = page.locator(".notice.corrected")
    assert "Showing results for vacuum" in notice.inner_text()
    assert page.locator("#results .result").count() == 2
    shot(page, "people-2-did-you-mean")
    # a result rated: kept with this search
    page.locator("#results .result").first.locator("button.vote.down").click()
    page.locator("#results .result .feedback .thanks").wait_for()
    from indexing.models import SearchFeedback

    assert list(SearchFeedback.objects.values_list("entry__query", "helpful")) == [("vacuun", False)]
    notice.locator("a.search-instead").click()
    page.wait_for_url("**exact=1**")
    assert page.locator(".notice.corrected").count() == 0
    assert "No matches for “vacuun”" in page.locator("#results").inner_text()


def test_a_saved_search_marks_its_new_results(live_server, make_user, login, notes, shot):
    collection, folder = notes
    make_user("mia")
    page = login("mia")
    page.goto(f"{live_server.url}/?q=vacuum")
    form = page.locator("form.save-search")
    form.locator("input[name=name]").fill("weekly vacuum")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/saved/")
    page.locator("table.saved-searches a", has_text="weekly vacuum").click()
    assert "2 new" in page.locator(".new-count").inner_text()

    (folder / "delta.md").write_text("# Delta\n\nvacuum freeze\n")
    from indexing.services.scanning import collection_index

    collection_index(collection)
    page.goto(f"{live_server.url}/saved/")
    page.locator("table.saved-searches a", has_text="weekly vacuum").click()
    assert "1 new" in page.locator(".new-count").inner_text()
    new = page.locator(".result.new")
    assert new.count() == 1 and "Delta" in new.inner_text()
    shot(page, "people-3-saved-new")


def test_the_searches_page_shows_what_nobody_found_to_staff_only(live_server, make_user, login, notes, shot):
    make_user("mia"), make_user("noa"), make_user("boss", staff=True)
    mia = login("mia")
    mia.goto(f"{live_server.url}/?q=quasarwidget")
    mia.locator("#results .state.empty").wait_for()

    boss = login("boss")
    boss.goto(f"{live_server.url}/status/searches/")
    gaps = boss.locator("section.searches", has_text="No results")
    assert "quasarwidget" in gaps.inner_text()
    shot(boss, "people-4-searches-staff")

    noa = login("noa")
    noa.goto(f"{live_server.url}/status/searches/")
    assert "Your searches" in noa.content() and "quasarwidget" not in noa.content()
