"""Rendering a SearchResponse: one module for the CLI, the API and the MCP tools.

Every format is a pure function of the response (no database access), so each adapter
shows the same thing. Conventions shared by all formats:

- a result's snippet starts at `result.line`, so `--line-numbers` numbers snippet lines
  from there and the location is written `pmd://collection/path:LINE`;
- scores are 0..1; the CLI shows them as percentages coloured by SCORE_HIGH / SCORE_MID;
- highlights are [start, end) offsets into the snippet: ANSI bold in the CLI, `**…**`
  in markdown, `<mark>` in XML, raw offsets in JSON;
- text a note or a user wrote never reaches a terminal as control characters (`terminal_text`),
  and no CSV cell pmd writes starts like a spreadsheet formula (`csv_writer`).
"""

from __future__ import annotations

import csv
import io
import json
import re

from indexing.errors import UnknownFormat
from search.request import mode_verb
from search.results import SearchResponse, SearchResult

FORMATS = ("cli", "json", "csv", "md", "xml", "files")
MACHINE_FORMATS = frozenset({"json", "files"})  # get the bigger default limit (see SearchRequest)
SCORE_HIGH = 0.7
SCORE_MID = 0.4

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_DIM = "\x1b[2m"
_GREEN = "\x1b[32m"
_YELLOW = "\x1b[33m"
_RED = "\x1b[31m"
_CYAN = "\x1b[36m"
_MARK = "\x1b[1;33m"


# C0 controls but tab and newline (CR only before a newline), DEL and C1 (CSI is 0x9b): what
# could move the cursor, clear the screen, set the clipboard (OSC 52) or hide a link (OSC 8).
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
_JSON_UNESCAPED_CONTROLS = re.compile("[\x7f-\x9f]")  # json.dumps escapes only those below 0x20
# How a CSV cell starts when a spreadsheet would read it as a formula (OWASP's list).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def terminal_text(text: str) -> str:
    """Text pmd did not write (a title, a snippet, a path), safe on a terminal: each control
    character is shown as `\\x1b`, not obeyed."""
    return _TERMINAL_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def json_text(data) -> str:
    """`data` as pmd's JSON output; DEL and C1 controls escaped too (`\\u009b`), so even JSON read
    on a terminal obeys none. The same JSON value as json.dumps gives."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    return _JSON_UNESCAPED_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def csv_cell(value) -> str:
    """A cell as text a spreadsheet shows as written: one that starts like a formula (`=`, `+`,
    `-`, `@`, tab, CR) gets a leading `'`, as OWASP recommends against formula injection."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


class _CsvWriter:
    def __init__(self, buf):
        self._writer = csv.writer(buf, lineterminator="\n")

    def writerow(self, row) -> None:
        self._writer.writerow([csv_cell(cell) for cell in row])


def csv_writer(buf) -> _CsvWriter:
    """The one CSV writer of pmd's outputs (search, links, history): every cell through `csv_cell`."""
    return _CsvWriter(buf)


def format_response(
    response: SearchResponse,
    fmt: str = "cli",
    *,
    color: bool = False,
    line_numbers: bool = False,
    full: bool = False,
) -> str:
    """The response as text in `fmt` (one of FORMATS); ends with a newline unless empty."""
    try:
        render = _RENDERERS[fmt]
    except KeyError:
        raise UnknownFormat(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})") from None
    return render(response, color=color, line_numbers=line_numbers, full=full)


def score_color(score: float) -> str:
    if score >= SCORE_HIGH:
        return _GREEN
    if score >= SCORE_MID:
        return _YELLOW
    return _RED


def percent(score: float) -> str:
    return f"{round(max(0.0, min(1.0, score)) * 100):d}%"


def location(result: SearchResult) -> str:
    return f"{result.uri}:{result.line}" if result.line else result.uri


