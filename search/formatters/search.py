"""Search results (search.results.SearchResponse) in every format.

Conventions shared by all formats:

- a result's snippet starts at `result.line`, so `--line-numbers` numbers snippet lines
  from there and the location is written `pmd://collection/path:LINE`;
- scores are 0..1; the CLI shows them as percentages coloured by SCORE_HIGH / SCORE_MID;
- highlights are [start, end) offsets into the snippet: ANSI bold in the CLI, `**…**`
  in markdown, `<mark>` in XML, raw offsets in JSON.
"""

from __future__ import annotations

from search.formatters.registry import XmlWriter, as_json, csv_text, renders, terminal_text, xml_text
from search.request import mode_verb
from search.results import SearchResponse, SearchResult

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


def score_color(score: float) -> str:
    if score >= SCORE_HIGH:
        return _GREEN
    if score >= SCORE_MID:
        return _YELLOW
    return _RED


def percent(score: float) -> str:
    return f"{round(max(0.0, min(1.0, score)) * 100):d}%"


def location(result: SearchResult) -> str:
    """`pmd://c/note.md:12`; a match in a converted file names its page: `pmd://c/report.pdf#page=12`."""
    if result.anchor:
        return result.location_uri
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


def numbered_lines(
    lines: list[str], first: int, *, width: int | None = None, dim: str = "", reset: str = ""
) -> list[str]:
    """`lines` prefixed with their numbers from `first`, right-aligned to the widest (or `width`)."""
    width = width or len(str(first + len(lines) - 1))
    return [f"{dim}{n:>{width}}{reset}  {line}" for n, line in enumerate(lines, start=first)]


def _numbered(text: str, first: int, *, color: bool = False) -> str:
    dim, reset = (_DIM, _RESET) if color else ("", "")
    return "\n".join(numbered_lines(text.split("\n"), first, dim=dim, reset=reset))


# --- cli -----------------------------------------------------------------------------


@renders("search", "cli")
def _cli(response: SearchResponse, *, color: bool = False, line_numbers: bool = False, full: bool = False) -> str:
    if not response.results:
        return ""
    blocks = []
    dated = shows_dates(response)
    safe = terminal_text  # the notes' own text: shown, never obeyed by the terminal
    for r in response.results:
        c = (lambda code: code) if color else (lambda code: "")
        head = f"{c(_CYAN)}{safe(location(r))}{c(_RESET)} {c(_DIM)}#{r.docid}{c(_RESET)}"
        if r.type and r.type != "markdown":
            head += f" {c(_DIM)}[{r.type}]{c(_RESET)}"
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
        elif line_numbers:  # numbered lines are the note's own lines: its source
            text = marked(r.snippet, r.highlights, _MARK, _RESET, escape=safe) if color else safe(r.snippet)
            text = _numbered(text, r.line or 1, color=color) if text else text
        else:  # the snippet as read (indexing.snippets), under its headings
            shown, spans = (r.text, r.text_highlights) if r.text or not r.snippet else (r.snippet, r.highlights)
            text = marked(shown, spans, _MARK, _RESET, escape=safe) if color else safe(shown)
            if r.headings:
                lines.append(f"{c(_DIM)}in: {safe(' › '.join(r.headings))}{c(_RESET)}")
        if text:
            lines.append("")
            lines.append(text)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


# --- json ----------------------------------------------------------------------------

renders("search", "json")(as_json)


# --- csv -----------------------------------------------------------------------------


@renders("search", "csv")
def _csv(response: SearchResponse, *, full: bool = False, **_) -> str:
    header = ["docid", "score", "uri", "line", "title", "context", "snippet"] + (["body"] if full else [])
    return csv_text(
        [header]
        + [
            [f"#{r.docid}", f"{r.score:.4f}", r.uri, r.line, r.title, " › ".join(r.context), r.snippet]
            + ([r.body or ""] if full else [])
            for r in response.results
        ]
    )


# --- markdown ------------------------------------------------------------------------


@renders("search", "md")
def _md(response: SearchResponse, *, line_numbers: bool = False, full: bool = False, **_) -> str:
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
    from xml.sax.saxutils import escape  # noqa: PLC0415 - start-up time: XML output only (saxutils loads urllib.request)

    return marked(text, highlights, "<mark>", "</mark>", escape=escape)


@renders("search", "xml")
def _xml(response: SearchResponse, *, full: bool = False, **_) -> str:
    xml = XmlWriter(declaration=True)
    xml.open(0, "results", query=response.query, mode=mode_verb(response.mode), count=len(response.results))
    dated = shows_dates(response)
    for r in response.results:
        attrs = {
            "docid": "#" + r.docid,
            "score": f"{r.score:.4f}",
            "uri": r.uri,
            "line": r.line,
            "collection": r.collection,
        }
        if dated and r.date:
            attrs |= {"date": r.date, "date_source": r.date_source}
        xml.open(1, "result", **attrs)
        xml.element(2, "title", r.title)
        for ctx in r.context:
            xml.element(2, "context", ctx)
        xml.element(2, "snippet", markup=_xml_marked(xml_text(r.snippet), r.highlights))
        if full and r.body is not None:
            xml.element(2, "body", r.body)
        xml.close(1, "result")
    xml.close(0, "results")
    return xml.text()


# --- files ---------------------------------------------------------------------------


@renders("search", "files")
def _files(response: SearchResponse, **_) -> str:
    return csv_text([f"#{r.docid}", f"{r.score:.2f}", r.uri, " › ".join(r.context)] for r in response.results)


# --- mcp -----------------------------------------------------------------------------


@renders("search", "mcp")
def _mcp(result, **_) -> str:
    """`result`: the pmd_search tools' SearchBrief."""
    corrected = getattr(result, "corrected_query", None)
    lead = (
        [f"showing results for {corrected!r}; search instead for {result.query!r} with exact=true"] if corrected else []
    )
    if getattr(result, "time_words", None):
        lead.append(f"read {result.time_words!r} as a date filter (see filters)")
    if not result.results:
        return "\n".join(lead + [f"no results for {result.query!r}"]) + "".join(
            f"\nwarning: {w}" for w in result.warnings
        )
    out = lead
    for hit in result.results:
        dated = f" [{hit.date[:10]}]" if result.filters and hit.date else ""
        where = f"{hit.uri}:{hit.line}" + (f" ({hit.location})" if getattr(hit, "location", "") else "")
        kind = f" [{hit.type}]" if getattr(hit, "type", "markdown") not in ("markdown", "") else ""
        out.append(f"#{hit.docid} {where} ({hit.score:.2f}){dated}{kind} {hit.title}")
        snippet = " ".join(hit.snippet.split())
        if snippet:
            out.append(f"  {snippet[:300]}")
    out += [f"warning: {w}" for w in result.warnings]
    return "\n".join(out)


@renders("fields", "mcp")
def _fields_mcp(result, **_) -> str:
    """`result`: FieldsOut, one line per frontmatter key."""
    if not result.fields:
        return "no frontmatter keys"
    return "\n".join(
        f"{f.key} ({f.notes} notes; {', '.join(f.types)}): " + ", ".join(f"{v.value} ({v.notes})" for v in f.values)
        for f in result.fields
    )
