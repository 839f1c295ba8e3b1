"""HTML for the web UI: highlighted snippets and safely rendered markdown.

Everything here returns markup built from escaped text (snippets) or sanitised by nh3
(documents), so a document can never inject script into a page.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from indexing.text import strip_frontmatter
from search.formatters import marked

_ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p",
    "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
    "td", "tfoot", "th", "thead", "tr", "u", "ul", "input",
}
_ALLOWED_ATTRIBUTES = {
    "*": {"id", "class", "data-ls", "data-le", "title", "lang", "dir"},
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "td": {"align", "colspan", "rowspan", "style"},
    "th": {"align", "colspan", "rowspan", "style"},
    "ol": {"start"},
    "input": {"type", "checked", "disabled"},
}
_LINE_ID = re.compile(r"^L\d+$")
_CODE_CLASS = re.compile(r"^language-[\w+#.-]{1,40}$")
_ALIGN_STYLE = re.compile(r"^text-align:\s*(left|right|center)$")


def _attribute_filter(element: str, attribute: str, value: str) -> str | None:
    """Keep only the attribute values our own renderer produces (no DOM clobbering, no styling)."""
    if attribute == "id":
        return value if _LINE_ID.match(value) else None
    if attribute == "class":
        return value if _CODE_CLASS.match(value) else None
    if attribute == "style":
        return value if _ALIGN_STYLE.match(value) else None
    if attribute == "type":
        return value if value == "checkbox" else None
    return value


def highlight_snippet(snippet: str, highlights: list[tuple[int, int]] | list[list[int]]) -> SafeString:
    """Escape the snippet and wrap the [start, end) ranges in <mark>."""
    return mark_safe(marked(snippet, highlights, "<mark>", "</mark>", escape=escape))


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def render_markdown(text: str) -> tuple[SafeString, int]:
    """Sanitised HTML of a markdown document, blocks tagged with their source lines.

    Each block gets `data-ls`/`data-le` (1-based first/last line in the original file,
    frontmatter included) and `id="L<first line>"`, so `#L42` and the hit line can be
    found. Returns (html, number of frontmatter lines skipped).
    """
    body = strip_frontmatter(text)
    offset = text[: len(text) - len(body)].count("\n")
    md = _markdown()
    tokens = md.parse(body)
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
    html = md.renderer.render(tokens, md.options, {})
    clean = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=_ALLOWED_ATTRIBUTES,
        attribute_filter=_attribute_filter,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean), offset
