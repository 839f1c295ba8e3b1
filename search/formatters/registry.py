"""The rendering registry and the three writers every renderer shares (terminal text, CSV, XML).

The format modules (search.py, history.py, …) import this module and register with `renders`;
nothing here imports them back, so the registry has no import cycle.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable

from indexing.errors import UnknownFormat

FORMATS = ("cli", "json", "csv", "md", "xml", "files")  # what the CLI offers (`--json`, `--csv`…)
MCP = "mcp"
MACHINE_FORMATS = frozenset({"json", "files"})  # get the bigger default limit (see SearchRequest)

# C0 controls but tab and newline (CR only before a newline), DEL and C1 (CSI is 0x9b): what
# could move the cursor, clear the screen, set the clipboard (OSC 52) or hide a link (OSC 8).
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
_JSON_UNESCAPED_CONTROLS = re.compile("[\x7f-\x9f]")  # json.dumps escapes only those below 0x20
# How a CSV cell starts when a spreadsheet would read it as a formula (OWASP's list).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


# --- the registry -------------------------------------------------------------------------------

RENDERERS: dict[tuple[str, str], Callable[..., str]] = {}


def renders(kind: str, *formats: str):
    """Register the decorated function as the renderer of `kind` in each of `formats`."""

    def register(func):
        for fmt in formats:
            RENDERERS[(kind, fmt)] = func
        return func

    return register


def render(kind: str, fmt: str, value, **options) -> str:
    """`value` (an answer of type `kind`) as text in `fmt`."""
    try:
        renderer = RENDERERS[(kind, fmt)]
    except KeyError:
        choices = ", ".join(f for k, f in RENDERERS if k == kind)
        raise UnknownFormat(f"unknown output format {fmt!r} (choose from {choices})") from None
    return renderer(value, **options)


def format_response(
    response, fmt: str = "cli", *, color: bool = False, line_numbers: bool = False, full: bool = False
) -> str:
    """A search response as text in `fmt` (one of FORMATS); ends with a newline unless empty."""
    if fmt not in FORMATS:
        raise UnknownFormat(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
    return render("search", fmt, response, color=color, line_numbers=line_numbers, full=full)


# --- terminal -----------------------------------------------------------------------------------


def terminal_text(text: str) -> str:
    """Text pmd did not write (a title, a snippet, a path), safe on a terminal: each control
    character is shown as `\\x1b`, not obeyed."""
    return _TERMINAL_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def markup_text(value) -> str:
    """`value` (a title, a path, a message: text pmd did not write) as plain text inside console
    markup: `[draft]` or `[/x]` in it prints as written instead of styling or failing."""
    from rich.markup import escape  # noqa: PLC0415 - start-up time: rich loads only for the renderers that draw with it

    return escape(str(value))


def markup_line(value) -> str:
    """`markup_text` for text that ends its line: a backslash at its end stays one backslash (no
    markup tag follows it to be escaped from)."""
    return markup_text(f"{value} ")[:-1]


# --- json ---------------------------------------------------------------------------------------


def json_text(data) -> str:
    """`data` as pmd's JSON output; DEL and C1 controls escaped too (`\\u009b`), so even JSON read
    on a terminal obeys none. The same JSON value as json.dumps gives."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    return _JSON_UNESCAPED_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def as_json(value, **options) -> str:
    """The JSON renderer of every type: the value's own `as_dict()`, one document and a newline."""
    return json_text(value.as_dict()) + "\n"


# --- csv ----------------------------------------------------------------------------------------


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


def csv_text(rows) -> str:
    """`rows` (the header first, if any) as CSV text, through `csv_writer`."""
    buf = io.StringIO()
    writer = csv_writer(buf)
    for row in rows:
        writer.writerow(row)
    return buf.getvalue()


# --- xml ----------------------------------------------------------------------------------------


def xml_text(text: str) -> str:
    """XML 1.0 forbids most control characters (a diff or a message may hold them): dropped, not emitted."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)


class XmlWriter:
    """The one XML writer: elements two spaces deeper per level, every attribute and text escaped
    and cleaned by `xml_text` (`markup` is content already escaped, such as a snippet with <mark>)."""

    def __init__(self, *, declaration: bool = False):
        self._lines = ['<?xml version="1.0" encoding="UTF-8"?>'] if declaration else []

    @staticmethod
    def _tag(tag: str, attrs: dict) -> str:
        from xml.sax.saxutils import quoteattr  # noqa: PLC0415 - start-up time: XML output only (saxutils loads urllib.request)

        return "".join([tag] + [f" {name}={quoteattr(xml_text(str(value)))}" for name, value in attrs.items()])

    def open(self, depth: int, tag: str, **attrs) -> None:
        self._lines.append(f"{'  ' * depth}<{self._tag(tag, attrs)}>")

    def close(self, depth: int, tag: str) -> None:
        self._lines.append(f"{'  ' * depth}</{tag}>")

    def element(self, depth: int, tag: str, text: str | None = None, *, markup: str | None = None, **attrs) -> None:
        """`<tag attrs>text</tag>`, or `<tag attrs/>` without text or markup."""
        from xml.sax.saxutils import escape  # noqa: PLC0415 - start-up time: XML output only (saxutils loads urllib.request)

        if text is not None:
            markup = escape(xml_text(text))
        head = self._tag(tag, attrs)
        self._lines.append(f"{'  ' * depth}<{head}/>" if markup is None else f"{'  ' * depth}<{head}>{markup}</{tag}>")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


# The renderers register themselves on import.
