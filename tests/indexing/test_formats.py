"""Files that are not markdown: each format converted to markdown-like text with its structure,
bad files refused with a reason while the rest of the collection indexes, the text kept by the
file's hash (tests/fixtures/formats, written by its make_fixtures.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from indexing.convert import ConversionRefused, Limits, convert_here, format_of, formats_mask, location_at, unit_text
from indexing.convert.sandbox import Converter, SandboxLimits, convert_isolated
from indexing.errors import InvalidGlob

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
SMALL = Limits(max_pages=10, max_unzipped_bytes=1024 * 1024, ocr="off")


def _markdown(name: str) -> str:
    return convert_here(format_of(name), (FIXTURES / name).read_bytes(), SMALL).markdown()


def test_pdf_pages_are_marked_and_its_properties_become_frontmatter():
    text = _markdown("report.pdf")
    assert text.startswith('---\ntitle: "Lighthouse report"\ntags: ["lighthouse", "annual"]\ndate: "2023-04-12"\n---')
    assert "[page 2]\n\nThe fog horn was repaired in March." in text
    assert location_at(text, text[: text.index("fog horn")].count("\n") + 1).anchor == "page=2"
    assert unit_text(text, "page", "3") == "[page 3]\n\nVisitors climbed the tower 4,812 times.\n"


def test_docx_keeps_headings_lists_and_tables():
    text = _markdown("notes.docx")
    assert "# Quarterly field report" in text and "## Counts" in text
    assert "- Herons\n\n- Egrets" in text
    assert "| Species | Nests |\n|---|---|\n| Grey heron | 40 |" in text
    assert 'tags: ["fieldwork", "reports"]' in text


def test_pptx_marks_slides_with_their_titles():
    text = _markdown("deck.pptx")
    assert "[slide 2]\n\n## Budget\n\nThe lantern restoration costs twelve thousand euros" in text
    assert text.count("Budget") == 1  # the title once, not again as a text frame


def test_xlsx_sheets_are_bounded_tables():
    text = _markdown("inventory.xlsx")
    assert "[sheet Inventory]\n\n## Inventory\n\n| Item | Count |\n|---|---|\n| Brass telescope | 3 |" in text
    assert "[sheet Suppliers]" in text
    cut = convert_here("xlsx", (FIXTURES / "inventory.xlsx").read_bytes(), Limits(max_cells=3))
    assert "Signal lamp" not in cut.text and "cut after 3 cells" in cut.warnings[0]


def test_html_leaves_out_scripts_and_navigation():
    text = _markdown("guide.html")
    assert "# Harbour guide\n\nMoorings are free for the first two nights." in text
    assert "| Dinghy | 5 |" in text and "1. Call the harbour master\n2. Pick a berth" in text
    assert "tracking" not in text and "Home" not in text


def test_epub_chapters_in_reading_order():
    text = _markdown("tides.epub")
    assert text.index("Spring tides") < text.index("Neap tides")
    assert "[chapter 2]\n\n# Neap tides\n\n- Smaller range\n- Quarter moons" in text
    assert 'title: "The Tide Tables"' in text


def test_long_pdf_is_read_up_to_the_page_cap_with_a_warning():
    converted = convert_here("pdf", (FIXTURES / "long.pdf").read_bytes(), SMALL)
    assert converted.units == 10 and "[page 11]" not in converted.text
    assert converted.warnings == ["30 pages: only the first 10 read (PMD_CONVERT_MAX_PAGES)"]


@pytest.mark.parametrize(
    "name, reason",
    [
        ("encrypted.pdf", "password-protected (encrypted) PDF"),
        ("scan.pdf", "no text layer on any of its 1 page(s) (a scan?): OCR is off (PMD_OCR=off)"),
        ("scanned-text.pdf", "no text layer on any of its 1 page(s) (a scan?): OCR is off (PMD_OCR=off)"),
        ("not-really.pdf", "not a readable PDF"),
        ("broken.docx", "not a DOCX file (broken or wrong extension"),
        ("bomb.docx", "unpacks to 5,242,888 bytes, over the 1,048,576-byte limit"),
        ("protected.docx", "password-protected (encrypted) or an old binary Office file"),
    ],
)
def test_bad_files_are_refused_with_their_reason(name, reason):
    with pytest.raises(ConversionRefused) as refused:
        convert_here(format_of(name), (FIXTURES / name).read_bytes(), SMALL)
    assert reason in str(refused.value)


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed (OCR)")
def test_ocr_reads_a_scanned_page_when_tesseract_is_installed():
    converted = convert_here("pdf", (FIXTURES / "scanned-text.pdf").read_bytes(), Limits(ocr="auto"))
    assert "THE KEEPER LOGS THE TIDES" in converted.text
    assert converted.warnings == ["1 of 1 page(s) read by OCR (tesseract)"]
    with pytest.raises(ConversionRefused, match="OCR found no text either"):
        convert_here("pdf", (FIXTURES / "scan.pdf").read_bytes(), Limits(ocr="auto"))


def test_the_child_process_converts_and_is_stopped_at_its_time_limit():
    done = convert_isolated("pdf", (FIXTURES / "report.pdf").read_bytes(), SandboxLimits(limits=SMALL))
    assert done.units == 3 and "[page 3]" in done.text and done.peak_mb > 0
    with pytest.raises(ConversionRefused, match=r"took more than 0.01 s \(PMD_CONVERT_SECONDS\): stopped"):
        convert_isolated("pdf", (FIXTURES / "report.pdf").read_bytes(), SandboxLimits(seconds=0.01))


def test_the_child_process_memory_limit_stops_a_file_that_swells():
    swollen = b"<p>" + b"word " * (2 * 1024 * 1024)  # 10 MB of HTML under a limit the child is already over
    with pytest.raises(ConversionRefused, match="memory"):
        convert_isolated("html", swollen, SandboxLimits(memory_mb=1))


def test_one_child_converts_file_after_file_and_a_new_one_follows_a_dead_one():
    with Converter(SandboxLimits(limits=SMALL)) as converter:
        first = converter.convert("pdf", (FIXTURES / "report.pdf").read_bytes())
        child = converter.process
        with pytest.raises(ConversionRefused, match="password-protected"):
            converter.convert("pdf", (FIXTURES / "encrypted.pdf").read_bytes())
        assert converter.convert("docx", (FIXTURES / "notes.docx").read_bytes()).units == 1
        assert converter.process is child  # a refusal is an answer: the same child goes on
        child.kill()
        child.wait()
        assert converter.convert("pdf", (FIXTURES / "report.pdf").read_bytes()).text == first.text
        assert converter.process is not child


def test_formats_make_a_mask():
    assert formats_mask("pdf,docx") == "**/*.{md,pdf,docx}"
    assert formats_mask(["text"]) == "**/*.{md,txt,text,rst,org}"
    with pytest.raises(InvalidGlob, match="unknown format 'odt'"):
        formats_mask("pdf,odt")


# --- In a collection ------------------------------------------------------------------------


@pytest.fixture
def formats_dir(tmp_path) -> Path:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for path in FIXTURES.iterdir():
        if path.suffix != ".py":
            shutil.copy(path, folder / path.name)
    (folder / "index.md").write_text("# Index\n\nSee the report.\n")
    return folder


@pytest.mark.django_db
def test_a_collection_reads_the_formats_its_mask_selects_and_lists_bad_files(
    formats_dir, settings, monkeypatch, tmp_path
):
    import shutil

    from indexing.convert.sandbox import Converter
    from indexing.models import Document, Extraction, FileProblem
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    settings.PMD_CONVERT_MAX_UNZIPPED_BYTES = 1024 * 1024
    settings.PMD_CONVERT_MAX_PAGES = 10
    settings.PMD_OCR = "off"
    calls = []
    real = Converter.convert
    monkeypatch.setattr(Converter, "convert", lambda self, fmt, data: calls.append(fmt) or real(self, fmt, data))

    markdown_only = collection_create(path=formats_dir, name="md-only")
    first = collection_index(markdown_only)
    assert first.added == 1  # the default mask: markdown as before, and what it left out is said
    assert first.not_read_line() == "15 files not read: 6 PDF, 4 DOCX, 1 EPUB, 1 HTML, 1 PPTX, 1 text, 1 XLSX"

    shutil.copytree(formats_dir, tmp_path / "all-formats")  # a folder is one collection
    mixed = collection_create(
        path=tmp_path / "all-formats", name="mixed", formats=["pdf", "docx", "pptx", "xlsx", "html", "epub", "text"]
    )
    assert mixed.mask == "**/*.{md,pdf,docx,pptx,xlsx,xlsm,html,htm,xhtml,epub,txt,text,rst,org}"
    report = collection_index(mixed)
    paths = set(Document.objects.filter(collection=mixed, active=True).values_list("path", flat=True))
    assert paths == {
        "index.md",
        "report.pdf",
        "long.pdf",
        "notes.docx",
        "deck.pptx",
        "inventory.xlsx",
        "guide.html",
        "tides.epub",
        "plain.txt",
    }
    problems = dict(FileProblem.objects.filter(collection=mixed).values_list("path", "message"))
    assert problems["encrypted.pdf"] == "password-protected (encrypted) PDF: skipped"
    assert problems["scan.pdf"].startswith("no text layer")
    assert "zip bomb" in problems["bomb.docx"] and "not a DOCX file" in problems["broken.docx"]
    assert problems["long.pdf"] == "30 pages: only the first 10 read (PMD_CONVERT_MAX_PAGES)"
    assert problems["scanned-text.pdf"].endswith("OCR is off (PMD_OCR=off): skipped")
    assert report.skipped == 7
    report_pdf = Document.objects.get(collection=mixed, path="report.pdf")
    assert report_pdf.title == "Lighthouse report" and sorted(report_pdf.tags) == ["annual", "lighthouse"]
    assert report_pdf.note_date.year == 2023
    converted = len(calls)
    assert converted == 14 and Extraction.objects.count() == 14

    # Touched but unchanged, or copied: read from the stored text; refusals too are not tried again.
    os.utime(tmp_path / "all-formats" / "report.pdf", (1, 1))
    shutil.copy(tmp_path / "all-formats" / "deck.pptx", tmp_path / "all-formats" / "deck-copy.pptx")
    again = collection_index(mixed)
    assert len(calls) == converted and again.added == 1 and again.unchanged == 9
    assert (
        Document.objects.get(collection=mixed, path="deck-copy.pptx").content_id
        == Document.objects.get(collection=mixed, path="deck.pptx").content_id
    )


@pytest.mark.django_db
def test_formats_and_a_mask_are_one_or_the_other(formats_dir):
    from indexing.services.collections import collection_create

    with pytest.raises(InvalidGlob, match="as a mask or as formats, not both"):
        collection_create(path=formats_dir, name="both", mask="**/*.md", formats=["pdf"])


# --- Progress while a long file is converted ------------------------------------------------


def test_the_child_reports_the_pages_of_a_long_file_as_it_reads_them():
    seen = []
    sandbox = SandboxLimits(limits=SMALL, progress_seconds=0)
    with Converter(sandbox, on_units=lambda read, units: seen.append((read, units))) as converter:
        done = converter.convert("pdf", (FIXTURES / "long.pdf").read_bytes())
    assert done.units == 10 and seen == [(n, 10) for n in range(1, 11)]


@pytest.mark.django_db
def test_an_index_jobs_progress_names_the_file_being_converted_and_its_page(tmp_path, settings, monkeypatch):
    from indexing.access import Access
    from indexing.models import Job
    from indexing.selectors import index_jobs_running
    from indexing.services import converting
    from indexing.services.collections import collection_create
    from indexing.services.jobs import JobProgress, job_create, job_finish, job_start
    from indexing.services.scanning import collection_index

    settings.PMD_CONVERT_MAX_PAGES = 10
    settings.PMD_OCR = "off"
    monkeypatch.setattr(converting, "PROGRESS_SECONDS", 0)
    (tmp_path / "docs").mkdir()
    shutil.copy(FIXTURES / "long.pdf", tmp_path / "docs" / "long.pdf")
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    collection = collection_create(path=tmp_path / "docs", name="docs", formats=["pdf"])
    job = job_create(kind=Job.Kind.INDEX, collection=collection)
    job_start(job)
    messages = []
    writes = JobProgress(job, interval=0)

    def progress(done, total, message=""):
        messages.append(message)
        writes(done, total, message)

    collection_index(collection, progress=progress)
    assert [m for m in messages if m.startswith("converting")] == [
        f"converting long.pdf (2 of 2 files, {n} of 10 pages)" for n in range(1, 11)
    ]
    job.refresh_from_db()
    assert job.message == "converting long.pdf (2 of 2 files, 10 of 10 pages)"  # what the job row shows
    assert index_jobs_running(access=Access.local_user()) == [
        {"collection": "docs", "done": 2, "total": 2, "message": job.message}
    ]  # and `pmd status`
    job_finish(job)


# --- Stored conversions no document reads any more ------------------------------------------


@pytest.mark.django_db
def test_conversions_no_document_reads_any_more_are_deleted(tmp_path, settings):
    from datetime import timedelta

    from django.utils import timezone

    from indexing.models import Document, Extraction
    from indexing.services.collections import collection_create
    from indexing.services.maintenance import index_cleanup
    from indexing.services.scanning import collection_index

    settings.PMD_CONVERT_MAX_PAGES = 10
    settings.PMD_OCR = "off"
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        shutil.copy(FIXTURES / "deck.pptx", folder / "deck.pptx")
    shutil.copy(FIXTURES / "report.pdf", first / "report.pdf")
    shutil.copy(FIXTURES / "encrypted.pdf", first / "encrypted.pdf")
    a = collection_create(path=first, name="first", formats=["pdf", "pptx"])
    b = collection_create(path=second, name="second", formats=["pptx"])
    collection_index(a)
    collection_index(b)
    report_key = Document.objects.get(collection=a, path="report.pdf").extraction_key
    deck_key = Document.objects.get(collection=a, path="deck.pptx").extraction_key
    assert deck_key == Document.objects.get(collection=b, path="deck.pptx").extraction_key
    assert Extraction.objects.count() == 3  # report, deck (once for both), the refused encrypted.pdf

    # The file changed: its old conversion goes on that scan, the new one is kept.
    shutil.copy(FIXTURES / "long.pdf", first / "report.pdf")
    collection_index(a)
    new_key = Document.objects.get(collection=a, path="report.pdf").extraction_key
    assert new_key != report_key
    assert not Extraction.objects.filter(key=report_key).exists() and Extraction.objects.filter(key=new_key).exists()

    # Gone from one collection, the deck is still read in the other; gone from both, its text goes.
    (first / "deck.pptx").unlink()
    collection_index(a)
    assert Extraction.objects.filter(key=deck_key).exists()
    (second / "deck.pptx").unlink()
    collection_index(b)
    assert not Extraction.objects.filter(key=deck_key).exists()

    # Maintenance: any conversion no active document reads; a refusal only once it is old.
    Extraction.objects.create(key="0" * 64 + ":pdf:1", text="[page 1]\n\nstray")
    refusal = Extraction.objects.get(refused__startswith="password")
    assert index_cleanup(clear_llm_cache=False, vacuum=False).unused_extractions == 1
    assert set(Extraction.objects.values_list("key", flat=True)) == {new_key, refusal.key}
    Extraction.objects.filter(key=refusal.key).update(created_at=timezone.now() - timedelta(days=31))
    assert index_cleanup(clear_llm_cache=False, vacuum=False).unused_extractions == 1
    assert list(Extraction.objects.values_list("key", flat=True)) == [new_key]


def test_a_word_broken_at_a_line_end_is_joined_unless_the_document_writes_it_hyphenated():
    from indexing.convert.pdf import Vocabulary, page_text

    # Lines of Debian's valgrind, nettle, docbook-xsl and zlib manuals as PDFium reads them: a hyphen
    # at a line's end is \x02 with the break dropped (or, rarely, "-" before the break).
    pages = [
        "you can give the option --soname\x02synonyms=somalloc",
        "see --soname-synonyms below. Encrypts the plain\x02text from src; the plaintext is",
        'the path of very rapidly diminish\x02ing return. Name="padding\x02start", the padding at the start',
        "a 32-\nbit word; GOST R 34.11-\n2012; De\x02scription",
    ]
    vocabulary = Vocabulary(pages)
    text = "\n".join(page_text(page, vocabulary) for page in pages)
    assert "--soname-synonyms=somalloc" in text  # written hyphenated elsewhere
    assert "the plaintext from src" in text  # written as one word elsewhere
    assert "diminishing return" in text  # neither: "ing" is no word of it
    assert 'Name="padding-start"' in text  # neither, but both halves are words of it
    assert "32-bit word" in text and "34.11-2012" in text and "Description" in text
    assert page_text("an ev\x02ery word") == "an every word"  # a page alone is its own vocabulary
