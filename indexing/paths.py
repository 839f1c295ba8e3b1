"""Virtual paths (`pmd://collection/path`), docid references and glob masks."""

from __future__ import annotations

import contextvars
import json
import os
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache

from indexing.errors import InvalidGlob, InvalidPath
from indexing.patterns import LazyPattern

SCHEME = "pmd://"

# The working directory a relative file path names a file against: the caller's, when a server
# answers for a `pmd` client in another folder (client mode); None: this process's.
caller_directory: contextvars.ContextVar[str | None] = contextvars.ContextVar("pmd_caller_directory", default=None)


def absolute_path(path) -> str:
    """`path` made absolute against the caller's working directory (see `caller_directory`)."""
    base = caller_directory.get()
    return os.path.abspath(path if base is None else os.path.join(base, path))


_DOCID_RE = LazyPattern(r"^#?([0-9a-fA-F]{6})$")
_LINE_SUFFIX_RE = LazyPattern(r"^(?P<ref>.+?):(?P<line>\d+)$")
# Where in a converted file (indexing.convert): `report.pdf:p12`, `deck.pptx:s3`, or the fragment
# results carry, `pmd://c/report.pdf#page=12` (`#slide=3`, `#sheet=Budget`, `#chapter=2`).
_UNIT_SUFFIX_RE = LazyPattern(r"^(?P<ref>.+?):(?P<unit>p|s|page|slide)(?P<name>\d+)$")
_UNIT_FRAGMENT_RE = LazyPattern(r"^(?P<ref>.+?)#(?P<unit>page|slide|sheet|chapter)=(?P<name>[^#\]\n]{1,200})$")
_UNIT_LETTERS = {"p": "page", "s": "slide"}


@dataclass(frozen=True)
class Reference:
    """What a user typed to name a document: a docid, or a (collection, path)."""

    docid: str | None = None
    collection: str | None = None
    path: str = ""
    line: int | None = None
    unit: tuple[str, str] | None = None  # ("page", "12"): a page, slide, sheet or chapter of a converted file


def normalize_relative(path: str) -> str:
    """A clean relative posix path; refuses anything that climbs out with `..`."""
    path = path.replace("\\", "/").strip()
    if "\x00" in path:
        raise InvalidPath("path contains a NUL byte")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise InvalidPath(f"'{path}' climbs out of its collection with '..': not allowed")
    return "/".join(parts)


def parse_virtual(uri: str) -> tuple[str, str]:
    """`pmd://collection/some/path.md` → ("collection", "some/path.md")."""
    if not uri.startswith(SCHEME):
        raise InvalidPath(f"'{uri}' is not a pmd:// path")
    rest = uri[len(SCHEME) :]
    collection, _, path = rest.partition("/")
    if not collection:
        raise InvalidPath(f"'{uri}' names no collection")
    return collection, normalize_relative(path)


def parse_reference(text: str) -> Reference:
    """Parse `#abc123`, `abc123`, `pmd://c/p.md`, `c/p.md`, `p.md`, each with optional `:LINE`."""
    text = text.strip()
    if not text:
        raise InvalidPath("empty document reference")
    line = None
    unit = None
    match = _UNIT_SUFFIX_RE.match(text) or _UNIT_FRAGMENT_RE.match(text)
    if match:
        text = match.group("ref")
        unit = (_UNIT_LETTERS.get(match.group("unit"), match.group("unit")), match.group("name"))
    match = _LINE_SUFFIX_RE.match(text) if unit is None else None
    if match:
        text, line = match.group("ref"), int(match.group("line"))
    docid = _DOCID_RE.match(text)
    if docid and (text.startswith("#") or "/" not in text and "." not in text):
        return Reference(docid=docid.group(1).lower(), line=line, unit=unit)
    if text.startswith(SCHEME):
        collection, path = parse_virtual(text)
        return Reference(collection=collection, path=path, line=line, unit=unit)
    return Reference(path=normalize_relative(text), line=line, unit=unit)


def virtual_path(collection: str, path: str) -> str:
    return f"{SCHEME}{collection}/{path}"


