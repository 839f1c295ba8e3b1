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


def test_staff_see_the_files_a_collection_left_out_and_read_them_at_1280_and_390(
    chromium, live_server, make_user, login, tmp_path, shot, settings
):
    from indexing.access import Access
    from indexing.services.refresh import collection_add

    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nkiwi\n")
    shutil.copy(FORMAT_FIXTURES / "report.pdf", folder / "report.pdf")
    shutil.copy(FORMAT_FIXTURES / "guide.html", folder / "guide.html")
    collection_add(path=folder, name="notes", index="job", access=Access.local_user())
    make_user("ops", staff=True)
    page = login("ops")
    page.goto(f"{live_server.url}/collections/")
    formats = page.locator("details.formats")
    assert "1 HTML, 1 PDF not read" in formats.locator("summary").inner_text() or "1 PDF, 1 HTML not read" in (
        formats.locator("summary").inner_text()
    )
    shot(page, "formats-form-1280")
    phone = chromium.new_context(
        viewport={"width": 390, "height": 844}, storage_state=page.context.storage_state(), is_mobile=True
    )
    try:
        small = phone.new_page()
        small.goto(f"{live_server.url}/collections/")
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the collections page scrolls sideways on a phone ({width}px)"
        shot(small, "formats-form-390")
    finally:
        phone.close()
    formats.get_by_label("PDF").check()
    formats.get_by_label("HTML").check()
    formats.get_by_role("button", name="Save and reindex").click()
    page.wait_for_url(f"{live_server.url}/collections/?job=*")
    page.locator(".job.done").wait_for(timeout=30_000)
    page.goto(f"{live_server.url}/collections/")
    assert "not read" not in page.locator("details.formats summary").inner_text()
    assert page.locator("table.collections td.num").first.inner_text() == "3"
    shot(page, "formats-form-saved")
