"""What a note holds cannot act on the reader's tools: no CSV cell starts like a spreadsheet formula,
and no title, snippet, path or body reaches a terminal as control characters (search.formatters)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from search.formatters import csv_cell, format_response, terminal_text
from search.results import SearchResponse, SearchResult

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # sets the clipboard
OSC8 = "\x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\"  # a hidden link
CLEAR = "\x1b[2J\x1b[H"
CSI_C1 = "\x9b2J"  # clear screen, as one C1 character
HOSTILE = f"Title{OSC52}{CLEAR}{CSI_C1}"


@pytest.mark.parametrize(
    "cell, shown",
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        (3, "3"),
        (None, ""),
    ],
)
def test_csv_cells_that_start_like_a_formula_get_a_quote(cell, shown):
    assert csv_cell(cell) == shown


def test_search_csv_and_files_neutralise_formulas():
    response = SearchResponse(
        query="x",
        mode="search",
        results=[
            SearchResult(
                docid="abc123",
                collection="notes",
                path="=cmd.md",
                title='=HYPERLINK("http://evil","click")',
                score=0.5,
                line=1,
                snippet="-2+3",
                context=["@SUM(A1)"],
            )
        ],
    )
    rows = list(csv.reader(io.StringIO(format_response(response, "csv"))))
    assert rows[1][4] == '\'=HYPERLINK("http://evil","click")'
    assert rows[1][5] == "'@SUM(A1)" and rows[1][6] == "'-2+3"
    assert rows[1][2] == "pmd://notes/=cmd.md"  # starts with pmd://: as it is
    files = list(csv.reader(io.StringIO(format_response(response, "files"))))
    assert files[0][3] == "'@SUM(A1)"


@pytest.mark.parametrize(
    "text, shown",
    [
        (OSC52, "\\x1b]52;c;cm0gLXJmIH4=\\x07"),
        (CLEAR, "\\x1b[2J\\x1b[H"),
        (CSI_C1, "\\x9b2J"),
        ("line\r\nnext\ttab", "line\r\nnext\ttab"),  # line ends and tabs stay
        ("over\rwrite", "over\\x0dwrite"),  # a lone CR would overwrite the line
        ("é › 日本", "é › 日本"),
    ],
)
def test_terminal_text_shows_control_characters_instead_of_sending_them(text, shown):
    assert terminal_text(text) == shown


def test_the_cli_format_keeps_its_colours_and_shows_the_notes_controls():
    response = SearchResponse(
        query="x",
        mode="search",
        results=[
            SearchResult(
                docid="abc123",
                collection="notes",
                path=f"a{CLEAR}.md",
                title=HOSTILE,
                score=0.9,
                line=1,
                snippet=f"see {OSC8} now",
                highlights=[(0, 3)],
                context=[f"ctx{CSI_C1}"],
            )
        ],
    )
    for color in (False, True):
        text = format_response(response, "cli", color=color)
        assert OSC52 not in text and CLEAR not in text and "\x9b" not in text and "\x1b]8" not in text
        assert "\\x1b]52;c;" in text and "\\x9b2J" in text
    assert "\x1b[1;33msee\x1b[0m" in format_response(response, "cli", color=True)  # pmd's own highlight stays


def test_json_escapes_c1_controls_and_reads_back_the_same():
    response = SearchResponse(
        query="x",
        mode="search",
        results=[
            SearchResult(docid="abc123", collection="notes", path="a.md", title=HOSTILE, score=0.9, line=1, snippet="s")
        ],
    )
    text = format_response(response, "json")
    assert "\x9b" not in text and "\x1b" not in text
    assert json.loads(text)["results"][0]["title"] == HOSTILE


# --- the CLI, in-process and for a client on a terminal ------------------------------------------


@pytest.fixture
def hostile_collection(db, corpus_dir):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    (corpus_dir / "evil.md").write_text(
        f"---\ntags: [evil]\n---\n# =cmd|' /C calc'!A0 {OSC52}{CLEAR}\n\n"
        f"zebrafish text {OSC8} and {CSI_C1} more zebrafish\n\n@SUM(1) see [[README]].\n",
        encoding="utf-8",
    )
    collection = collection_create(path=corpus_dir, name="notes")
    collection_index(collection)
    return collection


def _assert_no_controls(text: str, *, colours: bool = False):
    """None of the note's sequences; without colours no ESC at all (with them, pmd's own styles)."""
    for sequence in ("\x1b]", "\x1b[2J", "\x1b[H", "\x9b", "\x07") if colours else ("\x1b", "\x9b", "\x07"):
        assert sequence not in text, repr(text[:500])


@pytest.mark.parametrize(
    "args",
    [
        ("search", "zebrafish"),
        ("search", "zebrafish", "--md"),
        ("search", "zebrafish", "--csv"),
        ("search", "zebrafish", "--xml"),
        ("search", "zebrafish", "--json"),
        ("ls", "notes"),
        ("links", "notes/evil.md"),
        ("get", "notes/evil.md"),
        ("multi-get", "notes/evil*"),
    ],
)
@pytest.mark.parametrize("colours", [False, True])
def test_no_cli_output_on_a_terminal_sends_a_notes_control_characters(
    run_cli, hostile_collection, monkeypatch, args, colours
):
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    monkeypatch.setenv("FORCE_COLOR" if colours else "NO_COLOR", "1")
    code, out, err = run_cli(*args)
    assert code == 0, err
    _assert_no_controls(out, colours=colours)
    _assert_no_controls(err, colours=colours)


def test_get_into_a_file_or_pipe_keeps_the_note_as_written(run_cli, hostile_collection):
    code, out, _ = run_cli("get", "notes/evil.md")
    assert code == 0 and OSC8 in out and CSI_C1 in out  # not a terminal: the bytes of the note


def test_links_csv_neutralises_formulas(run_cli, hostile_collection):
    code, out, _ = run_cli("backlinks", "notes/README.md", "--csv")
    assert code == 0
    rows = [row for row in csv.reader(io.StringIO(out))][1:]
    evil = [row for row in rows if row[1] == "pmd://notes/evil.md"]
    assert evil and evil[0][3].startswith("'=cmd|") and evil[0][5].startswith("'@SUM(1)")


def test_a_client_terminal_gets_the_same_clean_output(hostile_collection):
    """Client mode: the server prints for the client's terminal (its tty flag), through the same code."""
    from pmd_site.cli import build_parser, run_command
    from pmd_site.cli.local_server import CapturedStream
    from pmd_site.cli.output import ClientTerminal, install_client_streams, printing_for

    install_client_streams()
    for command in (["get", "notes/evil.md"], ["search", "zebrafish"], ["ls", "notes"]):
        chunks: list = []
        terminal = ClientTerminal(
            stdout=CapturedStream(b"o", chunks, encoding="utf-8", errors="strict", tty=True),
            stderr=CapturedStream(b"e", chunks, encoding="utf-8", errors="strict", tty=True),
            environ={"TERM": "xterm", "NO_COLOR": "1"},
        )
        with printing_for(terminal):
            assert run_command(build_parser(command[0]).parse_args(command), prepare=False) == 0
        printed = b"".join(data for _, data in chunks).decode()
        assert "zebrafish" in printed or "evil" in printed
        _assert_no_controls(printed)


def test_history_csv_neutralises_formulas():
    from types import SimpleNamespace

    from pmd_site.cli.history import _csv

    hit = SimpleNamespace(
        collection="notes",
        sha="a" * 40,
        date="2025-01-01",
        author="=evil",
        email="@x",
        score=0.5,
        title="-rm",
        files=[SimpleNamespace(path="+a.md")],
        diff="=1",
    )
    row = list(csv.reader(io.StringIO(_csv(SimpleNamespace(results=[hit]), diff=True))))[1]
    assert row[3:5] == ["'=evil", "'@x"] and row[6:] == ["'-rm", "'+a.md", "'=1"]
