"""Sharing in a real browser: a private collection is invisible to another member until its
owner shares it with them from the collections page."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET_WORD = "zanzibarquux"


@pytest.fixture
def private_and_shared(corpus_copy, tmp_path, make_user, transactional_db):
    """`handbook` for everyone and `payroll`, private to the staff member `lead`."""
    from indexing.models import Collection
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    lead = make_user("lead", staff=True)
    payroll = tmp_path / "payroll"
    payroll.mkdir()
    (payroll / "salaries.md").write_text(f"# Salaries\n\nQuarterly salaries, code word {SECRET_WORD}.\n")
    for collection in (
        collection_create(path=corpus_copy, name="handbook"),
        collection_create(path=payroll, name="payroll", owner=lead, visibility=Collection.Visibility.PRIVATE),
    ):
        collection_index(collection)


def _search(page, url: str, query: str):
    page.goto(f"{url}/?q={query}&mode=keyword")
    page.locator("#results .result, #results .state").first.wait_for()
    return page.locator("#results").inner_text()


def test_a_private_collection_appears_for_a_member_once_shared(live_server, make_user, login, private_and_shared, shot):
    make_user("mia")
    member = login("mia")
    member.goto(f"{live_server.url}/collections/")
    table = member.locator("table.collections").inner_text()
    assert "handbook" in table and "payroll" not in table
    results = _search(member, live_server.url, "salaries")
    assert "No matches" in results and SECRET_WORD not in results
    assert "payroll" not in member.locator("select[name=collection]").inner_text()
    shot(member, "sharing-1-member-before")

    lead = login("lead")
    lead.goto(f"{live_server.url}/collections/")
    from indexing.models import Collection

    row = lead.locator(f"#sharing-{Collection.objects.get(name='payroll').pk}")  # under the collection's row
    assert "private" in row.locator(".who").inner_text()
    row.locator("summary", has_text="Share").click()
    row.locator("input[name=visibility][value=shared]").check()
    row.locator("select[name=users]").select_option("mia")
    shot(lead, "sharing-2-staff-shares")
    row.locator("button", has_text="Save sharing").click()
    row.locator(".badge.ok", has_text="saved").wait_for()  # the row's fragment, swapped in by htmx
    assert "people mia" in row.locator(".who").inner_text()
    shot(lead, "sharing-3-staff-shared")

    member.goto(f"{live_server.url}/collections/")
    assert "payroll" in member.locator("table.collections").inner_text()
    results = _search(member, live_server.url, "salaries")
    assert "payroll/salaries.md" in results
    assert "payroll" in member.locator("select[name=collection]").inner_text()
    member.locator("#results .result").first.click()
    member.wait_for_url(f"{live_server.url}/doc/payroll/salaries.md**")
    assert SECRET_WORD in member.locator(".doc-body").inner_text()
    shot(member, "sharing-4-member-after")
