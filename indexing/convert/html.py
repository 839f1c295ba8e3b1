"""HTML to markdown-like text with the standard library's parser (no dependency): headings,
paragraphs, lists, tables, links' text, code blocks; scripts, styles, navigation and forms left
out. EPUB chapters are read the same way."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from indexing.convert import Converted, Limits
from indexing.convert.tables import markdown_table

SKIPPED = {
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "nav",
    "form",
    "button",
    "select",
    "iframe",
    "head",
    "object",
    "canvas",
}
BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "blockquote",
    "figure",
    "figcaption",
    "dl",
    "dt",
    "dd",
    "address",
    "details",
    "summary",
    "center",
    "body",
    "html",
}
VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.line: list[str] = []
        self.prefix = ""
        self.skip = 0
        self.pre = 0
        self.lists: list[list] = []  # [kind, counter]
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None
        self.title = ""
        self.in_title = False

    def flush(self) -> None:
        text = "".join(self.line)
        if not self.pre:
            text = " ".join(text.split())
        if text.strip():
            self.blocks.append(self.prefix + text)
        self.line, self.prefix = [], ""

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.in_title = True
        if tag in SKIPPED:
            self.skip += 1
            return
        if self.skip:
            return
        if self.cell is not None and tag not in ("td", "th", "tr", "table"):
            if tag == "br":
                self.cell.append(" ")
            return
        if re.fullmatch(r"h[1-6]", tag):
            self.flush()
            self.prefix = "#" * int(tag[1]) + " "
        elif tag in ("ul", "ol"):
            self.flush()
            self.lists.append([tag, 0])
        elif tag == "li":
            self.flush()
            depth = max(len(self.lists) - 1, 0)
            if self.lists and self.lists[-1][0] == "ol":
                self.lists[-1][1] += 1
                self.prefix = "  " * depth + f"{self.lists[-1][1]}. "
            else:
                self.prefix = "  " * depth + "- "
        elif tag == "pre":
            self.flush()
            self.pre += 1
            self.blocks.append("```")
        elif tag == "table":
            self.flush()
            self.table = []
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            if not self.table:
                self.table.append([])
            self.cell = []
        elif tag == "br":
            if self.pre:
                self.line.append("\n")
            else:
                self.flush()
        elif tag in BLOCKS or tag == "hr":
            self.flush()

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if tag in SKIPPED:
            self.skip = max(self.skip - 1, 0)
            return
        if self.skip:
            return
        if tag in ("td", "th") and self.cell is not None and self.table is not None:
            self.table[-1].append("".join(self.cell))
            self.cell = None
        elif tag == "table" and self.table is not None:
            if self.cell is not None:
                self.table[-1].append("".join(self.cell))
                self.cell = None
            table = markdown_table(self.table)
            self.table = None
            if table:
                self.blocks.append(table)
        elif self.cell is not None:
            return
        elif tag == "pre":
            text = "".join(self.line).strip("\n")
            if text:
                self.blocks.append(text)
            self.line = []
            self.blocks.append("```")
            self.pre = max(self.pre - 1, 0)
        elif tag in ("ul", "ol"):
            self.flush()
            if self.lists:
                self.lists.pop()
        elif re.fullmatch(r"h[1-6]", tag) or tag in BLOCKS or tag == "li":
            self.flush()

    def handle_data(self, data):
        if self.in_title:
            self.title += data
        if self.skip:
            return
        if self.cell is not None:
            self.cell.append(data)
        else:
            self.line.append(data)


def html_markdown(source: str) -> tuple[str, str]:
    """(markdown-like text, the <title>) of an HTML document."""
    reader = _Reader()
    reader.feed(source)
    reader.close()
    reader.flush()
    out: list[str] = []
    for block in reader.blocks:  # list items and code lines stay together; other blocks apart
        tight = out and (_is_item(block) and _is_item(out[-1]))
        out.append(("\n" if tight else "\n\n") + block if out else block)
    return "".join(out).strip() + "\n", " ".join(reader.title.split())


def _is_item(block: str) -> bool:
    return bool(re.match(r"\s*(?:- |\d+\. )", block))


_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_-]+)""", re.I)


def decode_html_bytes(data: bytes) -> str:
    """The text of an HTML file: its byte order mark, else its <meta charset>, else UTF-8 (bad bytes replaced)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    match = _CHARSET.search(data[:4096])
    encoding = match.group(1).decode("ascii") if match else "utf-8"
    try:
        return data.decode(encoding, "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


def convert(data: bytes, limits: Limits) -> Converted:
    text, title = html_markdown(decode_html_bytes(data))
    return Converted(text=text, units=1, properties={"title": title} if title else {})
