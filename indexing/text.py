"""Reading markdown files: decoding, frontmatter and titles."""

from __future__ import annotations

import hashlib
import re
import time
import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime

import yaml

_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
# TOML frontmatter (Hugo, Zola, mdBook): `+++` lines around it.
_TOML_FRONTMATTER_RE = re.compile(r"\A\+\+\+[ \t]*\r?\n(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|\Z)", re.S)
FRONTMATTER_OPENINGS = ("---", "+++")
# The heading's text is taken whole and its closing `#`s and blanks stripped in Python: a lazy
# `(.+?)[ \t#]*$` retries the tail at every character (quadratic on a line of spaces).
_ATX_HEADING_RE = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+)$", re.M)
_SETEXT_RE = re.compile(r"^(?! {4})(\S.*)\r?\n {0,3}(=+|-+)[ \t]*$", re.M)
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


class FrontmatterRefused(yaml.YAMLError):
    """Frontmatter pmd will not read: the note is indexed without it."""


# libyaml when installed (PyYAML's wheels include it): the pure-Python parser reads about 30 KB/s.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _frontmatter_load(source: str):
    """YAML's safe load, after a pass over its events that refuses aliases, deep nesting and overtime."""
    deadline = time.monotonic() + FRONTMATTER_MAX_SECONDS
    depth = 0
    for count, event in enumerate(yaml.parse(source, Loader=_YAML_LOADER)):
        if isinstance(event, yaml.AliasEvent):
            raise FrontmatterRefused("it uses YAML aliases (*name), which pmd does not expand")
        if isinstance(event, _OPENS):
            depth += 1
            if depth > FRONTMATTER_MAX_DEPTH:
                raise FrontmatterRefused(f"it nests deeper than {FRONTMATTER_MAX_DEPTH} levels")
        elif isinstance(event, _CLOSES):
            depth -= 1
        if count % 1024 == 0 and time.monotonic() > deadline:
            raise FrontmatterRefused(f"it took more than {FRONTMATTER_MAX_SECONDS:g} s to read")
    return yaml.load(source, Loader=_YAML_LOADER)


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
    match = (_FRONTMATTER_RE.match(text) if text.startswith("---")
             else _TOML_FRONTMATTER_RE.match(text) if text.startswith("+++") else None)
    return text[match.end():] if match else text


def extract_title(text: str, frontmatter: dict, fallback: str) -> str:
    """Frontmatter `title`, else the first heading, else the file name."""
    title = frontmatter.get("title")
    if isinstance(title, (str, int, float)) and str(title).strip():
        return str(title).strip()[:1000]
    body = strip_frontmatter(text)
    in_fence = False
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = _ATX_HEADING_RE.match(line)
        if match:
            heading = match.group(1)
            return (heading.rstrip(" \t#") or heading[0]).strip()[:1000]
    setext = _SETEXT_RE.search(body)
    if setext and setext.group(2).startswith("="):
        return setext.group(1).strip()[:1000]
    name = fallback.rsplit("/", 1)[-1]
    return (name.rsplit(".", 1)[0] if "." in name else name)[:1000]


def parse_markdown(raw: bytes, path: str) -> ParsedMarkdown:
    text, warnings = decode(raw)
    frontmatter, fm_warnings = parse_frontmatter(text)
    title = extract_title(text, frontmatter, path)
    return ParsedMarkdown(body=text, title=title, frontmatter=frontmatter, warnings=warnings + fm_warnings)