def shows_dates(response: SearchResponse) -> bool:
    """Dates are shown (CLI, markdown, XML) when they decided something: a date filter or sort."""
    return response.sort == "date" or bool(response.filters is not None and response.filters.dated)


def date_text(result: SearchResult) -> str:
    """`2025-03-14 (frontmatter:date)`, or `2025-03-14 10:30 (mtime)`; '' without a date."""
    if not result.date:
        return ""
    day = result.date[:10] if result.date[10:19] in ("", "T00:00:00") else result.date[:16].replace("T", " ")
    return f"{day} ({result.date_source})" if result.date_source else day


def highlight_spans(text: str, highlights) -> list[tuple[int, int]]:
    """[start, end) highlight ranges clipped to `text`, sorted, empty ones dropped, overlapping ones merged."""
    spans: list[tuple[int, int]] = []
    for start, end in sorted((max(0, int(s)), min(len(text), int(e))) for s, e in highlights or []):
        if end <= start:
            continue
        if spans and start < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def marked(text: str, highlights, before: str, after: str, *, escape=lambda piece: piece) -> str:
    """`text` with each highlight range wrapped in before…after (ANSI, `**`, `<mark>`); `escape`
    is applied to the text pieces (the web UI passes HTML escaping)."""
    out, pos = [], 0
    for start, end in highlight_spans(text, highlights):
        out.append(escape(text[pos:start]))
        out.append(before + escape(text[start:end]) + after)
        pos = end
    out.append(escape(text[pos:]))
    return "".join(out)


def numbered_lines(lines: list[str], first: int, *, width: int | None = None, dim: str = "", reset: str = "") -> list[str]:
    """`lines` prefixed with their numbers from `first`, right-aligned to the widest (or `width`)."""
    width = width or len(str(first + len(lines) - 1))
    return [f"{dim}{n:>{width}}{reset}  {line}" for n, line in enumerate(lines, start=first)]


def _numbered(text: str, first: int, *, color: bool = False) -> str:
    dim, reset = (_DIM, _RESET) if color else ("", "")
    return "\n".join(numbered_lines(text.split("\n"), first, dim=dim, reset=reset))


# --- cli -----------------------------------------------------------------------------

def _cli(response: SearchResponse, *, color: bool, line_numbers: bool, full: bool) -> str:
    if not response.results:
        return ""
    blocks = []
    dated = shows_dates(response)
    safe = terminal_text  # the notes' own text: shown, never obeyed by the terminal
    for r in response.results:
        c = (lambda code: code) if color else (lambda code: "")
        head = f"{c(_CYAN)}{safe(location(r))}{c(_RESET)} {c(_DIM)}#{r.docid}{c(_RESET)}"
        lines = [head]
        if r.title:
            lines.append(f"{c(_BOLD)}{safe(r.title)}{c(_RESET)}")
        if r.context:
            lines.append(f"{c(_DIM)}context: {safe(' › '.join(r.context))}{c(_RESET)}")
        if dated:
            lines.append(f"date: {safe(date_text(r)) or 'none'}")
        if "filter" not in r.scores:  # a filter-only list has no relevance to show
            lines.append(f"score: {c(score_color(r.score))}{percent(r.score)}{c(_RESET)}")
        if full and r.body is not None:
            text = _numbered(safe(r.body), 1, color=color) if line_numbers else safe(r.body)
        else:
            text = marked(r.snippet, r.highlights, _MARK, _RESET, escape=safe) if color else safe(r.snippet)
            if line_numbers and text:
                text = _numbered(text, r.line or 1, color=color)
        if text:
            lines.append("")
            lines.append(text)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


# --- json ----------------------------------------------------------------------------

def _json(response: SearchResponse, *, color: bool, line_numbers: bool, full: bool) -> str:
    return json_text(response.as_dict()) + "\n"


# --- csv -----------------------------------------------------------------------------

