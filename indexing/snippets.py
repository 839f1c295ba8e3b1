"""A result's snippet as a person reads it: the note's words without their markdown, under the
headings it sits in.

The retrievers cut a snippet from the note's source (lines, long lines in pieces); every face that
shows one to a person (web, `pmd search`, the API's and MCP's `text`) shows this reading of it:

- no markup: heading hashes, quote and callout markers, list and task markers (a task is ☐ / ☑),
  emphasis, links (their words), wikilinks (their shown name), table pipes, HTML tags, comments;
- no frontmatter: a snippet that starts in it reads from the first words after it;
- code only when a match is in code: then the code lines as they are, flagged `code`;
- the heading path of its first line (a heading that opens the snippet goes to the path);
- the match offsets moved with the words, so the same words are highlighted.

Everything is computed on text: escaping is the face's (the web escapes before it marks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from indexing.patterns import LazyPattern

# One character of the reading and the offset in the snippet it came from (-1: added by the reading).
_Chars = list[tuple[str, int]]

READING_CHARS = 320  # longest reading shown; cut at a word around the first match
_FENCE = LazyPattern(r"[ \t]*(`{3,}|~{3,})")  # indented too: a fence in a list item
_HEADING = LazyPattern(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FRONTMATTER_END = LazyPattern(r"(?:---|\.\.\.|\+\+\+)[ \t]*$")
_QUOTE = LazyPattern(r"[ \t]*(?:>[ \t]?)+")
_CALLOUT = LazyPattern(r"\[!([A-Za-z][\w-]{0,39})\][+-]?[ \t]*")
_LIST = LazyPattern(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_TASK = LazyPattern(r"\[([^\]\n])\][ \t]+")
_RULE = LazyPattern(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_TABLE_SEPARATOR = LazyPattern(r"[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$")
_TABLE_PIPE = LazyPattern(r"[ \t]*(?<!\\)\|[ \t]*")
_BLOCK_ID = LazyPattern(r"[ \t]+\^[A-Za-z0-9-]+[ \t]*$")
_ELLIPSIS = "…"

# Inline markup, in the order it is read: (pattern, the groups kept; none: the match goes).
_INLINE = (
    (LazyPattern(r"%%.*?%%|<!--.*?-->"), ()),
    (
        LazyPattern(
            r"!\[\[[^\]\n]*\.(?:png|jpe?g|gif|svg|webp|bmp|avif|pdf|mp[34]|webm|ogg|wav)(?:[|\ue07c][^\]\n]*)?\]\]",
            re.IGNORECASE,
        ),
        (),
    ),
    # `[[Note|shown]]`, and `[[Note\|shown]]` as a table cell escapes its bar (held: \ue07c)
    (LazyPattern(r"!?\[\[[^\]|\ue07c\n]*[|\ue07c]([^\]\n]+)\]\]"), (1,)),
    (LazyPattern(r"!?\[\[([^\]#|\n]+)#\^[^\]\n]*\]\]"), (1,)),
    (LazyPattern(r"!?\[\[#\^?([^\]\n]+)\]\]"), (1,)),
    (LazyPattern(r"!?\[\[([^\]#|\n]+)#([^\]\n]+)\]\]"), (1, " › ", 2)),
    (LazyPattern(r"!?\[\[#?([^\]\n]+)\]\]"), (1,)),
    (LazyPattern(r"!\[([^\]\n]*)\]\([^)\n]*\)"), (1,)),
    (LazyPattern(r"\[([^\]\n]+)\]\([^)\n]*\)"), (1,)),
    (LazyPattern(r"\[([^\]\n^]+)\]\[[^\]\n]*\]"), (1,)),
    (LazyPattern(r"\[\^[^\]\n]+\]"), ()),
    (LazyPattern(r"<(https?://[^>\s]+)>"), (1,)),
    (LazyPattern(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>"), ()),
    (LazyPattern(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), (1,)),
    (LazyPattern(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"), (1,)),
    (LazyPattern(r"~~(?=\S)(.+?)(?<=\S)~~"), (1,)),
    (LazyPattern(r"==(?=\S)(.+?)(?<=\S)=="), (1,)),
    (LazyPattern(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), (1,)),
    (LazyPattern(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)"), (1,)),
    # what a cut left of a pair
    (LazyPattern(r"\*\*|__|~~|==|\[\[|\]\]"), ()),
)
_SPACES = LazyPattern(r"\s{2,}")


@dataclass
class Reading:
    text: str
    highlights: list[tuple[int, int]] = field(default_factory=list)  # [start, end) offsets into text
    headings: list[str] = field(default_factory=list)  # the heading path, outermost first
    code: bool = False  # the text is code (a match is in a code block): shown as code


def _chars(text: str, offset: int) -> _Chars:
    return [(ch, offset + i) for i, ch in enumerate(text)]


def _plain(chars: _Chars) -> str:
    return "".join(ch for ch, _ in chars)


def _sub(chars: _Chars, pattern, keep, text: str | None = None) -> _Chars:
    """`chars` with each match of `pattern` replaced by the groups (numbers) and words (str) of `keep`
    (`text`: the characters' text, when the caller has it)."""
    text = _plain(chars) if text is None else text
    if pattern.search(text) is None:  # most lines hold most markup not at all
        return chars
    out: _Chars = []
    position = 0
    for match in pattern.finditer(text):
        out.extend(chars[position : match.start()])
        for part in keep:
            if isinstance(part, str):
                out.extend((ch, -1) for ch in part)
            elif match.group(part) is not None:
                out.extend(chars[match.start(part) : match.end(part)])
        position = match.end()
    out.extend(chars[position:])
    return out


_ESCAPABLE = "\\`*_{}[]()#+-.!|>~="
_ESCAPED = 0xE000  # private-use characters stand for escaped ones while the markup is read


_CODE_SPAN = LazyPattern(r"(`+)(.+?)\1")


def _held(ch: str) -> str:
    return chr(_ESCAPED + ord(ch)) if ord(ch) < 128 else ch


def inline_reading(chars: _Chars) -> _Chars:
    """A line's words without their inline markup: a backslash-escaped character is a character, and
    what a code span holds is its words as written (`[[x]]` in backticks stays `[[x]]`)."""
    text = _plain(chars)
    if not any(mark in text for mark in "\\`*_~=[]<>%^!"):
        return chars
    held: _Chars = []
    i = 0
    while i < len(chars):
        ch, source = chars[i]
        if ch == "\\" and i + 1 < len(chars) and chars[i + 1][0] in _ESCAPABLE:
            held.append((_held(chars[i + 1][0]), chars[i + 1][1]))
            i += 2
            continue
        held.append((ch, source))
        i += 1
    held = _sub_code_spans(held)
    text = _plain(held)
    for pattern, keep in _INLINE:
        if pattern.search(text) is not None:
            held = _sub(held, pattern, keep, text)
            text = _plain(held)
    return [(chr(ord(ch) - _ESCAPED) if _ESCAPED <= ord(ch) < _ESCAPED + 128 else ch, s) for ch, s in held]


def _sub_code_spans(chars: _Chars) -> _Chars:
    """Code spans without their backticks, their characters held from the markup passes."""
    text = _plain(chars)
    if "`" not in text:
        return chars
    out: _Chars = []
    position = 0
    for match in _CODE_SPAN.finditer(text):
        out.extend(chars[position : match.start()])
        out.extend((_held(ch), source) for ch, source in chars[match.start(2) : match.end(2)])
        position = match.end()
    out.extend(chars[position:])
    return out


def heading_text(source: str) -> str:
    """A heading's words as shown (its links and emphasis read)."""
    return _plain(inline_reading(_chars(source, 0))).strip()


def _line_reading(line: str, offset: int) -> tuple[_Chars | None, bool, bool]:
    """(the words of one source line outside code, whether they start a line, whether they end
    one); None: nothing to read."""
    if not line.strip() or _RULE.match(line) or _TABLE_SEPARATOR.match(line):
        return None, True, True
    chars = _chars(line, offset)
    starts = ends = False
    heading = _HEADING.match(line)
    if heading:
        chars = chars[heading.start(2) : heading.end(2)]
        starts = ends = True
    quote = _QUOTE.match(_plain(chars))
    if quote and quote.end() > 0:
        chars = chars[quote.end() :]
    callout = _CALLOUT.match(_plain(chars))
    if callout:
        starts = ends = True
        rest = chars[callout.end() :]
        chars = rest if _plain(rest).strip() else [(ch, -1) for ch in callout.group(1).capitalize()]
    item = _LIST.match(_plain(chars))
    if item:
        chars = chars[item.end() :]
        starts = True
        task = _TASK.match(_plain(chars))
        if task:
            mark = "☐ " if task.group(1) == " " else "☑ "
            chars = [(ch, -1) for ch in mark] + chars[task.end() :]
    stripped = _plain(chars).strip()
    if stripped.startswith("|") or (stripped.endswith("|") and "|" in stripped[:-1]):
        chars = _sub(chars, _TABLE_PIPE, (" · ",))
        starts = ends = True
    chars = _sub(chars, _BLOCK_ID, ())
    chars = inline_reading(chars)
    chars = _sub(chars, _SPACES, (" ",))
    text = _plain(chars)
    lead = len(text) - len(text.lstrip(" ·"))
    trail = len(text.rstrip(" ·"))
    chars = chars[lead:trail]
    return (chars or None), starts, ends


def _kinds(body: str, until: int) -> tuple[dict[int, str], list[tuple[int, int, str]]]:
    """The kind of each source line 1…until that is not prose ("frontmatter", "fence", "code"),
    and the headings up to it ((line, level, source text))."""
    kinds: dict[int, str] = {}
    headings: list[tuple[int, int, str]] = []
    lines = body.split("\n", until)[:until]
    fence = ""
    number = 1
    if lines and lines[0].rstrip() in ("---", "+++"):
        for number, line in enumerate(lines, start=1):
            kinds[number] = "frontmatter"
            if number > 1 and _FRONTMATTER_END.match(line):
                break
        else:
            number = len(lines)
        number += 1
    for number, line in enumerate(lines[number - 1 :], start=number):
        quoted = _QUOTE.match(line)  # a fence in a quote or a callout is a fence too
        opening = _FENCE.match(line, quoted.end() if quoted else 0)
        if fence:
            kinds[number] = "code"
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                kinds[number] = "fence"
                fence = ""
            continue
        if opening:
            kinds[number] = "fence"
            fence = opening.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            headings.append((number, len(heading.group(1)), heading.group(2)))
    return kinds, headings


def _heading_path(headings: list[tuple[int, int, str]], before: int, title: str) -> list[str]:
    path: list[tuple[int, str]] = []
    for number, level, source in headings:
        if number >= before:
            break
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, source))
    names = [name for name in (heading_text(source) for _, source in path) if name]
    if names and title and names[0].casefold() == title.strip().casefold():
        names = names[1:]
    return names


