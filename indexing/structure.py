"""A note's own structure, read from its text: tags, its date, and the links it writes.

Pure functions of the text, the parsed frontmatter (indexing.text.parse_frontmatter, whose values
are JSON-able: YAML dates arrive as ISO strings), the path and the mtime; no database. The scan
(indexing.services.scanning) stores what they return on the Document and as DocumentLink rows;
indexing.services.links resolves the links' targets within the collection.

- tags: frontmatter `tags`/`tag` (a list, or a comma/space separated string) and inline `#tags`
  in the body (not in code, math, comments, the frontmatter, link targets, URLs, HTML tags or a
  heading's `{#id}`), holding a letter (not `#2024`), lower case, without '#', unique and sorted;
- date: frontmatter `date`, else `created`, else a date in the file name (2025-03-14, 20250314,
  2025_03_14, 2025-03), else the file's mtime; an aware UTC datetime with where it came from
  (naive dates and times are read as UTC);
- links: `[[Note]]`, `[[Note|shown]]`, `[[Note#Heading]]`, `![[embed]]`, `[text](rel/path.md#anchor)`
  (URL-decoded) and `[ref]: path.md` definitions, not in code and not to other sites or to
  attachments (images, PDFs…), each with its line and the sentence around it; at most LINKS_MAX
  per note (NoteStructure.warnings says when more were written).

Everything here is linear in the note's size (a note is input anyone with write access to a folder
controls): no pattern backtracks over a run it already tried, and per link only its line's block
and the sentence ends near it are looked at, through indexes built once per note.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from urllib.parse import unquote

from indexing.text import FRONTMATTER_OPENINGS, strip_frontmatter

CONTEXT_CHARS = 240
TAG_MAX = 200
LINKS_MAX = 5_000  # links kept per note (as stored since links were): a map of content has hundreds

DATE_FRONTMATTER = "frontmatter:date"
DATE_CREATED = "frontmatter:created"
DATE_FILENAME = "filename"
DATE_MTIME = "mtime"

# --- masking: what no tag or link can come from ---------------------------------------------

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*$", re.MULTILINE)
_BACKTICKS_RE = re.compile(r"`+")
_BLANK_LINE_START_RE = re.compile(r"\n(?=[ \t]*\n)")  # where each (overlapping) `\n[ \t]*\n` starts


def masked(text: str) -> str:
    """`text` with the frontmatter, fenced code, inline code and comments blanked out (same length,
    same line breaks), so offsets and line numbers found in it are those of `text`."""
    spans: list[tuple[int, int]] = []
    if text.startswith(FRONTMATTER_OPENINGS):
        body_at = len(text) - len(strip_frontmatter(text))
        if body_at:
            spans.append((0, body_at))
    start = spans[0][1] if spans else 0
    # Fenced blocks: a closing fence is the same character, at least as long; an unclosed one runs to the end.
    pos = start
    has_fences = "```" in text or "~~~" in text
    while has_fences and (opening := _FENCE_RE.search(text, pos)):
        marker = opening.group(1)
        closing_re = re.compile(r"^ {0,3}" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*$", re.MULTILINE)
        closing = closing_re.search(text, opening.end())
        end = closing.end() if closing else len(text)
        spans.append((opening.start(), end))
        pos = end
    # Inline code and comments, outside what is already blanked.
    if "`" in text:
        partial = _apply(text, spans)
        if "`" in partial:
            spans += _code_spans(partial)
    if "<!--" in text or "%%" in text:
        partial = _apply(text, spans)
        spans += _comment_spans(partial)
    return _apply(text, spans)


_NOT_NEWLINE_RE = re.compile(r"[^\n]")


def _apply(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span replaced by spaces (its line breaks kept)."""
    if not spans:
        return text
    pieces, pos = [], 0
    for s, e in sorted(spans):
        if e <= pos:
            continue
        s = max(s, pos)
        pieces.append(text[pos:s])
        pieces.append(_NOT_NEWLINE_RE.sub(" ", text[s:e]))
        pos = e
    pieces.append(text[pos:])
    return "".join(pieces)


