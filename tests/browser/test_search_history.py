"""Back and Forward on the search page: the box holds the words of the results shown, and clearing
the box adds no history entry."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HELP = Path(__file__).resolve().parents[1] / "fixtures" / "real_vaults" / "help"


@pytest.fixture
def searched(tmp_path, make_user, login, live_server):
    from indexing.access import Access
    from indexing.services.refresh import collection_add

    shutil.copytree(HELP, tmp_path / "help")
    collection_add(path=tmp_path / "help", name="help", access=Access.local_user())
    make_user("ana")
    return login("ana")


def _search(page, words: str) -> None:
    page.locator("#q").fill(words)
    page.wait_for_url(re.compile(r"q=" + re.escape(words).replace(r"\ ", r"(?:\+|%20)")))
    page.locator("#search-state").wait_for(state="attached")
    page.wait_for_function(f"() => document.querySelector('#search-state').dataset.query === {words!r}")


def _shown(page) -> tuple[str, str]:
    """(the words in the box, the words the results are for)."""
    return page.locator("#q").input_value(), page.locator("#search-state").get_attribute("data-query")


def test_back_and_forward_show_the_words_of_the_results(searched):
    page = searched
    _search(page, "themes")
    _search(page, "readable line")
    page.go_back()
    page.wait_for_url(re.compile(r"q=themes"))
    page.wait_for_function("() => document.querySelector('#search-state').dataset.query === 'themes'")
    assert _shown(page) == ("themes", "themes")
    page.go_forward()
    page.wait_for_url(re.compile(r"q=readable(?:\+|%20)line"))
    page.wait_for_function("() => document.querySelector('#q').value === 'readable line'")
    assert _shown(page) == ("readable line", "readable line")


def test_clearing_the_box_adds_no_history_entry(searched, live_server):
    page = searched
    _search(page, "themes")
    entries = page.evaluate("history.length")
    page.locator("#q").fill("")
    page.wait_for_url(f"{live_server.url}/")
    page.locator(".state.hint").wait_for()
    assert page.evaluate("history.length") == entries
    page.go_back()  # the page before the search, not the search again
    assert "q=themes" not in page.url