def _moved(highlights, chars: _Chars) -> list[tuple[int, int]]:
    """The snippet's [start, end) highlights as offsets into the reading's characters."""
    moved = []
    for start, end in highlights or []:
        inside = [i for i, (_, source) in enumerate(chars) if start <= source < end]
        if inside:
            moved.append((inside[0], inside[-1] + 1))
    return sorted(set(moved))


def _cut(chars: _Chars, highlights: list[tuple[int, int]]) -> _Chars:
    """At most READING_CHARS characters, cut at spaces, keeping the first match in view."""
    if len(chars) <= READING_CHARS:
        return chars
    text = _plain(chars)
    first = highlights[0][0] if highlights else 0
    start = max(0, min(first - READING_CHARS // 3, len(text) - READING_CHARS))
    if start:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < first else start
    end = start + READING_CHARS
    space = text.rfind(" ", start, end)
    end = space if space > max(start, first) else end
    return ([(_ELLIPSIS, -1)] if start else []) + chars[start:end] + ([(_ELLIPSIS, -1)] if end < len(text) else [])


def snippet_reading(snippet: str, highlights, *, line: int = 1, body: str | None = None, title: str = "") -> Reading:
    """The reading of `snippet` (cut from `body` at 1-based `line`; its highlights are offsets into
    it). Without the body the snippet alone is read (no heading path, fences seen inside it only)."""
    pieces = snippet.split("\n")
    line = max(1, line or 1)
    kinds: dict[int, str] = {}
    headings: list[tuple[int, int, str]] = []
    if body is not None:
        first = pieces[0].strip().strip(_ELLIPSIS).strip()
        body_lines = body.split("\n", line + len(pieces))
        if line <= len(body_lines) and first in body_lines[line - 1]:
            kinds, headings = _kinds(body, line + len(pieces))
        else:  # the snippet is not where its line says (a converted file's text): read it alone
            body = None
    if body is None:
        local, _ = _kinds(snippet, len(pieces))
        kinds = {line + n - 1: kind for n, kind in local.items() if kind != "frontmatter"}
        if snippet.startswith(("---", "+++")) and line == 1:
            kinds.update({line + n - 1: kind for n, kind in local.items() if kind == "frontmatter"})
    offsets, position = [], 0
    for piece in pieces:
        offsets.append(position)
        position += len(piece) + 1
    in_code = {
        n
        for n, piece in enumerate(pieces)
        if kinds.get(line + n) == "code"
        and any(offsets[n] <= start < offsets[n] + len(piece) for start, _ in highlights or [])
    }
    if in_code:  # the match is in code: that code, as it is written
        block: list[int] = []
        for n in range(len(pieces)):
            if kinds.get(line + n) == "code":
                block.append(n)
            elif block and any(k in in_code for k in block):
                break
            else:
                block = []
        chars: _Chars = []
        for n in block:
            if chars:
                chars.append(("\n", -1))
            chars.extend(_chars(pieces[n], offsets[n]))
        moved = _moved(highlights, chars)
        return Reading(_plain(chars), moved, _heading_path(headings, line + block[0], title), code=True)
    chars = []
    opened = line  # the source line the reading starts at (for its heading path)
    ended = False  # the line before ended its line (a heading, a callout's title, a table row)
    for n, piece in enumerate(pieces):
        if kinds.get(line + n) in ("frontmatter", "fence", "code"):
            continue
        read, starts, ends = _line_reading(piece, offsets[n])
        if read is None:
            if chars and chars[-1][0] != "\n":
                chars.append(("\n", -1))
            continue
        heading = _HEADING.match(piece)
        if heading and not chars:  # a heading opening the snippet: it is the path's last step
            headings = [*headings, (line + n, len(heading.group(1)), heading.group(2))]
            opened = line + n + 1
            continue
        if not chars:
            opened = line + n
        if chars and chars[-1][0] != "\n":
            chars.append(("\n", -1) if starts or ended else (" ", -1))
        chars.extend(read)
        ended = ends
    while chars and chars[-1][0] == "\n":
        chars.pop()
    if not chars and body is not None and kinds.get(line) == "frontmatter":
        return _after_frontmatter(body, kinds, title)
    moved = _moved(highlights, chars)
    chars = _cut(chars, moved)
    return Reading(_plain(chars), _moved(highlights, chars), _heading_path(headings, opened, title))


# What a cut at either end of a sentence left of a link: `…words](url)`, `…Note|shown]]`, `[words](ur…`.
_CUT_LINK_START = LazyPattern(r"^…(?:[^\[\]\n|]*\|)?([^\[\]\n|]*)\](?:\]|\([^)\s]*\))")
_CUT_LINK_END = LazyPattern(r"!?\[\[?(?:[^\[\]\n|]*\|)?([^\[\]\n|]*)(?:\]\([^)\s]*)?…$")


def sentence_reading(sentence: str) -> str:
    """A sentence cut from a note (the words around a link) as a person reads it: the snippets'
    reading, so a backlink's context and a search result read the same; a link cut at either end
    of it keeps its words."""
    if not sentence:
        return ""
    sentence = _CUT_LINK_START.sub(lambda m: "…" + m.group(1), sentence, count=1)
    sentence = _CUT_LINK_END.sub(lambda m: m.group(1) + "…", sentence, count=1)
    return snippet_reading(sentence, []).text


def _after_frontmatter(body: str, kinds: dict[int, str], title: str) -> Reading:
    """A snippet that was all frontmatter: the note's first words after it, instead."""
    end = max(n for n, kind in kinds.items() if kind == "frontmatter")
    lines = body.split("\n", end + 12)[end : end + 12]
    return snippet_reading("\n".join(lines), [], line=end + 1, body=body, title=title)
