"""Converted files in the web UI: results say their type and page, the document view shows the
page markers, and the original downloads (as an attachment) only for those who see the collection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from indexing.models import Collection
from tests.support.formats import FORMAT_FIXTURES as FIXTURES
from tests.support.formats import convert_once, formats_collection

pytestmark = pytest.mark.django_db


@pytest.fixture
def reports(tmp_path, monkeypatch):
    return formats_collection(
        tmp_path / "reports", "reports", ("report.pdf", "guide.html"), ["pdf", "html"], monkeypatch
    )


def test_results_and_document_view_name_the_page(member_client, reports):
    page = member_client.get("/", {"q": "fog horn repaired"}).content.decode()
    assert '<span class="type-label" title="file type">pdf</span>' in page
    assert "reports/report.pdf · page 2" in page
    view = member_client.get("/doc/reports/report.pdf").content.decode()
    assert '<span id="page=2">Page 2</span>' in view
    assert 'href="/original/reports/report.pdf" download>Original PDF</a>' in view


def test_a_type_facet_counts_the_results_of_each_type_and_filters_by_one(member_client, tmp_path, monkeypatch):
    import re

    formats_collection(
        tmp_path / "mixed",
        "mixed",
        ("report.pdf", "guide.html"),
        ["pdf", "html"],
        monkeypatch,
        extra={"keeper.md": "# Keeper\n\nThe lighthouse keeper logs the fog.\n"},
    )
    page = member_client.get("/", {"q": "lighthouse"}).content.decode()
    facets = dict(re.findall(r'data-type="(\w+)">\w+ <span class="count">(\d+)</span>', page))
    assert facets == {"markdown": "1", "pdf": "1"}
    link = re.search(r'<a class="tag facet" href="([^"]+)"[^>]*data-type="pdf"', page).group(1)
    assert link == "/?q=lighthouse+type%3Apdf"
    filtered = member_client.get("/", {"q": "lighthouse type:pdf"}).content.decode()
    assert "mixed/report.pdf" in filtered and "keeper.md" not in filtered
    assert 'data-type="pdf" aria-current="true">pdf <span class="count">1</span>' in filtered
    # Another type in place of the one asked for; a frontmatter field's `type:` stays.
    markdown = re.search(r'href="([^"]+)"[^>]*data-type="pdf"', filtered).group(1)
    assert markdown == "/?q=lighthouse+type%3Apdf"
    from pmd_site.web.views.search import type_search_url

    assert type_search_url("markdown", {"q": "fog type:pdf kind:note"}) == "/?q=fog+kind%3Anote+type%3Amarkdown"
    assert type_search_url("pdf", {"q": "fog type:meeting"}) == "/?q=fog+type%3Ameeting+type%3Apdf"


def test_the_original_downloads_as_an_attachment_with_a_safe_type(member_client, reports):
    response = member_client.get("/original/reports/report.pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'attachment; filename="report.pdf"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content == (FIXTURES / "report.pdf").read_bytes()
    html = member_client.get("/original/reports/guide.html")
    assert html["Content-Type"] == "application/octet-stream"  # never rendered as a page
    assert html["Content-Disposition"].startswith("attachment")


def test_the_original_is_not_found_for_those_who_do_not_see_the_collection(member_client, reports, tmp_path):
    assert member_client.get("/original/reports/missing.pdf").status_code == 404
    (Path(reports.root_path) / "unindexed.pdf").write_bytes(b"%PDF-")  # on disk but not a document
    assert member_client.get("/original/reports/unindexed.pdf").status_code == 404
    assert member_client.get("/original/reports/../../etc/passwd").status_code == 404
    Collection.objects.filter(pk=reports.pk).update(visibility=Collection.Visibility.PRIVATE)
    assert member_client.get("/original/reports/report.pdf").status_code == 404


def test_staff_add_a_collection_with_formats_in_the_form_and_the_api(
    staff, staff_client, tmp_path, settings, eager_tasks, monkeypatch
):
    from tests.support.factories import api_client

    convert_once(monkeypatch)
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    for name in ("web", "api"):
        (tmp_path / name).mkdir()
        shutil.copy(FIXTURES / "report.pdf", tmp_path / name / "report.pdf")
    form = staff_client.post(
        "/collections/add/",
        {
            "path": str(tmp_path / "web"),
            "name": "web",
            "formats": ["pdf"],
            "visibility": "everyone",
            "language": "auto",
        },
    )
    assert form.status_code == 302, form.content.decode()[:2000]
    assert Collection.objects.get(name="web").mask == "**/*.{md,pdf}"
    assert member_sees(staff_client, "web")
    created = api_client(staff).post(
        "/api/collections",
        {"path": str(tmp_path / "api"), "name": "api", "formats": ["pdf", "docx"]},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["collection"]["mask"] == "**/*.{md,pdf,docx}"
    both = staff_client.post(
        "/collections/add/",
        {
            "path": str(tmp_path / "web"),
            "name": "both",
            "mask": "**/*.md",
            "formats": ["pdf"],
            "visibility": "everyone",
            "language": "auto",
        },
    )
    assert both.status_code == 400 and "as a mask or as formats, not both" in both.content.decode()


def member_sees(client, collection: str) -> bool:
    return client.get(f"/doc/{collection}/report.pdf").status_code == 200


def test_staff_change_a_collections_formats_on_the_collections_page(
    staff_client, member_client, tmp_path, settings, eager_tasks, monkeypatch
):
    """The page says which files a collection left out; the row's form reads them (indexed again)."""
    from indexing.access import Access
    from indexing.models import Document
    from indexing.services.refresh import collection_add

    convert_once(monkeypatch)
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nkiwi\n")
    shutil.copy(FIXTURES / "report.pdf", tmp_path / "notes" / "report.pdf")
    collection_add(path=tmp_path / "notes", name="notes", index="job", access=Access.local_user())
    page = staff_client.get("/collections/").content.decode()
    assert "1 PDF not read" in page and 'action="/collections/notes/formats/"' in page
    assert 'action="/collections/notes/formats/"' not in member_client.get("/collections/").content.decode()
    saved = staff_client.post("/collections/notes/formats/", {"formats": ["pdf"]})
    assert saved.status_code == 302
    assert Collection.objects.get(name="notes").mask == "**/*.{md,pdf}"
    assert set(Document.objects.filter(collection__name="notes", active=True).values_list("path", flat=True)) == {
        "a.md",
        "report.pdf",
    }
    page = staff_client.get(saved["Location"]).content.decode()
    assert "notes reads **/*.{md,pdf} now; indexing started." in page and "not read" not in page
    assert member_client.post("/collections/notes/formats/", {"formats": []}).status_code in {302, 403}
    assert Collection.objects.get(name="notes").mask == "**/*.{md,pdf}"