blank_spans = _apply  # for indexing.markdown: comments and dialect marks blanked the same way


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Inline code: a run of backticks up to the next run of the same length, within a paragraph.

    The next run of a width and the next blank line are looked up, not scanned for: a paragraph
    of backtick runs of other widths costs a bisection each."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS_RE.finditer(text)]
    if len(runs) < 2:
        return []
    blank_starts = [m.start() for m in _BLANK_LINE_START_RE.finditer(text)]
    of_width: dict[int, list[int]] = {}  # width → indexes of the runs of that width, in order
    for i, (start, end) in enumerate(runs):
        of_width.setdefault(end - start, []).append(i)
    spans = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        same = of_width[end - start]
        k = bisect.bisect_right(same, i)
        if k < len(same):
            j = same[k]
            b = bisect.bisect_left(blank_starts, end)
            # a blank line between the runs ends the paragraph (it must end before the next run starts)
            paragraph_end = text.index("\n", blank_starts[b] + 1) + 1 if b < len(blank_starts) else len(text) + 1
            if runs[j][0] < paragraph_end:
                spans.append((start, runs[j][1]))
                i = j
        i += 1
    return spans


def _comment_spans(text: str) -> list[tuple[int, int]]:
    """`<!-- … -->` and `%% … %%` comments (the first to open wins). Once one kind has no closing
    mark left, no later opening of that kind can close either: each is searched for once."""
    spans: list[tuple[int, int]] = []
    pos, html, percent = 0, "<!--" in text, "%%" in text
    while html or percent:
        a = text.find("<!--", pos) if html else -1
        b = text.find("%%", pos) if percent else -1
        html, percent = a != -1, b != -1
        if html and (not percent or a < b):
            close = text.find("-->", a + 4)
            if close == -1:
                html = False
                continue
            spans.append((a, close + 3))
        elif percent:
            close = text.find("%%", b + 2)
            if close == -1:
                percent = False
                continue
            spans.append((b, close + 2))
        else:
            break
        pos = spans[-1][1]
    return spans


# --- tags --------------------------------------------------------------------------------------

# '#' at the start of a line or after a space (so not `url#frag`, `[[a#b]]`, `&#123;`, `##`), then
# letters, digits, '_', '-', '/'; at least one letter (so not `#123`), checked apart: one pattern
# with the letter between two runs retries every split of a long run of digits.
_INLINE_TAG_RE = re.compile(r"#([\w/-]+)")
_LETTER_RE = re.compile(r"[^\W\d_]")
_TAG_SPLIT_RE = re.compile(r"[,\s]+")


def _clean_tag(raw) -> str:
    tag = str(raw).strip().lstrip("#").strip().strip("/").lower()
    return tag[:TAG_MAX]


def frontmatter_tags(frontmatter: dict) -> list[str]:
    out: list[str] = []
    for key, value in (frontmatter or {}).items():
        if str(key).lower() not in {"tags", "tag"} or value is None:
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is None or isinstance(item, (dict, list)):
                continue
            for part in _TAG_SPLIT_RE.split(str(item)):
                tag = _clean_tag(part)
                if tag and _is_tag(tag):
                    out.append(tag)
    return out


# Where a '#' is not a tag though a blank may come before it: a link's target `[x]( #a)` and a
# reference definition `[x]: #anchor` (tables of contents), URLs, autolinks and HTML tags (their
# attributes), a heading's `{#id .class}`, and math `$…$`, `$$…$$`. Each pattern stops at the
# first character that ends it, so none rescans what another start already read.
_NOT_TAG_RES = (
    re.compile(r"\]\([^)\n]*\)?"),
    re.compile(r"^ {0,3}\[(?:[^\[\]\n]|\[[^\[\]\n]*\])+\]:[^\n]*", re.MULTILINE),
    re.compile(r"\b(?:[A-Za-z][A-Za-z0-9+.-]{1,31}://|www\.|mailto:)[^\s<>]*"),
    re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>|<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*>"),
    re.compile(r"\{[ \t]*[#.][^{}\n]*\}[ \t]*$", re.MULTILINE),
    re.compile(r"\$\$[^$]*(?:\$(?!\$)[^$]*)*\$\$"),
    re.compile(r"\$(?=[^\s$])[^$\n]*(?<=[^\s$])\$(?!\d)"),
)


def _tagless(body: str) -> str:
    """`body` (already masked) with what holds no tags blanked out as well (same offsets)."""
    spans = [m.span() for regex in _NOT_TAG_RES for m in regex.finditer(body)]
    return _apply(body, spans)


def _is_tag(tag: str) -> bool:
    """Obsidian's rule: a tag is not only digits (`#2024`); here it holds a letter (not `#1-2`)."""
    return bool(_LETTER_RE.search(tag))


