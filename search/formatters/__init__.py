"""Rendering every answer pmd gives, for every face: one registry keyed by (result type, format).

Result types: search (search.results.SearchResponse), history (search.retrieval.history.HistoryResponse),
links and backlinks (indexing.links.DocumentLinks), related (search.retrieval.related), explain (a
SearchResponse's score breakdown), and the MCP-only document, documents and status. Formats: cli,
json, csv, md, xml, files, and mcp (the compact text an MCP tool returns next to its structured
content, read by a model: few tokens). `render(type, format, value, **options)` is the one entry.

Every renderer is a pure function of the value (no database access), and they share three writers:
- terminal text (`terminal_text`): text pmd did not write never reaches a terminal as control
  characters; the `cli` renderers of history, links, backlinks and related return console markup
  (rich) with every value escaped (`markup_text`), which the CLI's console prints cleaned;
- CSV (`csv_writer`): no cell starts like a spreadsheet formula;
- XML (`XmlWriter`): escaped, without the control characters XML 1.0 forbids.
"""

from __future__ import annotations

# Each format module registers its renderers when imported.
from search.formatters import ask, documents, explain, history, links, related, search  # noqa: F401 - registered on import
from search.formatters.registry import (
    FORMATS,
    MACHINE_FORMATS,
    MCP,
    RENDERERS,
    XmlWriter,
    as_json,
    csv_cell,
    csv_text,
    csv_writer,
    format_response,
    json_text,
    markup_line,
    markup_text,
    render,
    renders,
    terminal_text,
    xml_text,
)
from search.formatters.search import (  # the web UI and the CLI use these
    SCORE_HIGH,
    SCORE_MID,
    date_text,
    highlight_spans,
    location,
    marked,
    numbered_lines,
    percent,
    score_color,
    shows_dates,
)

__all__ = [
    "FORMATS",
    "MACHINE_FORMATS",
    "MCP",
    "RENDERERS",
    "SCORE_HIGH",
    "SCORE_MID",
    "XmlWriter",
    "as_json",
    "csv_cell",
    "csv_text",
    "csv_writer",
    "date_text",
    "format_response",
    "highlight_spans",
    "json_text",
    "location",
    "marked",
    "markup_line",
    "markup_text",
    "numbered_lines",
    "percent",
    "render",
    "renders",
    "score_color",
    "shows_dates",
    "terminal_text",
    "xml_text",
]
