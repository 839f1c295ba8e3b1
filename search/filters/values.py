"""The filter language's words and its values: tags, path globs, file types, number and date ranges."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from indexing.convert import FORMAT_EXTENSIONS
from indexing.errors import InvalidSearchInput
from indexing.paths import glob_regex_body
from indexing.patterns import LazyPattern
from search.filters.dates import _iso, date_boundary, period_end

SORT_RELEVANCE = "relevance"

SORT_DATE = "date"

SORTS = (SORT_RELEVANCE, SORT_DATE)

TAG_WORDS = frozenset({"tag", "tags"})

PATH_WORDS = frozenset({"path"})

AFTER_WORDS = frozenset({"after"})

BEFORE_WORDS = frozenset({"before"})

FILTER_WORDS = TAG_WORDS | PATH_WORDS | AFTER_WORDS | BEFORE_WORDS

# Words of the hybrid query document (search.pipeline.expansion) and URL schemes: always text.
RESERVED_WORDS = frozenset({"lex", "vec", "hyde", "intent"})

URL_SCHEMES = frozenset(
    {
        "http",
        "https",
        "ftp",
        "ftps",
        "sftp",
        "file",
        "mailto",
        "pmd",
        "ssh",
        "git",
        "s3",
        "ws",
        "wss",
        "urn",
        "data",
        "tel",
        "obsidian",
        "zotero",
        "news",
        "irc",
        "magnet",
    }
)

# `type:pdf`: a file type (indexing.convert), as the globs of its extensions. `type:` with any other
# value stays what it was before file types: a frontmatter field (`type:meeting`).
TYPE_WORDS = frozenset({"type"})

TYPE_NAMES = {**{name: name for name in FORMAT_EXTENSIONS}, "md": "markdown", "txt": "text", "htm": "html"}

MAX_VALUES = 50  # values in one filter (a comma list), and groups of one kind

HAS_WORDS = frozenset({"has"})

DATE_WORDS = frozenset({"date"})  # the note's date (after:/before:; it comes from frontmatter `date` first)

_OPERATOR = LazyPattern(r"^([<>]=?)\s*(.*)$", re.S)

_NUMBER = LazyPattern(r"^-?\d+(\.\d+)?$")

# A date bound as the first day it covers (start) or the day after it (end), by operator.
_DATE_BOUND = {">=": (">=", "start"), ">": (">=", "end"), "<": ("<", "start"), "<=": ("<", "end")}


def _is_range(raw: str) -> bool:
    return bool(_OPERATOR.match(raw)) or (".." in raw and not raw.startswith("..."))


def _unquoted(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] in "\"'" and text[-1] == text[0]:
        return text[1:-1].strip()
    return text


def range_bounds(
    value: str, *, now: datetime | None = None, what: str = "range", dates: bool = False
) -> list[tuple[str, str]] | None:
    """`>=2`, `<"30 days ago"`, `2..5`, `2025-01..2025-03` as [(op, bound)]: numbers with >=, >, <, <=
    (a range's ends included), dates with >= and < only, each end the first day it covers or the day
    after it (`..2025-03` is `< 2025-04-01`). None for a plain value."""
    match = _OPERATOR.match(value)
    if match:
        op, text = match.group(1), _unquoted(match.group(2))
        if not text:
            raise InvalidSearchInput(f"{what}: a value is missing after '{op}'")
        if _NUMBER.match(text) and not dates:
            return [(op, text)]
        sql_op, side = _DATE_BOUND[op]
        moment = date_boundary(text, now=now, what=what) if side == "start" else period_end(text, now=now, what=what)
        return [(sql_op, _iso(moment))]
    if not _is_range(value):
        return None
    low_text, _, high_text = (_unquoted(v) for v in value.partition(".."))
    if not low_text and not high_text:
        raise InvalidSearchInput(f"{what}: write a range as A..B (either end may be left out)")
    if not dates and all(_NUMBER.match(v) for v in (low_text, high_text) if v):
        return ([(">=", low_text)] if low_text else []) + ([("<=", high_text)] if high_text else [])
    return ([(">=", _iso(date_boundary(low_text, now=now, what=what)))] if low_text else []) + (
        [("<", _iso(period_end(high_text, now=now, what=what)))] if high_text else []
    )


def split_values(value: str) -> list[str]:
    """`a,b` → [a, b]; commas inside `{…}` (glob alternatives) do not split."""
    out, depth, current = [], 0, []
    for ch in value:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return [v.strip() for v in out if v.strip()]


def clean_tag(raw) -> str:
    """A tag as the index stores it (indexing.structure): lower case, no '#', no outer '/'."""
    return str(raw).strip().lstrip("#").strip().strip("/").lower()[:200]


def clean_glob(raw) -> str:
    """A path glob relative to the collection: no leading './' or '/', '\\' as '/'."""
    text = str(raw).strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    if not text:
        raise InvalidSearchInput("path filter is empty")
    return text


def glob_to_regex(pattern: str) -> str:
    """A path glob as a PostgreSQL regular expression (ARE) over the whole path.

    `**` any folders, `**/` none or more folders, `*` and `?` within one folder, `[abc]`/`[!a]`,
    `{a,b}`; everything else literal. A trailing `/` or a pattern without glob characters also
    matches everything under it (a folder)."""
    folder = pattern.endswith("/") or not any(ch in pattern for ch in "*?[{")
    body = glob_regex_body(pattern.rstrip("/") if pattern.endswith("/") else pattern)  # the one translator
    return "^" + body + ("(/.*)?" if folder else "") + "$"


def _unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))


def _strings(value, name: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return split_values(value)
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        if len(value) > MAX_VALUES:
            raise InvalidSearchInput(f"filter '{name}': at most {MAX_VALUES} values")
        return [str(v).strip() for v in value if str(v).strip()]
    raise InvalidSearchInput(f"filter '{name}' must be a string or a list of strings")


def type_glob(kind: str) -> str:
    """The path glob of a file type: `pdf` → `**/*.pdf`, `markdown` → `**/*.{md,markdown,mdown,mkd}`."""
    exts = FORMAT_EXTENSIONS[kind]
    return "**/*." + (exts[0] if len(exts) == 1 else "{" + ",".join(exts) + "}")
