"""One reading of markdown for indexing and the document view, with the dialects people write.

What is searched is what is shown: the keyword index and the embedding chunks read
`searchable_text` of a note, and the document view renders with `markdown_reader`; both start
from `without_comments` and know the same syntaxes, declared here once:

- Obsidian callouts `> [!warning] Title` (foldable `> [!note]-` / `+`) and GitHub alerts
  `> [!NOTE]`: a styled box with its title; the `[!type]` marker is not text;
- MDX/Docusaurus admonitions `:::tip Title` (or `:::tip[Title]`) … `:::`: the same box;
- wikilinks `[[Note#Heading|shown]]` and embeds `![[Note#Heading]]`, `![[image.png|300]]`: links
  to the note, an image for an image (indexing.structure reads them as links);
- block ids `^abc123` at the end of a block, the target of `[[Note#^abc123]]`: an anchor, not text;
- highlights `==x==`: <mark>; comments `%%…%%`: neither indexed nor shown;
- mdBook `{{#include file.rs}}`: shown as a reference to the file, never read.

Transclusion (an embedded section's words counted as the embedding note's) is not done: an embed
is a link. Everything here is linear in the note's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from indexing.patterns import LazyPattern

if TYPE_CHECKING:  # markdown-it is imported when a note is rendered: a search only blanks comments (start-up)
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock
    from markdown_it.rules_core import StateCore
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

# `[!type]` opening a quote's first line, a fold sign after it, then the title.
CALLOUT_RE = LazyPattern(r"\[!([A-Za-z][\w-]{0,39})\]([+-]?)[ \t]*")
# `:::type Title`, `:::type[Title]` and the closing `:::` (at least three colons).
ADMONITION_RE = LazyPattern(r" {0,3}(:{3,})[ \t]*([A-Za-z][\w-]{0,39})(?:\[([^\]\n]*)\]|[ \t]+([^\n]*?))?[ \t]*$")
ADMONITION_END_RE = LazyPattern(r" {0,3}(:{3,})[ \t]*$")
# A block id: `^id` after a blank, ending its line.
BLOCK_ID_RE = LazyPattern(r"(?:(?<=[ \t])|^)\^([A-Za-z0-9-]{1,64})[ \t]*$", re.MULTILINE)
INCLUDE_RE = LazyPattern(r"\{\{#(include|rustdoc_include|playground|template)[ \t]+([^{}\n]{1,500})\}\}")
IMAGE_EXTENSIONS = frozenset(["png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "avif"])
_WIKILINK_INNER_RE = LazyPattern(r"[^\[\]\n]*")
_SIZE_RE = LazyPattern(r"(\d{1,5})(?:x(\d{1,5}))?")
_CLASS_WORD_RE = LazyPattern(r"[^a-z0-9-]")

# Callout types Obsidian draws alike (its documented aliases): the CSS styles the canonical one.
CALLOUT_ALIASES = {
    "summary": "abstract",
    "tldr": "abstract",
    "hint": "tip",
    "important": "tip",
    "check": "success",
    "done": "success",
    "help": "question",
    "faq": "question",
    "caution": "warning",
    "attention": "warning",
    "fail": "failure",
    "missing": "failure",
    "error": "danger",
    "cite": "quote",
    "information": "info",
}


def callout_kind(name: str) -> str:
    """The class word of a callout or admonition type (lower case, aliases folded)."""
    word = _CLASS_WORD_RE.sub("", name.lower())[:40] or "note"
    return CALLOUT_ALIASES.get(word, word)


# --- comments, and the text that is searched -------------------------------------------------------


def comment_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each `%%…%%` comment outside code (as indexing.structure.masked finds them)."""
    if "%%" not in text:
        return []
    from indexing.structure import masked  # noqa: PLC0415 - start-up time: a search seldom meets a comment

    with_comments = masked(text)
    without = masked(text.replace("%%", "\x01\x01"))  # the same mask with no %% comments in it
    spans: list[tuple[int, int]] = []
    start = None
    for i, (a, b) in enumerate(zip(with_comments, without)):
        hidden = a != b
        if hidden and start is None:
            start = i
        elif not hidden and start is not None and not (a == " " and text[i].isspace()):
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    return spans


