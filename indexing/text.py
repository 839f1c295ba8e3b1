"""Reading markdown files: decoding, frontmatter and titles."""

from __future__ import annotations

import hashlib
import html
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime

from indexing.patterns import LazyPattern

_FRONTMATTER_RE = LazyPattern(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
# TOML frontmatter (Hugo, Zola, mdBook): `+++` lines around it.
_TOML_FRONTMATTER_RE = LazyPattern(r"\A\+\+\+[ \t]*\r?\n(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|\Z)", re.S)
FRONTMATTER_OPENINGS = ("---", "+++")
BINARY_SNIFF_BYTES = 8192


class BinaryFile(ValueError):
    pass


@dataclass
class ParsedMarkdown:
    body: str
    title: str
    frontmatter: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def hash(self) -> str:
        return content_hash(self.body)


def content_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def decode(raw: bytes) -> tuple[str, list[str]]:
    """UTF-8 text from file bytes; invalid bytes become U+FFFD with a warning."""
    if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
        raise BinaryFile("binary file (NUL bytes): skipped")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    warnings = []
    if nuls := raw.count(b"\x00"):  # past the sniffed start: PostgreSQL stores no NUL in text
        raw = raw.replace(b"\x00", "\ufffd".encode())
        warnings.append(f"{nuls} NUL byte(s) replaced with U+FFFD")
    try:
        return raw.decode("utf-8"), warnings
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        return text, [*warnings, f"invalid UTF-8 at byte {exc.start}: {bad} character(s) replaced with U+FFFD"]


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# Frontmatter is data a note's author writes, parsed on every scan: its cost is bounded by its
# size, as YAML aliases (which let 500 bytes stand for billions of values) are refused, nesting is
# capped (the composer recurses) and a deadline is checked while its events are read.
FRONTMATTER_MAX_CHARS = 64 * 1024
FRONTMATTER_MAX_DEPTH = 32
FRONTMATTER_MAX_SECONDS = 5.0


class FrontmatterRefused(ValueError):
    """Frontmatter pmd will not read: the note is indexed without it."""


def _frontmatter_load(source: str):
    """YAML's safe load, after a pass over its events that refuses aliases, deep nesting and overtime.
    PyYAML is imported here, when a note's frontmatter is read: a search never reads it (start-up)."""
    import yaml  # noqa: PLC0415 - start-up time: a search never reads frontmatter

    # libyaml when installed (PyYAML's wheels include it): the pure-Python parser reads about 30 KB/s.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    opens = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    closes = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    deadline = time.monotonic() + FRONTMATTER_MAX_SECONDS
    depth = 0
    for count, event in enumerate(yaml.parse(source, Loader=loader)):
        if isinstance(event, yaml.AliasEvent):
            raise FrontmatterRefused("it uses YAML aliases (*name), which pmd does not expand")
        if isinstance(event, opens):
            depth += 1
            if depth > FRONTMATTER_MAX_DEPTH:
                raise FrontmatterRefused(f"it nests deeper than {FRONTMATTER_MAX_DEPTH} levels")
        elif isinstance(event, closes):
            depth -= 1
        if count % 1024 == 0 and time.monotonic() > deadline:
            raise FrontmatterRefused(f"it took more than {FRONTMATTER_MAX_SECONDS:g} s to read")
    return yaml.load(source, Loader=loader)


def _toml_depth_refusal(source: str) -> str:
    """Why TOML frontmatter nests too deep to read (tomllib recurses into inline tables and
    arrays), else "". Brackets inside strings count too: a rare false refusal, never a crash."""
    depth = 0
    for char in source:
        if char in "[{":
            depth += 1
            if depth > FRONTMATTER_MAX_DEPTH:
                return f"it nests deeper than {FRONTMATTER_MAX_DEPTH} levels"
        elif char in "]}":
            depth = max(0, depth - 1)
    return ""


def parse_toml_frontmatter(text: str) -> tuple[dict, list[str]]:
    """`+++` TOML frontmatter, read as YAML frontmatter is: bounded in size and depth, its values JSON-able."""
    match = _TOML_FRONTMATTER_RE.match(text)
    if not match:
        return {}, []
    source = match.group(1)
    if len(source) > FRONTMATTER_MAX_CHARS:
        return {}, [f"frontmatter is longer than {FRONTMATTER_MAX_CHARS:,} characters: ignored"]
    refusal = _toml_depth_refusal(source)
    if refusal:
        return {}, [f"frontmatter refused, {refusal}: ignored"]
    import tomllib  # noqa: PLC0415 - start-up time: a search never reads frontmatter

    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        return {}, [f"frontmatter is not valid TOML ({first}): ignored"]
    except RecursionError:
        return {}, [f"frontmatter refused, it nests deeper than {FRONTMATTER_MAX_DEPTH} levels: ignored"]
    return _jsonable(data), []


def parse_frontmatter(text: str) -> tuple[dict, list[str]]:
    if text.startswith("+++"):
        return parse_toml_frontmatter(text)
    if not text.startswith("---"):
        return {}, []
    match = _FRONTMATTER_RE.match(text)
    if not match:
        return {}, []
    source = match.group(1)
    if len(source) > FRONTMATTER_MAX_CHARS:
        return {}, [f"frontmatter is longer than {FRONTMATTER_MAX_CHARS:,} characters: ignored"]
    import yaml  # noqa: PLC0415 - start-up time: a search never reads frontmatter

    try:
        data = _frontmatter_load(source)
    except FrontmatterRefused as exc:
        return {}, [f"frontmatter refused, {exc}: ignored"]
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        return {}, [f"frontmatter is not valid YAML ({first}): ignored"]
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return {}, ["frontmatter is not a mapping: ignored"]
    return _jsonable(data), []


def strip_frontmatter(text: str) -> str:
    match = (
        _FRONTMATTER_RE.match(text)
        if text.startswith("---")
        else _TOML_FRONTMATTER_RE.match(text)
        if text.startswith("+++")
        else None
    )
    return text[match.end() :] if match else text


# How notes are read (titles, tags, links): a change here that alters what is stored for an
# unchanged note bumps it, so each collection's next scan reads every note again.
NOTE_READING_VERSION = 4  # 4: a level-1 heading after a section heading is no title


def note_reading(title_from: str) -> str:
    """What a collection's stored titles, tags and links were read with (Collection.reading)."""
    return f"{NOTE_READING_VERSION}:{title_from}"


TITLE_FROM_HEADING = "heading"
TITLE_FROM_FILENAME = "filename"
TITLE_MAX = 1000

_H1_ATX_RE = LazyPattern(r" {0,3}#(?:[ \t]+(.*))?$")  # with .match on one line: `#` then a blank or nothing
_SETEXT_H1_RE = LazyPattern(r" {0,3}=+[ \t]*$")
_FENCE_LINE_RE = LazyPattern(r" {0,3}(`{3,}|~{3,})")
_HTML_H1_OPEN_RE = LazyPattern(r"<h1(?:\s[^<>]*)?>", re.I)
# An HTML heading is one when its line starts with it (an HTML block); `<h1>` in a sentence or in
# inline code is an example of one (a note about HTML), not the note's title.
_HTML_H1_LINE_RE = LazyPattern(r" {0,3}<h1(?:[\s>]|$)", re.I)
_HTML_H1_CLOSE = "</h1>"
# A section heading (levels 2 to 6, ATX, HTML or setext `---`): the body has begun.
_SECTION_ATX_RE = LazyPattern(r" {0,3}#{2,6}(?:[ \t]|$)")
_SECTION_HTML_RE = LazyPattern(r" {0,3}<h[2-6](?:[\s>]|$)", re.I)
_SETEXT_H2_RE = LazyPattern(r" {0,3}-+[ \t]*$")
_PARAGRAPH_BREAK_RE = LazyPattern(r" {0,3}(?:[-*+>|]|#{1,6}(?:[ \t]|$)|\d{1,9}[.)]|<)")  # a line no setext text can be


def extract_title(text: str, frontmatter: dict, fallback: str, *, title_from: str = TITLE_FROM_HEADING) -> str:
    """Frontmatter `title`, else the first level-1 heading without its markup, else the file name;
    with `title_from="filename"` (an Obsidian vault, where the file name is the title) the file name."""
    name = fallback.rsplit("/", 1)[-1]
    name = (name.rsplit(".", 1)[0] if "." in name else name)[:TITLE_MAX]
    if title_from == TITLE_FROM_FILENAME:
        return name
    title = frontmatter.get("title")
    if isinstance(title, (str, int, float)) and not isinstance(title, bool) and str(title).strip():
        return str(title).strip()[:TITLE_MAX]
    for heading in title_headings(strip_frontmatter(text)):
        plain = plain_title(heading)
        if plain:  # a heading of badges only says nothing: the next one may
            return plain
    return name


def title_headings(body: str) -> Iterator[str]:
    """The body's level-1 headings (ATX `# x`, setext `x` over `===`, `<h1>x</h1>`) as written,
    in order, up to its first section heading (`## x`…): a level-1 heading inside a section is an
    example or a part of the note (a note about markdown shows `<h1>`), not its title. Fenced
    code is skipped."""
    fence = ""
    paragraph: list[str] = []  # the lines a setext underline would make a heading
    lines = body.splitlines()
    for i, line in enumerate(lines):
        opened = _FENCE_LINE_RE.match(line)
        if fence:
            if (
                opened
                and opened.group(1)[0] == fence[0]
                and len(opened.group(1)) >= len(fence)
                and not line[opened.end() :].strip()
            ):
                fence = ""
            continue
        if opened:
            fence, paragraph = opened.group(1), []
            continue
        if paragraph and _SETEXT_H1_RE.match(line):
            yield " ".join(paragraph)
            paragraph = []
            continue
        if _SECTION_ATX_RE.match(line) or _SECTION_HTML_RE.match(line) or (paragraph and _SETEXT_H2_RE.match(line)):
            return
        atx = _H1_ATX_RE.match(line)
        if atx:
            yield _atx_text(atx.group(1) or "")
        elif _HTML_H1_LINE_RE.match(line):
            inner = _html_h1(lines, i)
            if inner is not None:
                yield inner
        stripped = line.strip()
        if not stripped or _PARAGRAPH_BREAK_RE.match(line) or (line.startswith("    ") and not paragraph):
            paragraph = []
        elif len(paragraph) < 5:
            paragraph.append(stripped[:_HTML_H1_MAX_CHARS])


def _atx_text(raw: str) -> str:
    """An ATX heading's text: its closing `#`s (after a blank) and blanks stripped (`# C#` keeps its `#`)."""
    kept = raw.strip(" \t")
    if kept.endswith("#"):
        before = kept.rstrip("#")
        if not before or before.endswith((" ", "\t")):
            kept = before.rstrip(" \t")
    return kept


_HTML_H1_MAX_LINES = 20
_HTML_H1_MAX_CHARS = 4000


def _html_h1(lines: list[str], i: int) -> str | None:
    """`<h1 …>…</h1>` starting on line i (it may run over a few lines), its inner HTML; None if not one.
    Only the next few lines, and a few thousand characters of them, are looked at."""
    taken, size = [], 0
    for line in lines[i : i + _HTML_H1_MAX_LINES]:
        taken.append(line[:_HTML_H1_MAX_CHARS])
        size += len(taken[-1])
        if size > _HTML_H1_MAX_CHARS:
            break
    chunk = "\n".join(taken)
    opening = _HTML_H1_OPEN_RE.search(chunk)
    if opening is None or "\n" in chunk[: opening.start()]:
        return None
    close = chunk.lower().find(_HTML_H1_CLOSE, opening.end())
    if close == -1:
        return None
    return chunk[opening.end() : close]


# --- a title without its markup ------------------------------------------------------------------

_IMAGE_RE = LazyPattern(r"!\[[^\[\]\n]*\](?:\([^()\n]*(?:\([^()\n]*\)[^()\n]*)*\)|\[[^\[\]\n]*\])?")
_LINK_RE = LazyPattern(r"\[([^\[\]\n]*)\](?:\([^()\n]*(?:\([^()\n]*\)[^()\n]*)*\)|\[[^\[\]\n]*\])")
_WIKILINK_TITLE_RE = LazyPattern(r"!?\[\[([^\[\]\n|]*)(?:\|([^\[\]\n]*))?\]\]")
_IMG_TAG_RE = LazyPattern(r"<(?:img|picture|source|svg|video)\b[^<>]*>", re.I)
_HTML_TAG_RE = LazyPattern(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_AUTOLINK_RE = LazyPattern(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*)>")
_HEADING_ID_RE = LazyPattern(r"\s*\{[#.][^{}\n]*\}\s*$")
_EMPHASIS_RE = LazyPattern(r"(\*{1,3}|~~|==)(?=\S)(.+?)(?<=\S)\1")
_UNDERSCORES_RE = LazyPattern(r"(?<![^\W_])(_{1,3})(?=\S)(.+?)(?<=\S)\1(?![^\W_])")  # not in snake_case
_CODE_RE = LazyPattern(r"(`+)(.+?)\1")
_ESCAPE_RE = LazyPattern(r"\\([!-/:-@\[-`{-~])")


_TITLE_SOURCE_MAX = 4 * TITLE_MAX  # of a heading's markup: a title keeps TITLE_MAX characters


def plain_title(heading: str) -> str:
    """A heading as a person reads it: images and badges dropped, links reduced to their text,
    emphasis and code marks removed, HTML tags removed and entities decoded, blanks collapsed."""
    text = _HEADING_ID_RE.sub("", heading[:_TITLE_SOURCE_MAX])
    codes: list[str] = []

    def keep_code(m: re.Match) -> str:  # code is shown as written, without its backticks
        codes.append(m.group(2).strip())
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE_RE.sub(keep_code, text)
    text = _IMG_TAG_RE.sub("", text)
    text = _AUTOLINK_RE.sub(r"\1", text)
    text = _HTML_TAG_RE.sub("", text)
    for _ in range(3):  # a badge is an image inside a link: the image first, then the emptied link
        before = text
        text = _IMAGE_RE.sub("", text)
        text = _LINK_RE.sub(r"\1", text)
        if text == before:
            break
    text = _WIKILINK_TITLE_RE.sub(lambda m: m.group(2) or m.group(1).split("#")[0], text)
    for _ in range(3):  # ***both*** and nested marks
        before = text
        text = _UNDERSCORES_RE.sub(r"\2", _EMPHASIS_RE.sub(r"\2", text))
        if text == before:
            break
    text = _ESCAPE_RE.sub(r"\1", text)
    text = re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)
    text = html.unescape(text)
    return " ".join(text.split())[:TITLE_MAX].rstrip()


def parse_markdown(raw: bytes, path: str, *, title_from: str = TITLE_FROM_HEADING) -> ParsedMarkdown:
    text, warnings = decode(raw)
    frontmatter, fm_warnings = parse_frontmatter(text)
    title = extract_title(text, frontmatter, path, title_from=title_from)
    return ParsedMarkdown(body=text, title=title, frontmatter=frontmatter, warnings=warnings + fm_warnings)