def inline_tags(text: str, *, mask: str | None = None) -> list[str]:
    """`#tags` written in the body (give `mask` when it is already computed)."""
    body = mask if mask is not None else masked(text)
    if "#" not in body:
        return []
    body = _tagless(body)
    out = []
    for m in _INLINE_TAG_RE.finditer(body):
        if m.start() and not body[m.start() - 1].isspace():
            continue
        if not _is_tag(m.group(1)):
            continue
        tag = _clean_tag(m.group(1))
        if tag:
            out.append(tag)
    return out


def note_tags(text: str, frontmatter: dict, *, mask: str | None = None) -> list[str]:
    """Frontmatter and inline tags: lower case, no '#', unique, sorted."""
    return sorted(set(frontmatter_tags(frontmatter)) | set(inline_tags(text, mask=mask)))


# --- the note's date -----------------------------------------------------------------------------

_FILENAME_DATES = [
    # (pattern, has a day)
    (re.compile(r"(?<!\d)((?:19|20)\d\d)[-_.](0[1-9]|1[0-2])[-_.](0[1-9]|[12]\d|3[01])(?!\d)"), True),
    (re.compile(r"(?<!\d)((?:19|20)\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?!\d)"), True),
    (re.compile(r"(?<!\d)((?:19|20)\d\d)[-_.](0[1-9]|1[0-2])(?![\d])(?![-_.]\d)"), False),
]
_SLASH_DATE_RE = re.compile(r"^(\d{4})/(\d{1,2})/(\d{1,2})(?:[ T](.*))?$")


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_date(value) -> datetime | None:
    """An ISO date or datetime (as YAML or a person writes it) as an aware UTC datetime, else None."""
    if isinstance(value, datetime):
        return _aware(value)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 40 or not text[:4].isdigit():
        return None
    slash = _SLASH_DATE_RE.match(text)
    if slash:
        text = f"{slash.group(1)}-{int(slash.group(2)):02d}-{int(slash.group(3)):02d}" + (
            f"T{slash.group(4)}" if slash.group(4) else ""
        )
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return _aware(datetime.fromisoformat(text))
    except ValueError:
        pass
    match = re.fullmatch(r"(\d{4})-(\d{2})", text)  # a month: its first day
    if match:
        try:
            return datetime(int(match.group(1)), int(match.group(2)), 1, tzinfo=UTC)
        except ValueError:
            return None
    return None


def filename_date(path: str) -> datetime | None:
    """A date written in the file's name: 2025-03-14, 2025_03_14, 20250314, or a month 2025-03."""
    name = path.rsplit("/", 1)[-1]
    for regex, has_day in _FILENAME_DATES:
        match = regex.search(name)
        if not match:
            continue
        year, month = int(match.group(1)), int(match.group(2))
        day = int(match.group(3)) if has_day else 1
        try:
            return datetime(year, month, day, tzinfo=UTC)
        except ValueError:
            continue
    return None


def _frontmatter_value(frontmatter: dict, key: str):
    if key in frontmatter:
        return frontmatter[key]
    for k, v in frontmatter.items():
        if str(k).lower() == key:
            return v
    return None


def note_date(frontmatter: dict, path: str, mtime: float | None) -> tuple[datetime | None, str]:
    """(the note's date, where it came from): frontmatter `date`, `created`, the file name, the mtime."""
    frontmatter = frontmatter or {}
    for key, source in (("date", DATE_FRONTMATTER), ("created", DATE_CREATED)):
        found = parse_date(_frontmatter_value(frontmatter, key))
        if found is not None:
            return found, source
    found = filename_date(path)
    if found is not None:
        return found, DATE_FILENAME
    if mtime is None:
        return None, ""
    try:
        return datetime.fromtimestamp(float(mtime), tz=UTC), DATE_MTIME
    except (OverflowError, OSError, ValueError):
        return None, ""


# --- links ---------------------------------------------------------------------------------------

WIKILINK = "wikilink"
EMBED = "embed"
MARKDOWN = "markdown"

