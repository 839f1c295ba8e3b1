"""A note's own structure, read from its text: tags, its date, and the links it writes.

Pure functions of the text, the parsed frontmatter (indexing.text.parse_frontmatter, whose values
are JSON-able: YAML dates arrive as ISO strings), the path and the mtime; no database. The scan
(indexing.services.scanning) stores what they return on the Document and as DocumentLink rows;
indexing.services.links resolves the links' targets within the collection.

- tags: frontmatter `tags`/`tag` (a list, or a comma/space separated string) and inline `#tags`
  in the body (not in code, comments or the frontmatter, not URL fragments, not `#123`), lower
  case, without '#', unique and sorted;
- date: frontmatter `date`, else `created`, else a date in the file name (2025-03-14, 20250314,
  2025_03_14, 2025-03), else the file's mtime; an aware UTC datetime with where it came from
  (naive dates and times are read as UTC);
- links: `[[Note]]`, `[[Note|shown]]`, `[[Note#Heading]]`, `![[embed]]`, `[text](rel/path.md#anchor)`
  (URL-decoded) and `[ref]: path.md` definitions, not in code and not to other sites or to
  attachments (images, PDFs…), each with its line and the sentence around it.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from urllib.parse import unquote

from indexing.text import strip_frontmatter

CONTEXT_CHARS = 240
TAG_MAX = 200

DATE_FRONTMATTER = "frontmatter:date"
DATE_CREATED = "frontmatter:created"
DATE_FILENAME = "filename"
DATE_MTIME = "mtime"

# --- masking: what no tag or link can come from ---------------------------------------------

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*$", re.MULTILINE)
_BACKTICKS_RE = re.compile(r"`+")
_BLANK_LINE_RE = re.compile(r"\n[ \t]*\n")
_COMMENT_RE = re.compile(r"<!--.*?-->|%%.*?%%", re.DOTALL)


def masked(text: str) -> str:
    """`text` with the frontmatter, fenced code, inline code and comments blanked out (same length,
    same line breaks), so offsets and line numbers found in it are those of `text`."""
    spans: list[tuple[int, int]] = []
    if text.startswith("---"):
        body_at = len(text) - len(strip_frontmatter(text))
        if body_at:
            spans.append((0, body_at))
    start = spans[0][1] if spans else 0
    # Fenced blocks: a closing fence is the same character, at least as long; an unclosed one runs to the end.
    pos = start
    while ("```" in text or "~~~" in text) and (opening := _FENCE_RE.search(text, pos)):
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
        spans += [m.span() for m in _COMMENT_RE.finditer(partial)]
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


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Inline code: a run of backticks up to the next run of the same length, within a paragraph."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS_RE.finditer(text)]
    spans = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        width = end - start
        for j in range(i + 1, len(runs)):
            s2, e2 = runs[j]
            if _BLANK_LINE_RE.search(text, end, s2):
                break
            if e2 - s2 == width:
                spans.append((start, e2))
                i = j
                break
        i += 1
    return spans



# --- tags --------------------------------------------------------------------------------------

# '#' at the start of a line or after a space (so not `url#frag`, `[[a#b]]`, `&#123;`, `##`), then
# letters, digits, '_', '-', '/'; at least one letter (so not `#123`).
_INLINE_TAG_RE = re.compile(r"#([\w/-]*[^\W\d_][\w/-]*)")
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
                if tag:
                    out.append(tag)
    return out


def inline_tags(text: str, *, mask: str | None = None) -> list[str]:
    """`#tags` written in the body (give `mask` when it is already computed)."""
    body = mask if mask is not None else masked(text)
    if "#" not in body:
        return []
    out = []
    for m in _INLINE_TAG_RE.finditer(body):
        if m.start() and not body[m.start() - 1].isspace():
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
            f"T{slash.group(4)}" if slash.group(4) else "")
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
    ["png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "tif", "tiff", "ico", "avif", "heic", "pdf", "mp3", "mp4", "m4a", "wav", "ogg", "oga", "flac", "webm", "mkv", "mov", "avi", "ogv", "3gp", "canvas", "excalidraw", "base", "csv", "tsv", "xls", "xlsx", "doc", "docx", "ppt", "pptx", "odt", "ods", "odp", "zip", "gz", "tar", "7z", "rar", "json", "yaml", "yml", "txt", "html", "htm", "css", "js", "ts", "py", "sh", "epub"]
)
MARKDOWN_EXTENSIONS = (".md", ".markdown")

_WIKILINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MD_LINK_RE = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^<>\n]+>|(?:[^()\s]|\([^()\s]*\))+)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_MD_DEFINITION_RE = re.compile(r"^ {0,3}\[([^\[\]\n]+)\]:[ \t]*(<[^<>\n]+>|\S+)", re.MULTILINE)
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_BLOCK_START_RE = re.compile(r"^\s{0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|#{1,6}[ \t]|>|\|)")
_SENTENCE_END_RE = re.compile(r"[.!?…](?=[\s\"')\]]*(?:\s|$))")


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
    return Link(kind=EMBED if m.group(1) else WIKILINK, target=target[:1000], heading=heading[:500],
                shown=shown[:500], written=m.group(0)[:300])


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
    return Link(kind=MARKDOWN, target=path[:1000], heading=anchor[:500], shown=m.group(2).strip()[:500],
                written=m.group(0)[:300])


class _Lines:
    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def number(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def line(self, n: int) -> str:
        start = self.starts[n - 1]
        end = self.starts[n] - 1 if n < len(self.starts) else len(self.text)
        return self.text[start:end]

    def offset(self, n: int) -> int:
        return self.starts[n - 1]


def _context(lines: _Lines, mask: str, start: int, end: int) -> str:
    """The sentence around text[start:end], within its paragraph or list item, at most CONTEXT_CHARS."""
    text = lines.text
    first = last = lines.number(start)
    n_lines = len(lines.starts)
    # the paragraph or list item: stop at a blank line, a list item, heading, quote or table row,
    # or blanked-out code
    while first > 1 and first > last - 8 and not _BLOCK_START_RE.match(lines.line(first)):
        if not lines.line(first - 1).strip() or _is_code(mask, lines, first - 1, text):
            break
        first -= 1
    while last < n_lines and last < first + 16:
        following = lines.line(last + 1)
        if not following.strip() or _BLOCK_START_RE.match(following) or _is_code(mask, lines, last + 1, text):
            break
        last += 1
    block_start = lines.offset(first)
    block_end = lines.offset(last) + len(lines.line(last))
    block = text[block_start:block_end]
    rel_start, rel_end = start - block_start, end - block_start
    # the sentence: after the last sentence end before the link, up to the first one after it
    s = 0
    for m in _SENTENCE_END_RE.finditer(block, 0, rel_start):
        s = m.end()
    e = len(block)
    after = _SENTENCE_END_RE.search(block, rel_end)
    if after:
        e = after.end()
    sentence = block[s:e]
    link_at = rel_start - s
    link_len = rel_end - rel_start
    sentence = _BLOCK_START_RE.sub("", sentence, count=1) if s == 0 else sentence
    if len(sentence) > CONTEXT_CHARS:
        link_at = max(0, min(link_at, len(sentence)))
        room = max(0, CONTEXT_CHARS - link_len) // 2
        lo = max(0, link_at - room)
        hi = min(len(sentence), max(link_at + link_len + room, lo + CONTEXT_CHARS))
        lo = max(0, min(lo, hi - CONTEXT_CHARS))
        piece = sentence[lo:hi]
        if lo > 0:
            cut = piece.find(" ")
            piece = "…" + (piece[cut + 1:] if 0 <= cut < 30 else piece)
        if hi < len(sentence):
            cut = piece.rfind(" ")
            piece = (piece[:cut] if cut > len(piece) - 30 else piece) + "…"
        sentence = piece
    return " ".join(sentence.split())


def _is_code(mask: str, lines: _Lines, n: int, text: str) -> bool:
    """Is line n blanked out in the mask although it has text (code, frontmatter, comment)?"""
    line = lines.line(n)
    if not line.strip():
        return False
    start = lines.offset(n)
    return not mask[start:start + len(line)].strip()


def note_links(text: str, *, mask: str | None = None) -> list[Link]:
    """The links a note writes, in the order written, each with its line and sentence."""
    body = mask if mask is not None else masked(text)
    if "[" not in body:
        return []
    lines = _Lines(text)
    found: list[tuple[int, int, Link]] = []
    taken: list[tuple[int, int]] = []
    if "[[" in body:
        for m in _WIKILINK_RE.finditer(body):
            taken.append(m.span())
            link = _wikilink(m)
            if link:
                found.append((m.start(), m.end(), link))
    if "](" in body:
        for m in _MD_LINK_RE.finditer(body):
            if any(s <= m.start() < e for s, e in taken):
                continue
            link = _markdown_link(m)
            if link:
                found.append((m.start(), m.end(), link))
    if "]:" in body:
        for m in _MD_DEFINITION_RE.finditer(body):
            target = _markdown_target(m.group(2))
            if target:
                found.append((m.start(), m.end(), Link(kind=MARKDOWN, target=target[0][:1000], heading=target[1][:500],
                                                       shown=m.group(1).strip()[:500], written=m.group(0).strip()[:300])))
    found.sort(key=lambda item: item[0])
    out = []
    for start, end, link in found:
        # the written form comes from the text, not the mask (same offsets)
        link.written = text[start:end][:300]
        link.line = lines.number(start)
        link.context = _context(lines, body, start, end)
        out.append(link)
    return out


# --- all of it -----------------------------------------------------------------------------------

@dataclass
class NoteStructure:
    tags: list[str]
    date: datetime | None
    date_source: str
    links: list[Link]


def note_structure(text: str, frontmatter: dict, path: str, mtime: float | None) -> NoteStructure:
    """Tags, date and links of one note (the text is the whole file, frontmatter included)."""
    mask = masked(text)
    when, source = note_date(frontmatter, path, mtime)
    return NoteStructure(tags=note_tags(text, frontmatter, mask=mask), date=when, date_source=source,
                         links=note_links(text, mask=mask))


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
        aliases += [str(a).strip() for a in items if a is not None and not isinstance(a, (dict, list)) and str(a).strip()]
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