# Longest glob pmd translates: longer ones are refused, not sent to the database's regex engine.
MAX_GLOB_LENGTH = 1000
# The POSIX classes a glob may name inside brackets (`[[:digit:]]`), as the ASCII sets they stand for:
# spelled out, so the regex means the same in Python's engine and PostgreSQL's.
POSIX_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "xdigit": "0-9A-Fa-f",
    "space": " \t\n\r\f\v",
    "blank": " \t",
    "punct": "".join("\\" + c for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
}


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob with `**`, `*`, `?`, `[...]` and `{a,b}` to a regex over posix paths."""
    return re.compile("(?s:" + glob_regex_body(pattern) + r")\Z")


def glob_regex_body(pattern: str) -> str:
    """The regex of a glob, unanchored; also valid as a PostgreSQL regex (search filters use it).

    Every glob gives a regex both engines accept, or InvalidGlob: a bracket class is read as a
    shell reads it (`]` first is a member, `!` or `^` first negates, a `[` never closed is a
    literal) and rebuilt with each member escaped; runs of `*` count as `**`."""
    if "\x00" in pattern:
        raise InvalidGlob("the glob contains a NUL byte")
    if len(pattern) > MAX_GLOB_LENGTH:
        raise InvalidGlob(f"the glob is {len(pattern)} characters long; at most {MAX_GLOB_LENGTH}")
    return _glob_body(re.sub(r"\*{3,}", "**", pattern))


def _glob_body(pattern: str) -> str:
    i, out = 0, []
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            regex, end = _bracket(pattern, i)
            if regex is None:
                out.append(re.escape(c))
            else:
                out.append(regex)
                i = end
        elif c == "{":
            end = pattern.find("}", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(_glob_body(o) for o in options) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _bracket(pattern: str, start: int) -> tuple[str | None, int]:
    """The bracket class that opens at `start`, as a regex, and the index of its closing `]`;
    (None, start) when no `]` closes it (the `[` is then a literal)."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while i < len(pattern):
        c = pattern[i]
        if c == "]" and not first:
            body = "".join(members)
            return ("[^" if negate else "[") + body + "]", i
        first = False
        if pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close != -1:
                name = pattern[i + 2 : close]
                if name not in POSIX_CLASSES:
                    raise InvalidGlob(
                        f"unknown character class '[:{name}:]' in the glob '{pattern}' "
                        f"(known: {', '.join(sorted(POSIX_CLASSES))})"
                    )
                members.append(POSIX_CLASSES[name])
                i = close + 2
                continue
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            low, high = c, pattern[i + 2]
            if low > high:
                raise InvalidGlob(
                    f"the range '{low}-{high}' in the glob '{pattern}' runs backwards: write '{high}-{low}'"
                )
            members.append(_class_member(low) + "-" + _class_member(high))
            i += 3
            continue
        members.append(_class_member(c))
        i += 1
    return None, start


def _class_member(c: str) -> str:
    """One character inside a regex class, escaped when it could mean something there."""
    return c if c.isalnum() or not c.isascii() else "\\" + c


def glob_match(pattern: str, path: str) -> bool:
    return glob_regex(pattern).match(path) is not None


def is_under(prefix: str, path: str) -> bool:
    """Whether `path` lies under the directory-or-file prefix `prefix`."""
    if not prefix:
        return True
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def join(*parts: str) -> str:
    return posixpath.join(*parts)


# Folders no collection indexes, whatever its mask (dependencies and caches).
ALWAYS_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})


@dataclass(frozen=True)
class Selection:
    """Which paths a collection indexes: its mask and ignore patterns, hidden names (`.env`,
    `.git/`) and ALWAYS_SKIPPED_DIRS never. The folder scan prunes with `folder_skipped` and
    `file_selected`; the history asks `selects` about every changed path, so a commit's files and
    diff hold exactly what note search can return."""

    mask: str
    ignore: tuple[str, ...] = ()

    @classmethod
    def of(cls, collection) -> "Selection":
        return cls(collection.mask, tuple(collection.ignore_patterns or ()))

    def ignored(self, rel: str) -> bool:
        return any(glob_match(p, rel) or glob_match(p, rel + "/") for p in self.ignore)

    def folder_skipped(self, rel: str) -> bool:
        """A folder at `rel` (its last part `name`) is not walked into."""
        name = rel.rsplit("/", 1)[-1]
        return name.startswith(".") or name in ALWAYS_SKIPPED_DIRS or bool(self.ignore and self.ignored(rel))

    def file_selected(self, rel: str) -> bool:
        """A file at `rel` in a folder that is walked is indexed."""
        name = rel.rsplit("/", 1)[-1]
        return not name.startswith(".") and glob_match(self.mask, rel) and not (self.ignore and self.ignored(rel))

    def selects(self, rel: str) -> bool:
        """Whether the file at `rel` would be indexed: no folder on its way is skipped and it is selected."""
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts):
            return False
        return not any(self.folder_skipped("/".join(parts[:i])) for i in range(1, len(parts))) and self.file_selected(
            rel
        )

    def key(self) -> str:
        """Changes when the selection does (stored with what was indexed under it)."""
        return json.dumps([self.mask, list(self.ignore)])