# Files a note can link to that are not notes: never resolved, never "unresolved".
ATTACHMENT_EXTENSIONS = frozenset(
    [
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "bmp",
        "tif",
        "tiff",
        "ico",
        "avif",
        "heic",
        "pdf",
        "mp3",
        "mp4",
        "m4a",
        "wav",
        "ogg",
        "oga",
        "flac",
        "webm",
        "mkv",
        "mov",
        "avi",
        "ogv",
        "3gp",
        "canvas",
        "excalidraw",
        "base",
        "csv",
        "tsv",
        "xls",
        "xlsx",
        "doc",
        "docx",
        "ppt",
        "pptx",
        "odt",
        "ods",
        "odp",
        "zip",
        "gz",
        "tar",
        "7z",
        "rar",
        "json",
        "yaml",
        "yml",
        "txt",
        "html",
        "htm",
        "css",
        "js",
        "ts",
        "py",
        "sh",
        "epub",
    ]
)
MARKDOWN_EXTENSIONS = (".md", ".markdown")

_WIKILINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MD_LINK_RE = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^<>\n]+>|(?:[^()\s]|\([^()\s]*\))+)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_MD_DEFINITION_RE = re.compile(r"^ {0,3}\[([^\[\]\n]+)\]:[ \t]*(<[^<>\n]+>|\S+)", re.MULTILINE)
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_BLOCK_START_AT_RE = re.compile(r"\s{0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|#{1,6}[ \t]|>|\|)")  # with .match
# A sentence ends at [.!?…] followed by closing quotes/brackets and a blank (or the text's end):
# each mark with its run of closers, read once per note (see _Note).
_SENTENCE_MARK_RE = re.compile(r"[.!?…]([\s\"')\]]*)")
_HAS_BLANK_RE = re.compile(r"\s")


@dataclass
class Link:
    kind: str  # WIKILINK, EMBED or MARKDOWN
    target: str  # what the link names: a note's name or path (markdown links: URL-decoded)
    heading: str = ""  # after '#': a heading, a block (^id) or an anchor
    shown: str = ""  # the text shown instead of the target
    line: int = 1
    context: str = ""  # the sentence around the link
    written: str = field(default="", repr=False)  # the link as written, for messages

    def as_text(self) -> str:
        if self.written:
            return self.written
        inner = self.target + (f"#{self.heading}" if self.heading else "")
        return f"[[{inner}]]" if self.kind != MARKDOWN else f"({inner})"


def _is_attachment(target: str) -> bool:
    name = target.rsplit("/", 1)[-1]
    if "." not in name:
        return False
    return name.rsplit(".", 1)[-1].lower() in ATTACHMENT_EXTENSIONS


def _wikilink(m: re.Match) -> Link | None:
    inner = m.group(2).replace("\\|", "|")
    target, _, shown = inner.partition("|")
    target, _, heading = target.partition("#")
    target, heading, shown = target.strip(), heading.strip(), shown.strip()
    if not target or _is_attachment(target):  # [[#Heading]] is the note itself
        return None
    return Link(
        kind=EMBED if m.group(1) else WIKILINK,
        target=target[:1000],
        heading=heading[:500],
        shown=shown[:500],
        written=m.group(0)[:300],
    )


def _markdown_target(raw: str) -> tuple[str, str] | None:
    raw = raw.strip()
    if raw.startswith("<") and raw.endswith(">"):
        raw = raw[1:-1].strip()
    if not raw or raw.startswith(("#", "//")) or _SCHEME_RE.match(raw):
        return None  # an anchor in the same note, or another site (http:, mailto:, obsidian:…)
    path, _, anchor = raw.partition("#")
    path = unquote(path.split("?", 1)[0])
    if not path.lower().endswith(MARKDOWN_EXTENSIONS):
        return None
    return path, unquote(anchor)


def _markdown_link(m: re.Match) -> Link | None:
    found = _markdown_target(m.group(3))
    if found is None:
        return None
    path, anchor = found
    return Link(
        kind=MARKDOWN,
        target=path[:1000],
        heading=anchor[:500],
        shown=m.group(2).strip()[:500],
        written=m.group(0)[:300],
    )