def without_comments(text: str) -> str:
    """`text` with its `%%…%%` comments blanked (same length and lines: offsets stay valid)."""
    return _blanked(text, comment_spans(text))


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """indexing.structure.blank_spans, whose module (dozens of patterns) is imported only when there is
    something to blank: a search's snippets seldom have any (start-up of `pmd search`)."""
    if not spans:
        return text
    from indexing.structure import blank_spans  # noqa: PLC0415 - start-up time (see above)

    return blank_spans(text, spans)


_QUOTE_CALLOUT_RE = LazyPattern(r"^[ \t]{0,3}(?:>[ \t]?)+(\[![A-Za-z][\w-]{0,39}\][+-]?)", re.MULTILINE)
_ADMONITION_LINE_RE = LazyPattern(r"^ {0,3}(:{3,}[ \t]*[A-Za-z][\w-]{0,39})", re.MULTILINE)
_ADMONITION_END_LINE_RE = LazyPattern(r"^ {0,3}(:{3,})[ \t]*$", re.MULTILINE)
_HIGHLIGHT_MARK_RE = LazyPattern(r"==(?=\S)(?:[^=\n]|=(?!=))+?(?<=\S)==")


def searchable_text(text: str) -> str:
    """What the keyword index and the embeddings read of a note: its text with comments and the
    dialects' marks blanked (`[!type]`, `:::type`, `^block-id`, `==`), same length and lines, so
    passages, chunks and snippets keep their offsets into the note."""
    text = without_comments(text)
    spans: list[tuple[int, int]] = []
    if "[!" in text:
        spans += [m.span(1) for m in _QUOTE_CALLOUT_RE.finditer(text)]
    if ":::" in text:
        spans += [m.span(1) for m in _ADMONITION_LINE_RE.finditer(text)]
        spans += [m.span(1) for m in _ADMONITION_END_LINE_RE.finditer(text)]
    if "^" in text:
        spans += [(m.start(), m.end(1)) for m in BLOCK_ID_RE.finditer(text)]
    if "==" in text:
        for m in _HIGHLIGHT_MARK_RE.finditer(text):
            spans += [(m.start(), m.start() + 2), (m.end() - 2, m.end())]
    return _blanked(text, spans)


# --- the links a rendered note points to -----------------------------------------------------------


@dataclass
class LinkTargets:
    """Where a rendered note's wikilinks and embeds lead (the document view fills it from the
    note's resolved links and the collection's files): None is "not found"."""

    note_url: Callable[[str], str | None] = lambda target: None
    image_url: Callable[[str], str | None] = lambda target: None
    # The markdown an embed `![[Note#Heading]]` shows in place (target, heading); None: a link only.
    embed_text: Callable[[str, str], str | None] = lambda target, heading: None


def block_anchor(block_id: str) -> str:
    """The element id of a block `^id` in the document view (a link `[[Note#^id]]` scrolls there)."""
    return "block-" + block_id


_NOT_SLUG = LazyPattern(r"[^\w]+")


def heading_anchor(heading: str) -> str:
    """The element id of a heading in the document view (`[[Note#Heading]]` scrolls there): its
    words in lower case joined by '-', whatever the script ("Größe & Maß" → "h-grösse-mass")."""
    return "h-" + (_NOT_SLUG.sub("-", heading.casefold()).strip("-_")[:80] or "section")


def link_fragment(heading: str) -> str:
    """The `#fragment` of a link's heading part: a block (`^id`) or a heading."""
    if heading.startswith("^"):
        return "#" + block_anchor(heading[1:]) if len(heading) > 1 else ""
    return "#" + heading_anchor(heading) if heading.strip() else ""


def is_image(target: str) -> bool:
    name = target.rsplit("/", 1)[-1]
    return "." in name and name.rsplit(".", 1)[-1].lower() in IMAGE_EXTENSIONS


# --- markdown-it rules ------------------------------------------------------------------------------


