"""Matches in converted files say where they are (page, slide, sheet) and their type, in every
face's shape; `type:pdf` filters by file type; `get report.pdf:p2` returns that page."""

from __future__ import annotations

import json

import pytest

from indexing.access import Access
from search.pipeline.dispatch import search_run
from search.request import Mode, SearchRequest
from tests.support.formats import formats_collection

GOOD = ("report.pdf", "deck.pptx", "inventory.xlsx", "notes.docx", "guide.html", "tides.epub")

pytestmark = pytest.mark.django_db


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    return formats_collection(
        tmp_path / "mixed",
        "mixed",
        GOOD,
        ["pdf", "pptx", "xlsx", "docx", "html", "epub"],
        monkeypatch,
        extra={"fog.md": "# Fog\n\nThe fog horn sounds every thirty seconds.\n"},
    )


def _search(query: str):
    return search_run(SearchRequest(query=query, mode=Mode.KEYWORD, access=Access.local_user()))


def test_a_match_names_its_page_slide_or_sheet_and_its_type(mixed, run_cli):
    pdf = next(r for r in _search("fog horn repaired").results if r.path == "report.pdf")
    assert (pdf.type, pdf.location, pdf.location_uri) == ("pdf", "page 2", "pmd://mixed/report.pdf#page=2")
    assert pdf.as_dict()["location_uri"] == "pmd://mixed/report.pdf#page=2" and "anchor" not in pdf.as_dict()
    assert "[page" not in pdf.snippet and "The fog horn was repaired in March." in pdf.snippet
    begin, end = pdf.highlights[0]
    assert pdf.snippet[begin:end].lower() in {"fog", "horn", "repaired"}
    slide = _search("lantern restoration").results[0]
    assert (slide.path, slide.location) == ("deck.pptx", "slide 2")
    sheet = _search("Harbour Optics").results[0]
    assert (sheet.path, sheet.location) == ("inventory.xlsx", "sheet Suppliers")
    note = next(r for r in _search("fog horn").results if r.path == "fog.md")
    assert (note.type, note.location, note.location_uri) == ("markdown", "", "")

    code, out, _ = run_cli("search", "fog horn repaired")
    assert code == 0 and "pmd://mixed/report.pdf#page=2" in out and "[pdf]" in out


def test_type_filter_keeps_one_file_type(mixed):
    assert {r.path for r in _search("fog type:pdf").results} == {"report.pdf"}
    assert {r.path for r in _search("fog -type:pdf").results} == {"fog.md"}
    assert {r.path for r in _search("fog type:markdown").results} == {"fog.md"}


def test_get_returns_one_page_and_ls_shows_the_type(mixed, run_cli):
    code, out, _ = run_cli("get", "report.pdf:p2")
    assert code == 0 and "The fog horn was repaired in March." in out and "Visitors" not in out
    code, out, _ = run_cli("get", "pmd://mixed/deck.pptx#slide=3")
    assert code == 0 and "Paint the gallery railing" in out and "lantern" not in out
    code, _, err = run_cli("get", "report.pdf:p9")
    assert code != 0 and "has no page 9" in err
    code, out, _ = run_cli("ls", "mixed", "--json")
    types = {row["uri"].rsplit("/", 1)[1]: row["type"] for row in json.loads(out)}
    assert types["report.pdf"] == "pdf" and types["fog.md"] == "markdown" and types["deck.pptx"] == "pptx"
