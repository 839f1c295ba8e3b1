"""A PDF in a real browser: a member finds the page that answers, opens the document at its page
markers and downloads the original; a member who does not see the collection gets a 404."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.formats import FORMAT_FIXTURES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def reports(tmp_path, make_user, transactional_db):
    """`reports`, holding report.pdf, shared by its owner `lead` with `mia` only."""
    from indexing.access import Access
    from indexing.models import Collection
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index
    from indexing.services.sharing import collection_share

    lead = make_user("lead", staff=True)
    mia = make_user("mia")
    make_user("bo")
    folder = tmp_path / "reports"
    folder.mkdir()
    shutil.copy(FORMAT_FIXTURES / "report.pdf", folder / "report.pdf")
    collection = collection_create(
        path=folder, name="reports", formats=["pdf"], owner=lead, visibility=Collection.Visibility.PRIVATE
    )
    collection_index(collection)
    collection_share(name="reports", access=Access.for_user(lead), visibility="shared", users=[mia.username])
    return collection


def test_a_member_finds_the_page_and_downloads_the_pdf_another_gets_404(live_server, login, reports, shot):
    mia = login("mia")
    mia.goto(f"{live_server.url}/?q=fog+horn+repaired&mode=keyword")
    result = mia.locator("#results .result").first
    result.wait_for()
    assert (
        "reports/report.pdf · page 2" in result.inner_text()
        and result.locator(".type-label").inner_text().lower() == "pdf"
    )
    result.locator("a.title").click()
    mia.locator(".unit-marker").first.wait_for()
    assert [m.inner_text() for m in mia.locator(".unit-marker").all()] == ["Page 1", "Page 2", "Page 3"]
    shot(mia, "formats-pdf-document")
    with mia.expect_download() as download:
        mia.locator("a", has_text="Original PDF").click()
    assert download.value.suggested_filename == "report.pdf"
    assert Path(download.value.path()).read_bytes() == (FORMAT_FIXTURES / "report.pdf").read_bytes()

    bo = login("bo")
    response = bo.request.get(f"{live_server.url}/original/reports/report.pdf")
    assert response.status == 404