def _callouts(state: StateCore) -> None:
    """A quote whose first line starts with `[!type]` becomes a callout: a <div> (or a <details>
    when foldable) with a title; runs between block and inline parsing."""
    from markdown_it.token import Token  # noqa: PLC0415 - start-up time: loaded when a note is rendered

    tokens = state.tokens
    for i, token in enumerate(tokens):
        if token.type != "blockquote_open" or i + 2 >= len(tokens):
            continue
        para, inline = tokens[i + 1], tokens[i + 2]
        if para.type != "paragraph_open" or inline.type != "inline":
            continue
        match = CALLOUT_RE.match(inline.content)
        if not match:
            continue
        first, _, rest = inline.content[match.end() :].partition("\n")
        kind = callout_kind(match.group(1))
        fold = match.group(2)
        close = _matching_close(tokens, i)
        tag = "details" if fold else "div"
        token.type, token.tag = "callout_open", tag
        token.attrSet("class", f"pmd-callout pmd-callout-{kind}")
        if fold == "+":
            token.attrSet("open", "")
        if close is not None:
            tokens[close].type, tokens[close].tag = "callout_close", tag
        title_tag = "summary" if fold else "div"
        title = first.strip() or match.group(1).capitalize()
        title_open = Token("callout_title_open", title_tag, 1, attrs={"class": "pmd-callout-title"}, block=True)
        title_inline = Token("inline", "", 0, content=title, map=inline.map, block=True, children=[])
        title_close = Token("callout_title_close", title_tag, -1, block=True)
        if rest.strip():
            inline.content = rest
            tokens[i + 1 : i + 1] = [title_open, title_inline, title_close]
        else:  # the title line was the whole paragraph
            tokens[i + 1 : i + 4] = [title_open, title_inline, title_close]


def _matching_close(tokens: list[Token], i: int) -> int | None:
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j].nesting if tokens[j].type.startswith(("blockquote", "callout")) else 0
        if depth == 0:
            return j
    return None


