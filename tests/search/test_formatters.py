import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from indexing.errors import UnknownFormat
from search.formatters import FORMATS, format_response
from search.results import SearchResponse, SearchResult


@pytest.fixture
def response():
    return SearchResponse(
        query="vector index",
        mode="search",
        results=[
            SearchResult(
                docid="abc123",
                collection="notes",
                path="meetings/standup.md",
                title="Standup",
                score=0.82,
                line=3,
                snippet="the vector index rollout\nnext line",
                highlights=[(4, 10), (11, 16)],
                context=["Team notes", "Meetings"],
            ),
            SearchResult(
                docid="def456",
                collection="notes",
                path="a, b.md",
                title='Quote "x" <y>',
                score=0.31,
                line=1,
                snippet="<vector> & co",
                highlights=[(1, 7)],
            ),
        ],
    )


def test_json_is_the_response_dict(response):
    data = json.loads(format_response(response, "json"))
    assert data["query"] == "vector index"
    first = data["results"][0]
    assert first["uri"] == "pmd://notes/meetings/standup.md" and first["line"] == 3
    assert first["highlights"] == [[4, 10], [11, 16]]


def test_csv_has_header_and_one_row_per_result(response):
    rows = list(csv.reader(io.StringIO(format_response(response, "csv"))))
    assert rows[0][:4] == ["docid", "score", "uri", "line"]
    assert rows[1][0] == "#abc123" and rows[1][2] == "pmd://notes/meetings/standup.md"
    assert rows[2][2] == "pmd://notes/a, b.md"
    assert len(rows) == 3


def test_files_format(response):
    lines = list(csv.reader(io.StringIO(format_response(response, "files"))))
    assert lines[0] == ["#abc123", "0.82", "pmd://notes/meetings/standup.md", "Team notes › Meetings"]
    assert lines[1][:3] == ["#def456", "0.31", "pmd://notes/a, b.md"]


def test_xml_is_well_formed_with_marks(response):
    root = ET.fromstring(format_response(response, "xml"))
    results = root.findall("result")
    assert len(results) == 2 and results[0].get("docid") == "#abc123"
    marks = [m.text for m in results[0].find("snippet").findall("mark")]
    assert marks == ["vector", "index"]
    assert results[1].find("title").text == 'Quote "x" <y>'
    assert results[1].find("snippet").find("mark").text == "vector"


def test_markdown_bolds_highlights_and_numbers_lines(response):
    text = format_response(response, "md", line_numbers=True)
    assert "## 1. Standup" in text
    assert "`pmd://notes/meetings/standup.md:3`" in text
    assert "> 3  the **vector** **index** rollout" in text
    assert "> 4  next line" in text


def test_cli_plain_and_colored(response):
    plain = format_response(response, "cli")
    assert "\x1b[" not in plain
    assert "pmd://notes/meetings/standup.md:3 #abc123" in plain and "82%" in plain and "31%" in plain
    colored = format_response(response, "cli", color=True)
    assert "\x1b[32m82%" in colored  # high score: green
    assert "\x1b[31m31%" in colored  # low score: red
    assert "\x1b[1;33mvector\x1b[0m" in colored


def test_cli_line_numbers_start_at_the_match_line(response):
    text = format_response(response, "cli", line_numbers=True)
    assert "3  the vector index rollout" in text and "4  next line" in text


def test_every_format_handles_empty_results():
    empty = SearchResponse(query="x", mode="search")
    for fmt in FORMATS:
        format_response(empty, fmt)
    assert json.loads(format_response(empty, "json"))["results"] == []
    assert format_response(empty, "files") == ""


def test_unknown_format():
    with pytest.raises(UnknownFormat):
        format_response(SearchResponse(query="x", mode="search"), "yaml")