def _csv(response: SearchResponse, *, color: bool, line_numbers: bool, full: bool) -> str:
    buf = io.StringIO()
    writer = csv_writer(buf)
    header = ["docid", "score", "uri", "line", "title", "context", "snippet"]
    if full:
        header.append("body")
    writer.writerow(header)
    for r in response.results:
        row = [f"#{r.docid}", f"{r.score:.4f}", r.uri, r.line, r.title, " › ".join(r.context), r.snippet]
        if full:
            row.append(r.body or "")
        writer.writerow(row)
    return buf.getvalue()


# --- markdown ------------------------------------------------------------------------

def _md(response: SearchResponse, *, color: bool, line_numbers: bool, full: bool) -> str:
    out = [f"# Search results for “{response.query}”", ""]
    if not response.results:
        out.append("_No results._")
        return "\n".join(out) + "\n"
    dated = shows_dates(response)
    for n, r in enumerate(response.results, start=1):
        out.append(f"## {n}. {r.title or r.path}")
        out.append("")
        out.append(f"- **location**: `{location(r)}`")
        out.append(f"- **docid**: `#{r.docid}`")
        if dated:
            out.append(f"- **date**: {date_text(r) or 'none'}")
        out.append(f"- **score**: {r.score:.2f}")
        if r.context:
            out.append(f"- **context**: {' › '.join(r.context)}")
        out.append("")
        if full and r.body is not None:
            body = _numbered(r.body, 1) if line_numbers else r.body
            fence = "````" if "```" in body else "```"
            out += [f"{fence}markdown", body, fence, ""]
        elif r.snippet:
            text = marked(r.snippet, r.highlights, "**", "**")
            if line_numbers:
                text = _numbered(text, r.line or 1)
            out += ["> " + line if line else ">" for line in text.split("\n")]
            out.append("")
    return "\n".join(out)


# --- xml -----------------------------------------------------------------------------

def _xml_marked(text: str, highlights) -> str:
    from xml.sax.saxutils import escape  # XML output only: not loaded for the other formats

    return marked(text, highlights, "<mark>", "</mark>", escape=escape)


def xml_text(text: str) -> str:
    """XML 1.0 forbids most control characters (a diff or a message may hold them): dropped, not emitted."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)


def _xml(response: SearchResponse, *, color: bool, line_numbers: bool, full: bool) -> str:
    from xml.sax.saxutils import escape, quoteattr  # XML output only

    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f"<results query={quoteattr(xml_text(response.query))} mode={quoteattr(mode_verb(response.mode))}"
           f" count=\"{len(response.results)}\">"]
    dated = shows_dates(response)
    for r in response.results:
        attrs = (f"docid={quoteattr('#' + r.docid)} score=\"{r.score:.4f}\" uri={quoteattr(xml_text(r.uri))}"
                 f" line=\"{r.line}\" collection={quoteattr(xml_text(r.collection))}")
        if dated and r.date:
            attrs += f" date={quoteattr(r.date)} date_source={quoteattr(r.date_source)}"
        out.append(f"  <result {attrs}>")
        out.append(f"    <title>{escape(xml_text(r.title))}</title>")
        for ctx in r.context:
            out.append(f"    <context>{escape(xml_text(ctx))}</context>")
        out.append(f"    <snippet>{_xml_marked(xml_text(r.snippet), r.highlights)}</snippet>")
        if full and r.body is not None:
            out.append(f"    <body>{escape(xml_text(r.body))}</body>")
        out.append("  </result>")
    out.append("</results>")
    return "\n".join(out) + "\n"


# --- files ---------------------------------------------------------------------------

def _files(response: SearchResponse, *, color: bool, line_numbers: bool, full: bool) -> str:
    buf = io.StringIO()
    writer = csv_writer(buf)
    for r in response.results:
        writer.writerow([f"#{r.docid}", f"{r.score:.2f}", r.uri, " › ".join(r.context)])
    return buf.getvalue()


_RENDERERS = {"cli": _cli, "json": _json, "csv": _csv, "md": _md, "xml": _xml, "files": _files}