def _admonition(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """`:::type Title` … `:::` (nested ones need more colons or close in order)."""
    pos = state.bMarks[start] + state.tShift[start]
    if state.sCount[start] - state.blkIndent >= 4 or state.src[pos : pos + 3] != ":::":
        return False
    line = state.src[state.bMarks[start] : state.eMarks[start]]
    opening = ADMONITION_RE.match(line)
    if not opening:
        return False
    if silent:
        return True
    depth, close, line_no = 1, None, start + 1
    while line_no < end:
        if state.sCount[line_no] < state.blkIndent:
            break
        text = state.src[state.bMarks[line_no] : state.eMarks[line_no]]
        if ":::" in text:
            if ADMONITION_END_RE.match(text):
                depth -= 1
                if depth == 0:
                    close = line_no
                    break
            elif ADMONITION_RE.match(text):
                depth += 1
        line_no += 1
    last = close if close is not None else end
    kind = callout_kind(opening.group(2))
    title = (opening.group(3) or opening.group(4) or "").strip() or opening.group(2).capitalize()
    token = state.push("callout_open", "div", 1)
    token.attrSet("class", f"pmd-callout pmd-callout-{kind}")
    token.map = [start, last + 1 if close is not None else last]
    state.push("callout_title_open", "div", 1).attrSet("class", "pmd-callout-title")
    title_inline = state.push("inline", "", 0)
    title_inline.content, title_inline.map, title_inline.children = title, [start, start + 1], []
    state.push("callout_title_close", "div", -1)
    old_parent, old_max = state.parentType, state.lineMax
    state.parentType, state.lineMax = "admonition", last
    state.md.block.tokenize(state, start + 1, last)
    state.parentType, state.lineMax = old_parent, old_max
    state.push("callout_close", "div", -1)
    state.line = last + 1 if close is not None else last
    return True


def _wikilink(state: StateInline, silent: bool) -> bool:
    """`[[target#heading|shown]]` and `![[…]]`."""
    pos, src = state.pos, state.src
    embed = src.startswith("![[", pos)
    if not embed and not src.startswith("[[", pos):
        return False
    begin = pos + (3 if embed else 2)
    end = _WIKILINK_INNER_RE.match(src, begin, state.posMax).end()  # up to the next bracket or line end
    if end == begin or not src.startswith("]]", end) or end + 2 > state.posMax:
        return False
    inner = src[begin:end]
    if not silent:
        target, _, shown = inner.replace("\\|", "|").partition("|")
        target, _, heading = target.partition("#")
        token = state.push("wikilink", "a", 0)
        token.meta = {"target": target.strip(), "heading": heading.strip(), "shown": shown.strip(), "embed": embed}
    state.pos = end + 2
    return True


def _highlight(state: StateInline, silent: bool) -> bool:
    """`==text==` as <mark> (not across lines, no blank just inside the marks)."""
    pos, src = state.pos, state.src
    if not src.startswith("==", pos) or pos + 2 >= state.posMax or src[pos + 2] in " \t\n=":
        return False
    failed = state.env.get("_pmd_no_mark_after")
    if failed and failed[0] is src and failed[1] <= pos:
        return False  # no closing `==` is left in this paragraph: none will be found later either
    end = src.find("==", pos + 2, state.posMax)
    if end == -1:
        state.env["_pmd_no_mark_after"] = (src, pos)
        return False
    if src[end - 1] in " \t\n" or "\n" in src[pos:end]:
        return False
    if not silent:
        old_max = state.posMax
        state.push("mark_open", "mark", 1)
        state.pos, state.posMax = pos + 2, end
        state.md.inline.tokenize(state)
        state.posMax = old_max
        state.push("mark_close", "mark", -1)
    state.pos = end + 2
    return True


def _include(state: StateInline, silent: bool) -> bool:
    """mdBook `{{#include file}}`: a reference, never read."""
    if not state.src.startswith("{{#", state.pos):
        return False
    match = INCLUDE_RE.match(state.src, state.pos, state.posMax)
    if not match:
        return False
    if not silent:
        token = state.push("mdbook_include", "code", 0)
        token.meta = {"what": match.group(1), "file": match.group(2).strip()}
    state.pos = match.end()
    return True


def _block_ids(state: StateCore) -> None:
    """A block ending in ` ^id` gets an anchor (block_anchor) instead of that text (in an embedded
    section, the text goes and no anchor is made: the ids are the embedding page's)."""
    from markdown_it.token import Token  # noqa: PLC0415 - start-up time: loaded when a note is rendered

    for token in state.tokens:
        if token.type != "inline" or "^" not in token.content or not token.children:
            continue
        last = token.children[-1]
        if last.type != "text":
            continue
        match = BLOCK_ID_RE.search(last.content)
        if not match or match.end() != len(last.content):
            continue
        last.content = last.content[: match.start()].rstrip()
        if state.env.get("pmd_embedded"):
            continue
        anchor = Token("block_anchor", "span", 0)
        anchor.meta = {"id": match.group(1)}
        token.children.insert(0, anchor)


def _heading_anchors(state: StateCore) -> None:
    """Each heading gets an anchor (heading_anchor) for links to it; of two alike, the first."""
    from markdown_it.token import Token  # noqa: PLC0415 - start-up time: loaded when a note is rendered

    if state.env.get("pmd_embedded"):  # an embedded section's headings: the ids are the page's
        return
    seen: set[str] = set()
    tokens = state.tokens
    for i, token in enumerate(tokens[:-1]):
        inline = tokens[i + 1]
        if token.type != "heading_open" or inline.type != "inline" or inline.children is None:
            continue
        words = "".join(child.content for child in inline.children if child.type in ("text", "code_inline"))
        anchor_id = heading_anchor(words or inline.content)
        if anchor_id in seen:
            continue
        seen.add(anchor_id)
        anchor = Token("heading_anchor", "span", 0)
        anchor.meta = {"id": anchor_id}
        inline.children.insert(0, anchor)


_TASK_RE = LazyPattern(r"\[([ xX])\][ \t]+")


def _tasks(state: StateCore) -> None:
    """A list item opening with `[ ]` or `[x]` is a task: a checkbox (disabled: the page does not
    write the note), its words the checkbox's label."""
    from markdown_it.token import Token  # noqa: PLC0415 - start-up time: loaded when a note is rendered

    tokens = state.tokens
    for i in range(2, len(tokens)):
        inline = tokens[i]
        if inline.type != "inline" or tokens[i - 1].type != "paragraph_open" or tokens[i - 2].type != "list_item_open":
            continue
        children = inline.children or []
        first = next((child for child in children if child.type != "block_anchor"), None)
        match = _TASK_RE.match(first.content) if first is not None and first.type == "text" else None
        if match is None:
            continue
        first.content = first.content[match.end() :]
        done = " checked" if match.group(1) != " " else ""
        opening = Token("html_inline", "", 0)
        opening.content = f'<label class="pmd-task"><input type="checkbox" disabled{done}> '
        closing = Token("html_inline", "", 0)
        closing.content = "</label>"
        inline.children = [opening, *children, closing]
        tokens[i - 2].attrSet("class", "pmd-task-item")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _render_wikilink(self, tokens, idx, options, env) -> str:
    meta = tokens[idx].meta
    targets: LinkTargets = env.get("pmd_links") or LinkTargets()
    target, heading, shown, embed = meta["target"], meta["heading"], meta["shown"], meta["embed"]
    if embed and is_image(target):
        url = targets.image_url(target)
        alt = target.rsplit("/", 1)[-1]
        size = _SIZE_RE.fullmatch(shown) if shown else None
        if url is None:
            return f'<span class="pmd-unresolved pmd-embed">{_escape(alt)}</span>'
        dims = ""
        if size:
            dims = f' width="{size.group(1)}"' + (f' height="{size.group(2)}"' if size.group(2) else "")
        elif shown:
            alt = shown
        return f'<img class="pmd-embed" src="{_escape(url)}" alt="{_escape(alt)}"{dims}>'
    if shown:
        label = shown
    elif embed and heading:
        label = f"{target} › {heading.lstrip('^')}" if target else heading.lstrip("^")
    else:
        label = target + (f"#{heading}" if heading else "") if target else heading
    kind = "pmd-embed" if embed else "pmd-wikilink"
    url = targets.note_url(target) if target else ""  # [[#Heading]], [[#^id]]: this note
    if url is None:
        return f'<span class="{kind} pmd-unresolved">{_escape(label)}</span>'
    href = url + link_fragment(heading)
    link = f'<a class="{kind}" href="{_escape(href or "#")}">{_escape(label)}</a>'
    alone = meta.get("alone") and not env.get("pmd_embedded")
    shown_text = targets.embed_text(target, heading) if embed and target and alone else None
    if not shown_text:
        return link
    # The embedded words in place, as Obsidian shows them; what they embed stays a link (no loops).
    inner = markdown_reader().render(without_comments(shown_text), {**env, "pmd_embedded": True})
    return f'<div class="pmd-embed-note"><p class="pmd-embed-title">{link}</p>{inner}</div>'


def _embeds_alone(state: StateCore) -> None:
    """A note embed alone in its paragraph may be shown in place (_render_wikilink): the paragraph
    is then not a <p> of its own, so the embedded blocks are not inside one."""
    tokens = state.tokens
    for i in range(len(tokens) - 2):
        if tokens[i].type != "paragraph_open" or tokens[i + 1].type != "inline":
            continue
        children = [c for c in tokens[i + 1].children or [] if not (c.type == "text" and not c.content.strip())]
        if len(children) != 1 or children[0].type != "wikilink":
            continue
        meta = children[0].meta
        if meta["embed"] and not is_image(meta["target"]) and meta["target"]:
            meta["alone"] = True
            tokens[i].hidden = tokens[i + 2].hidden = True


def _render_include(self, tokens, idx, options, env) -> str:
    meta = tokens[idx].meta
    return f'<span class="pmd-include">{_escape(meta["what"])} <code>{_escape(meta["file"])}</code></span>'


def _render_block_anchor(self, tokens, idx, options, env) -> str:
    return f'<span class="pmd-block" id="{_escape(block_anchor(tokens[idx].meta["id"]))}"></span>'


def _render_heading_anchor(self, tokens, idx, options, env) -> str:
    return f'<span class="pmd-anchor" id="{_escape(tokens[idx].meta["id"])}"></span>'


@lru_cache(maxsize=1)
def markdown_reader() -> MarkdownIt:
    """The markdown-it reader of notes: CommonMark, tables, strikethrough, HTML (sanitised by
    whoever renders), and the dialects above. Parse `without_comments(text)`."""
    from markdown_it import MarkdownIt  # noqa: PLC0415 - start-up time: loaded when a note is rendered

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.block.ruler.before(
        "fence", "pmd_admonition", _admonition, {"alt": ["paragraph", "reference", "blockquote", "list"]}
    )
    md.inline.ruler.before("link", "pmd_wikilink", _wikilink)
    md.inline.ruler.before("emphasis", "pmd_highlight", _highlight)
    md.inline.ruler.before("text", "pmd_include", _include)
    md.core.ruler.after("block", "pmd_callouts", _callouts)
    md.core.ruler.after("inline", "pmd_block_ids", _block_ids)
    md.core.ruler.after("pmd_block_ids", "pmd_heading_anchors", _heading_anchors)
    md.core.ruler.after("pmd_heading_anchors", "pmd_tasks", _tasks)
    md.core.ruler.after("pmd_tasks", "pmd_embeds_alone", _embeds_alone)
    md.add_render_rule("wikilink", _render_wikilink)
    md.add_render_rule("mdbook_include", _render_include)
    md.add_render_rule("block_anchor", _render_block_anchor)
    md.add_render_rule("heading_anchor", _render_heading_anchor)
    return md