class _Note:
    """A note's lines, blocks and sentence ends, each worked out once: every link on a line of
    100k links asks the same questions."""

    def __init__(self, text: str, mask: str):
        self.text, self.mask = text, mask
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._blocks: dict[int, tuple[int, int]] = {}
        self._kinds: dict[int, tuple[bool, bool, bool]] = {}
        # Sentence ends ([.!?…] then closing quotes/brackets/blanks, then a blank or the end): a
        # "strong" one has a blank after it, so is one wherever the text is cut after it; a weak
        # one only where the cut falls inside its run of closing marks.
        self.ends: list[int] = []
        self.run_ends: list[int] = []
        self.strong: list[int] = []
        for m in _SENTENCE_MARK_RE.finditer(text):
            self.ends.append(m.start())
            self.run_ends.append(m.end())
            if m.end() == len(text) or _HAS_BLANK_RE.search(m.group(1)):
                self.strong.append(m.start())

    def number(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def offset(self, n: int) -> int:
        return self.starts[n - 1]

    def end(self, n: int) -> int:
        """Where line n ends (before its line break)."""
        return self.starts[n] - 1 if n < len(self.starts) else len(self.text)

    def kind(self, n: int) -> tuple[bool, bool, bool]:
        """(blank, starts a block, blanked-out code) for line n."""
        found = self._kinds.get(n)
        if found is None:
            start, end = self.offset(n), self.end(n)
            line = self.text[start:end]
            blank = not line.strip()
            found = (blank, bool(_BLOCK_START_AT_RE.match(line)), not blank and not self.mask[start:end].strip())
            self._kinds[n] = found
        return found

    def block(self, n: int) -> tuple[int, int]:
        """(first, last) line of the paragraph or list item around line n: it stops at a blank line,
        a list item, heading, quote or table row, or blanked-out code; 8 lines up, 16 down at most."""
        found = self._blocks.get(n)
        if found is None:
            first = last = n
            n_lines = len(self.starts)
            while first > 1 and first > last - 8 and not self.kind(first)[1]:
                blank, _, code = self.kind(first - 1)
                if blank or code:
                    break
                first -= 1
            while last < n_lines and last < first + 16:
                blank, block_start, code = self.kind(last + 1)
                if blank or block_start or code:
                    break
                last += 1
            found = self._blocks[n] = (first, last)
        return found

    def sentence_end_before(self, at: int, floor: int) -> int | None:
        """The last sentence end in text[floor:at] read as if the text stopped at `at`."""
        best = None
        k = bisect.bisect_left(self.strong, at) - 1
        if k >= 0 and self.strong[k] >= floor:
            best = self.strong[k]
        k = bisect.bisect_left(self.ends, at) - 1  # a weak one counts if its run reaches `at`
        if k >= 0 and self.ends[k] >= floor and self.run_ends[k] >= at and (best is None or self.ends[k] > best):
            best = self.ends[k]
        return best

    def sentence_end_after(self, at: int, ceiling: int) -> int | None:
        """The first sentence end in text[at:ceiling] read as if the text stopped at `ceiling`."""
        best = None
        k = bisect.bisect_left(self.strong, at)
        if k < len(self.strong) and self.strong[k] < ceiling:
            best = self.strong[k]
        k = bisect.bisect_left(self.ends, ceiling) - 1  # a weak one counts if its run reaches `ceiling`
        if k >= 0 and self.ends[k] >= at and self.run_ends[k] >= ceiling and (best is None or self.ends[k] < best):
            best = self.ends[k]
        return best

    def context(self, start: int, end: int) -> str:
        """The sentence around text[start:end], within its paragraph or list item, at most CONTEXT_CHARS."""
        text = self.text
        first, last = self.block(self.number(start))
        block_start, block_end = self.offset(first), self.end(last)
        # the sentence: after the last sentence end before the link, up to the first one after it
        before = self.sentence_end_before(start, block_start)
        after = self.sentence_end_after(end, block_end)
        s = before + 1 if before is not None else block_start
        e = after + 1 if after is not None else block_end
        link_at, link_len = start - s, end - start
        if before is None:  # the sentence starts the block: without its list or quote mark
            marker = _BLOCK_START_AT_RE.match(text, s, e)
            if marker:
                s = marker.end()
        size = e - s
        if size > CONTEXT_CHARS:
            link_at = max(0, min(link_at, size))
            room = max(0, CONTEXT_CHARS - link_len) // 2
            lo = max(0, link_at - room)
            hi = min(size, max(link_at + link_len + room, lo + CONTEXT_CHARS))
            lo = max(0, min(lo, hi - CONTEXT_CHARS))
            piece = text[s + lo : s + hi]
            if lo > 0:
                cut = piece.find(" ")
                piece = "…" + (piece[cut + 1 :] if 0 <= cut < 30 else piece)
            if hi < size:
                cut = piece.rfind(" ")
                piece = (piece[:cut] if cut > len(piece) - 30 else piece) + "…"
            sentence = piece
        else:
            sentence = text[s:e]
        return " ".join(sentence.split())


def _wikilink_spans(body: str) -> tuple[list[int], list[int], list[re.Match]]:
    starts, ends, matches = [], [], []
    if "[[" in body:
        for m in _WIKILINK_RE.finditer(body):
            starts.append(m.start())
            ends.append(m.end())
            matches.append(m)
    return starts, ends, matches


def note_links(text: str, *, mask: str | None = None, limit: int | None = None) -> list[Link]:
    """The links a note writes, in the order written, each with its line and sentence (the first
    `limit` of them: only those are given a line and a sentence)."""
    body = mask if mask is not None else masked(text)
    if "[" not in body:
        return []
    found: list[tuple[int, int, Link]] = []
    taken_starts, taken_ends, wikilinks = _wikilink_spans(body)
    for m in wikilinks:
        link = _wikilink(m)
        if link:
            found.append((m.start(), m.end(), link))
    if "](" in body:
        for m in _MD_LINK_RE.finditer(body):
            k = bisect.bisect_right(taken_starts, m.start()) - 1  # inside a wikilink?
            if k >= 0 and m.start() < taken_ends[k]:
                continue
            link = _markdown_link(m)
            if link:
                found.append((m.start(), m.end(), link))
    if "]:" in body:
        for m in _MD_DEFINITION_RE.finditer(body):
            target = _markdown_target(m.group(2))
            if target:
                found.append(
                    (
                        m.start(),
                        m.end(),
                        Link(
                            kind=MARKDOWN,
                            target=target[0][:1000],
                            heading=target[1][:500],
                            shown=m.group(1).strip()[:500],
                            written=m.group(0).strip()[:300],
                        ),
                    )
                )
    found.sort(key=lambda item: item[0])
    if limit is not None:
        del found[limit:]
    note = _Note(text, body)
    out = []
    for start, end, link in found:
        # the written form comes from the text, not the mask (same offsets)
        link.written = text[start : min(end, start + 300)]
        link.line = note.number(start)
        link.context = note.context(start, end)
        out.append(link)
    return out


# --- all of it -----------------------------------------------------------------------------------


@dataclass
class NoteStructure:
    tags: list[str]
    date: datetime | None
    date_source: str
    links: list[Link]
    warnings: list[str] = field(default_factory=list)  # problems to record for the note


def note_structure(text: str, frontmatter: dict, path: str, mtime: float | None) -> NoteStructure:
    """Tags, date and links of one note (the text is the whole file, frontmatter included)."""
    mask = masked(text)
    when, source = note_date(frontmatter, path, mtime)
    links = note_links(text, mask=mask, limit=LINKS_MAX + 1)
    warnings = []
    if len(links) > LINKS_MAX:
        del links[LINKS_MAX:]
        warnings.append(f"more than {LINKS_MAX:,} links: only the first {LINKS_MAX:,} are kept")
    return NoteStructure(
        tags=note_tags(text, frontmatter, mask=mask), date=when, date_source=source, links=links, warnings=warnings
    )


# --- names a link can use for a note (indexing.services.links resolves with them) ------------------


def frontmatter_names(frontmatter: dict) -> tuple[str, list[str]]:
    """(frontmatter title, aliases): the names besides its path a link may use for a note."""
    frontmatter = frontmatter or {}
    title = _frontmatter_value(frontmatter, "title")
    title = str(title).strip() if isinstance(title, (str, int, float)) and not isinstance(title, bool) else ""
    aliases: list[str] = []
    for key in ("aliases", "alias"):
        value = _frontmatter_value(frontmatter, key)
        if value is None:
            continue
        items = value if isinstance(value, list) else str(value).split(",")
        aliases += [
            str(a).strip() for a in items if a is not None and not isinstance(a, (dict, list)) and str(a).strip()
        ]
    return title, aliases


def link_candidates(source_path: str, target: str) -> tuple[list[str], list[str]]:
    """(paths relative to the linking note's folder, paths from the collection root) a link may mean."""
    target = target.strip()
    if target.startswith("/"):
        relative, root = [], [target.lstrip("/")]
    else:
        folder = posixpath.dirname(source_path)
        relative, root = [posixpath.join(folder, target)] if folder else [], [target]
    out_rel, out_root = [], []
    for bucket, out in ((relative, out_rel), (root, out_root)):
        for p in bucket:
            norm = posixpath.normpath(p)
            if norm.startswith("../") or norm in {"..", ".", ""}:
                continue
            out.append(norm)
            if not norm.lower().endswith(MARKDOWN_EXTENSIONS):
                out.append(norm + ".md")
    return out_rel, out_root
