"""HTML for the web UI: highlighted snippets and safely rendered markdown.

Everything here returns markup built from escaped text (snippets) or sanitised by nh3
(documents), so a document can never inject script into a page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from indexing.markdown import LinkTargets, markdown_reader, without_comments
from indexing.text import strip_frontmatter
from search import marked

_ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "img",
    "ins",
    "kbd",
    "li",
    "mark",
    "ol",
    "p",
    "pre",
    "q",
    "s",
    "samp",
    "small",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "u",
    "ul",
    "input",
    "label",
}
_ALLOWED_ATTRIBUTES = {
    "*": {"id", "class", "data-ls", "data-le", "title", "lang", "dir"},
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "details": {"open"},
    "td": {"align", "colspan", "rowspan", "style"},
    "th": {"align", "colspan", "rowspan", "style"},
    "ol": {"start"},
    "input": {"type", "checked", "disabled"},
}
_LINE_ID = re.compile(r"^L\d+$")
_CODE_CLASS = re.compile(r"^language-[\w+#.-]{1,40}$")
# The classes indexing.markdown's dialects produce (callouts, wikilinks, embeds…): pmd.css styles them.
_PMD_CLASS = re.compile(r"^pmd-[a-z0-9-]{1,60}(?: pmd-[a-z0-9-]{1,60}){0,3}$")
_BLOCK_ID = re.compile(r"^block-[A-Za-z0-9-]{1,64}$")
_HEADING_ID = re.compile(r"^h-[\w-]{1,80}$")  # indexing.markdown.heading_anchor
_ALIGN_STYLE = re.compile(r"^text-align:\s*(left|right|center)$")


def _attribute_filter(element: str, attribute: str, value: str) -> str | None:
    """Keep only the attribute values our own renderer produces (no DOM clobbering, no styling)."""
    if attribute == "id":
        return value if _LINE_ID.match(value) or _BLOCK_ID.match(value) or _HEADING_ID.match(value) else None
    if attribute == "class":
        return value if _CODE_CLASS.match(value) or _PMD_CLASS.match(value) else None
    if attribute == "style":
        return value if _ALIGN_STYLE.match(value) else None
    if attribute == "type":
        return value if value == "checkbox" else None
    return value


def highlight_snippet(snippet: str, highlights: list[tuple[int, int]] | list[list[int]]) -> SafeString:
    """Escape the snippet and wrap the [start, end) ranges in <mark>."""
    return mark_safe(marked(snippet, highlights, "<mark>", "</mark>", escape=escape))


def render_markdown(
    text: str, *, offset: int | None = None, links: LinkTargets | None = None
) -> tuple[SafeString, int]:
    """Sanitised HTML of a markdown document, blocks tagged with their source lines.

    Each block gets `data-ls`/`data-le` (1-based first/last line in the original file,
    frontmatter included) and `id="L<first line>"`, so `#L42` and the hit line can be
    found. Returns (html, number of frontmatter lines skipped). With `offset`, `text` is a later
    part of a note (see note_part): nothing is stripped and its first line is line offset + 1.
    `links` says where wikilinks and embeds lead (unresolved without it).
    """
    if offset is None:
        body = strip_frontmatter(text)
        offset = text[: len(text) - len(body)].count("\n")
    else:
        body = text
    md = markdown_reader()
    env = {"pmd_links": links or LinkTargets()}
    tokens = md.parse(without_comments(body), env)
    used: set[int] = set()
    for token in tokens:
        if token.map is None or token.nesting == -1 or token.type == "html_block":
            continue
        first, last = token.map[0] + 1 + offset, token.map[1] + offset
        token.attrSet("data-ls", str(first))
        token.attrSet("data-le", str(max(first, last)))
        if first not in used:
            used.add(first)
            token.attrSet("id", f"L{first}")
    html = md.renderer.render(tokens, md.options, env)
    clean = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=_ALLOWED_ATTRIBUTES,
        attribute_filter=_attribute_filter,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(_FOCUSABLE_SCROLLERS.sub(r'\1 tabindex="0"', clean)), offset


# Code blocks and tables scroll sideways on a narrow screen: a keyboard must reach them to scroll.
_FOCUSABLE_SCROLLERS = re.compile(r"(<(?:pre|table))(?=[\s>])")


_UNIT_MARKER = re.compile(r"<p([^>]*)>\[(page|slide|sheet|chapter) ([^<\]\n]{1,200})\]</p>")


def unit_markers(html: SafeString) -> SafeString:
    """A converted file's marker lines (`[page 12]`) shown as page (slide, sheet) separators, each
    with the anchor results link to (`#page=12`). The name is already escaped by the renderer."""
    return mark_safe(
        _UNIT_MARKER.sub(
            lambda m: (
                f'<p{m.group(1)} class="unit-marker"><span id="{m.group(2)}={m.group(3)}">'
                f"{m.group(2).capitalize()} {m.group(3)}</span></p>"
            ),
            html,
        )
    )


PART_LINES = 3000  # a page shows at most this many lines of a note…
PART_CHARS = 300_000  # …and this many characters; a longer note is shown in parts (?part=2)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class NotePart:
    """The lines of a note one page shows. A note longer than PART_LINES lines or PART_CHARS
    characters is shown in parts (?part=2, …): one page of 100k headings took
    26 s and 11.6 MB to render whole. A single line longer than a part is shown cut (`cut`)."""

    number: int
    count: int
    first_line: int  # 1-based, in the file (frontmatter included)
    last_line: int
    total_lines: int
    frontmatter_lines: int
    text: str
    cut: bool = False

    @property
    def whole(self) -> bool:
        return self.count == 1 and not self.cut


def _part_ranges(lines: list[str], start: int, max_lines: int, max_chars: int) -> list[tuple[int, int]]:
    """[first, end) line indexes of each part: at most `max_lines` lines and `max_chars` characters
    (one line more only when a line alone is longer), cut after a blank line outside a code fence
    when there is one in the part's second half. One pass over the lines."""
    ranges: list[tuple[int, int]] = []
    first, chars, safe, fence = 0, 0, 0, ""
    i = start  # the frontmatter stays whole in the first part
    while i < len(lines):
        line = lines[i]
        size = len(line) + 1
        count = i - first
        if count and (count - (start if first == 0 else 0) >= max_lines or chars + size > max_chars):
            cut = safe if safe > first + count // 2 else i
            ranges.append((first, cut))
            first, chars, safe = cut, sum(len(x) + 1 for x in lines[cut:i]), cut
            continue
        chars += size
        match = _FENCE.match(line)
        if match and (not fence or (match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence))):
            fence = "" if fence else match.group(1)
        elif not fence and not line.strip():
            safe = i + 1
        i += 1
    ranges.append((first, len(lines)))
    return ranges


def note_part(text: str, *, number: int | None = None, line: int = 0) -> NotePart:
    """Part `number` of a note (clamped), or without one the part holding `line` (else the first).
    A note within the limits is one part: the page is what it always was."""
    body = strip_frontmatter(text)
    head = len(text) - len(body)  # the frontmatter's characters: never cut, shown only in the source view
    frontmatter_lines = text[:head].count("\n")
    lines = text.split("\n")
    total = len(text.splitlines())
    if len(lines) - frontmatter_lines <= PART_LINES and len(body) <= PART_CHARS:
        return NotePart(1, 1, 1, max(1, total), total, frontmatter_lines, text)
    ranges = _part_ranges(lines, frontmatter_lines, PART_LINES, PART_CHARS)
    if number is None:
        number = next((n for n, (first, end) in enumerate(ranges, start=1) if first < line <= end), 1)
    number = min(max(1, number), len(ranges))
    first, end = ranges[number - 1]
    part = "\n".join(lines[first:end])
    limit = PART_CHARS + (head if number == 1 else 0)
    return NotePart(
        number,
        len(ranges),
        first + 1,
        max(first + 1, min(end, total)),
        total,
        frontmatter_lines,
        part[:limit],
        cut=len(part) > limit,
    )
