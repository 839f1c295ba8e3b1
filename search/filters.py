"""Filters over the notes' own structure: one model (SearchFilters) and one parser for every face.

In the query text (any mode, any face: CLI, web box, API `query`, MCP)::

    tag:db            the note has the tag (frontmatter `tags` or an inline #tag; any case), or
                      a tag nested below it (`tag:project` matches `project/alpha`)
    tag:a,b           either tag            (a comma list is "any of", for every filter)
    -tag:x            the note does not have the tag
    path:meetings/**  a glob over the path inside its collection (`*` within a folder, `**` across
                      folders, `?`, `[abc]`, `{a,b}`); a plain folder name means everything under it
    after:2025-01-01  the note's date is on or after the start of that day (month, year…)
    before:2025-06    …strictly before the start of June 2025 (after:X before:Y is [X, Y))
    after:"last week" relative dates (see `parse_date`)
    status:draft      any other frontmatter key: its value is `draft`, or its list holds `draft`
    -status:draft     the note's `status` is not `draft`
    author:"Ana Lopez"  quoted values (double or single quotes) may hold spaces and commas
    priority:>=2      a range on a number or a date field: >, >=, <, <=, or a..b (both ends included;
    date:2025-01..2025-03   a date end holds its whole day, month or year); reviewed:<"30 days ago"
                      `date:` is the note's date (as after:/before:), any other key its frontmatter value
    has:due           the note's frontmatter has the key (any value); -has:due: it has not
    tag:db OR status:draft   either holds; parentheses group: (tag:db OR tag:sql) -status:done

The same filter written twice must hold twice (`tag:a tag:b`: both tags); `-after:X` reads as
`before:X`. A `word:value` whose word is neither a filter above nor a frontmatter key of any note
the searcher sees stays in the text (it is searched as words) and a warning says so. URLs
(`http://…`, `pmd://…`) and the hybrid query document's `lex:/vec:/hyde:/intent:` are text.

Structured filters (API / MCP `filters`, CLI --tag/--path/--after/--before/--where) are the same
model (`SearchFilters.from_dict`), merged with those of the text. Retrieval turns them into SQL
with one builder (search.retrieval.filters), inside each search, so `-n 10` gives ten matches.

This module is pure (no database): the frontmatter keys are looked up by the caller's
`field_keys` function.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from indexing.errors import InvalidSearchInput
from indexing.convert import FORMAT_EXTENSIONS
from indexing.paths import glob_regex_body
from indexing.patterns import LazyPattern

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
URL_SCHEMES = frozenset({
    "http", "https", "ftp", "ftps", "sftp", "file", "mailto", "pmd", "ssh", "git", "s3", "ws", "wss",
    "urn", "data", "tel", "obsidian", "zotero", "news", "irc", "magnet",
})
# `type:pdf`: a file type (indexing.convert), as the globs of its extensions. `type:` with any other
# value stays what it was before file types: a frontmatter field (`type:meeting`).
TYPE_WORDS = frozenset({"type"})
TYPE_NAMES = {**{name: name for name in FORMAT_EXTENSIONS}, "md": "markdown", "txt": "text", "htm": "html"}
MAX_VALUES = 50  # values in one filter (a comma list), and groups of one kind

# A filter token: [-]word:value at the start of a word; value quoted or up to the next space.
# Quoted phrases come first so that `"see tag:db"` stays a phrase.
_PIECE = LazyPattern(
    r'''(?P<quoted>(?<!\S)-?"[^"\n]*")'''
    r'''|(?P<filter>(?<!\S)(?P<neg>-?)(?P<word>[A-Za-z_][\w.-]*):(?P<value>(?:[<>]=?)?(?:"[^"\n]*"|'[^'\n]*')|[^\s"':\\][^\s"]*))'''
    r'''|(?P<other>\S+)'''
)


@dataclass
class FieldFilter:
    """`key:value1,value2`: the frontmatter value of `key` is one of the values (or its list holds one)."""

    key: str  # as written
    values: list[str]
    keys: tuple[str, ...] = ()  # the key's spellings in the index (any case); empty: as written
    # `has:key` (the key is there, any value) or a range: [(">=", "2"), ("<", "2025-04-01")] on a
    # number, or on a date (values as YYYY-MM-DD, ends already turned into day boundaries)
    has: bool = False
    bounds: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        if self.has:
            return {"key": self.key, "has": True}
        if self.bounds:
            return {"key": self.key, "range": [list(b) for b in self.bounds]}
        return {"key": self.key, "values": list(self.values)}

    def describe(self) -> str:
        if self.has:
            return f"has {self.key}"
        if self.bounds:
            return f"{self.key} " + " and ".join(f"{op} {value}" for op, value in self.bounds)
        return f"{self.key}: " + " or ".join(self.values)


@dataclass
class SearchFilters:
    tags: list[list[str]] = field(default_factory=list)  # groups: any tag of each group, every group
    exclude_tags: list[str] = field(default_factory=list)
    paths: list[list[str]] = field(default_factory=list)  # glob groups, as tags
    exclude_paths: list[str] = field(default_factory=list)
    after: datetime | None = None  # note_date >= after
    before: datetime | None = None  # note_date < before
    fields: list[FieldFilter] = field(default_factory=list)  # every one must hold
    exclude_fields: list[FieldFilter] = field(default_factory=list)  # none may hold
    after_text: str = ""  # the dates as written (`last week`), for messages
    before_text: str = ""
    # groups of alternatives (`tag:db OR status:draft`): in each group one of the filters must hold
    any_of: list[list[SearchFilters]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.tags or self.exclude_tags or self.paths or self.exclude_paths or self.after
                    or self.before or self.fields or self.exclude_fields or self.any_of)

    def all_fields(self) -> list[FieldFilter]:
        """Every field filter, in the alternatives too (their keys are looked up together)."""
        out = self.fields + self.exclude_fields
        for group in self.any_of:
            for alternative in group:
                out += alternative.all_fields()
        return out

    @property
    def dated(self) -> bool:
        return self.after is not None or self.before is not None

    def merged(self, other: SearchFilters | None) -> SearchFilters:
        """Both sets of conditions (the later of two `after`s, the earlier of two `before`s)."""
        if other is None or other.empty:
            return self
        if self.empty:
            return other
        after, after_text = _latest((self.after, self.after_text), (other.after, other.after_text))
        before, before_text = _earliest((self.before, self.before_text), (other.before, other.before_text))
        return SearchFilters(
            tags=self.tags + other.tags, exclude_tags=_unique(self.exclude_tags + other.exclude_tags),
            paths=self.paths + other.paths, exclude_paths=_unique(self.exclude_paths + other.exclude_paths),
            after=after, before=before, after_text=after_text, before_text=before_text,
            fields=self.fields + other.fields, exclude_fields=self.exclude_fields + other.exclude_fields,
            any_of=self.any_of + other.any_of,
        )

    def as_dict(self) -> dict:
        """The filters applied, for answers (JSON): only what is set."""
        out: dict = {}
        if self.tags:
            out["tags"] = [list(g) for g in self.tags]
        if self.exclude_tags:
            out["exclude_tags"] = list(self.exclude_tags)
        if self.paths:
            out["paths"] = [list(g) for g in self.paths]
        if self.exclude_paths:
            out["exclude_paths"] = list(self.exclude_paths)
        if self.after is not None:
            out["after"] = self.after.isoformat()
        if self.before is not None:
            out["before"] = self.before.isoformat()
        if self.fields:
            out["fields"] = [f.as_dict() for f in self.fields]
        if self.exclude_fields:
            out["exclude_fields"] = [f.as_dict() for f in self.exclude_fields]
        if self.any_of:
            out["any_of"] = [[a.as_dict() for a in group] for group in self.any_of]
        return out

    def describe(self) -> str:
        """One line for people: `tag db or sql, after 2025-01-01 (last week), status: draft`."""
        parts = [" or ".join(f"#{t}" for t in g) for g in self.tags]
        parts += [f"not #{t}" for t in self.exclude_tags]
        parts += ["path " + " or ".join(g) for g in self.paths]
        parts += [f"path not {p}" for p in self.exclude_paths]
        if self.after is not None:
            parts.append(f"after {_day(self.after)}" + (f" ({self.after_text})" if _relative(self.after_text) else ""))
        if self.before is not None:
            parts.append(f"before {_day(self.before)}" + (f" ({self.before_text})" if _relative(self.before_text) else ""))
        parts += [f.describe() for f in self.fields]
        parts += [("no " + f.key) if f.has else f"not ({f.describe()})" if f.bounds
                  else f"{f.key} not " + " or ".join(f.values) for f in self.exclude_fields]
        parts += ["(" + " or ".join(a.describe() for a in group) + ")" for group in self.any_of]
        return ", ".join(parts)

    @classmethod
    def from_dict(cls, data: dict | None, *, now: datetime | None = None) -> SearchFilters:
        """Structured filters (API, MCP, CLI options)::

            {"tags": "db" | ["db", "sql"], "exclude_tags": [...], "path": "glob" | [globs],
             "exclude_path": ..., "after": "2025-01-01" | "last week", "before": ...,
             "fields": {"status": "draft" | ["draft", "review"]}, "exclude_fields": {...}}

        Lists are "any of"; different keys must all hold."""
        if not data:
            return cls()
        if not isinstance(data, dict):
            raise InvalidSearchInput("filters must be an object: {tags, exclude_tags, path, after, before, fields}")
        known = {"tags", "tag", "exclude_tags", "path", "paths", "exclude_path", "exclude_paths", "after", "before",
                 "fields", "exclude_fields", "has", "exclude_has", "any_of"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidSearchInput(f"unknown filter '{unknown[0]}': use one of tags, exclude_tags, path, exclude_path, "
                              "after, before, fields, exclude_fields, has, exclude_has, any_of")
        out = cls()
        tags = _strings(data.get("tags"), "tags") + _strings(data.get("tag"), "tag")
        if tags:
            out.tags = [_unique(t for t in (clean_tag(x) for x in tags) if t)]
        out.exclude_tags = _unique(t for t in (clean_tag(x) for x in _strings(data.get("exclude_tags"), "exclude_tags"))
                                   if t)
        paths = _strings(data.get("path"), "path") + _strings(data.get("paths"), "paths")
        if paths:
            out.paths = [_unique(clean_glob(p) for p in paths)]
        out.exclude_paths = _unique(clean_glob(p) for p in _strings(data.get("exclude_path"), "exclude_path")
                                    + _strings(data.get("exclude_paths"), "exclude_paths"))
        for name in ("after", "before"):
            value = data.get(name)
            if value in (None, ""):
                continue
            if not isinstance(value, str):
                raise InvalidSearchInput(f"filter '{name}' must be a date (YYYY-MM-DD, 'last week', …)")
            setattr(out, name, date_boundary(value, now=now, what=name))
            setattr(out, f"{name}_text", value.strip())
        out.fields = _field_filters(data.get("fields"), "fields", now=now)
        out.exclude_fields = _field_filters(data.get("exclude_fields"), "exclude_fields", now=now)
        out.fields += [FieldFilter(key=k, values=[], has=True) for k in _strings(data.get("has"), "has")]
        out.exclude_fields += [FieldFilter(key=k, values=[], has=True) for k in _strings(data.get("exclude_has"), "exclude_has")]
        alternatives = data.get("any_of")
        if alternatives:
            if not isinstance(alternatives, list) or not all(isinstance(a, dict) for a in alternatives):
                raise InvalidSearchInput("filter 'any_of' must be a list of filter objects, one of which must hold")
            group = [cls.from_dict({k: v for k, v in a.items() if v is not None}, now=now) for a in alternatives]
            group = [a for a in group if not a.empty]
            if group:
                out.any_of.append(group)
        for kind in (out.tags, out.paths):
            if kind and not kind[0]:
                kind.clear()
        return out


@dataclass
class ParsedFilters:
    """What `parse_filters` read from a query text."""

    text: str  # the query without its filters (line breaks kept)
    filters: SearchFilters
    warnings: list[str] = field(default_factory=list)


# --- the query text ------------------------------------------------------------------------------


def parse_filters(text: str, *, field_keys: Callable[[dict[str, list[str]]], dict[str, list[str]]] | None = None,
                  now: datetime | None = None) -> ParsedFilters:
    """The filters written in `text` and the text left to search.

    `field_keys({word: values})` gets the lower-cased words of `word:value` tokens that are no
    built-in filter (and the keys of `has:key`), with the values written for each, and returns, for
    those that are frontmatter keys of a note the searcher sees, their spellings in the index; the
    others stay in the text with a warning. Without it, no `word:value` is a field filter (each is
    text, with the warning). `OR` and parentheses between filters group them into alternatives; where
    they do not make a well-formed group of filters they are text."""
    text = (text or "").replace("\x00", " ")
    written = text.split("\n")
    lines = [_spaced_parentheses(line) for line in written]
    tokens: list[list] = []  # [line, start, end, neg, word, value, quoted]
    items: list[list[list]] = []  # per line: [kind, start, end, token index]; kind filter | or | ( | ) | word
    for number, line in enumerate(lines):
        row: list[list] = []
        for m in _PIECE.finditer(line):
            if m.group("filter") is not None:
                word, raw = m.group("word"), m.group("value")
                low = word.lower()
                if not (low in RESERVED_WORDS or low in URL_SCHEMES or raw.startswith("//")):
                    quoted = raw[:1] in "\"'" and len(raw) >= 2 and raw[-1] == raw[0]
                    value = raw[1:-1].strip() if quoted else raw
                    if value:
                        tokens.append([number, m.start(), m.end(), bool(m.group("neg")), word, value, quoted])
                        row.append(["filter", m.start(), m.end(), len(tokens) - 1])
                        continue
            piece = m.group(0)
            kind = "or" if piece == "OR" else piece if piece in ("(", ")") else "word"
            row.append([kind, m.start(), m.end(), None])
        items.append(row)
    if not tokens:
        return ParsedFilters(text=text, filters=SearchFilters())
    candidates: dict[str, list[str]] = {}
    for t in tokens:
        low = t[4].lower()
        if low in HAS_WORDS:
            candidates.setdefault(t[5].lower(), [])
        elif low not in FILTER_WORDS and low not in DATE_WORDS and not _type_kinds(low, [t[5]] if t[6] else split_values(t[5])):
            candidates.setdefault(low, []).extend([t[5]] if t[6] or _is_range(t[5]) else split_values(t[5]))
    found = {k.lower(): list(v) for k, v in (field_keys(candidates) if field_keys and candidates else {}).items()}
    out = SearchFilters()
    warnings: list[str] = []
    unknown: list[str] = []
    for n, (_, _, _, _, word, value, t_quoted) in enumerate(tokens):
        low = word.lower()
        if _type_kinds(low, [value] if t_quoted else split_values(value)):
            continue  # type:pdf, a file type (not a frontmatter field `type`, such as type:meeting)
        if low in HAS_WORDS and field_keys is not None:
            if value.lower() not in found:
                found[value.lower()] = [value]  # no note has the key: has:key holds for none, -has:key for all
                message = f"no notes have a field '{value}'"
                if message not in warnings:
                    warnings.append(message)
            continue
        if low in FILTER_WORDS or (low in DATE_WORDS) or low in found:
            continue
        if low not in unknown:
            unknown.append(low)
            warnings.append(f"no notes have a field '{word}'; searched '{word}:{value}' as text")
        for row in items:
            for item in row:
                if item[3] == n:
                    item[0] = "word"
    removed: dict[int, list[tuple[int, int]]] = {}
    for number, row in enumerate(items):
        for run in _runs(row):
            tree = _tree(run)
            if tree is None:  # OR and parentheses that group no filters: text; the filters hold together
                run = [item for item in run if item[0] == "filter"]
                tree = ("and", [("leaf", item[3]) for item in run])
            removed.setdefault(number, []).extend((item[1], item[2]) for item in run)
            _build(tree, out, tokens, found, now)
    if len(out.tags) > MAX_VALUES or len(out.paths) > MAX_VALUES or len(out.fields) > MAX_VALUES:
        raise InvalidSearchInput(f"too many filters (at most {MAX_VALUES} of a kind)")
    if out.after is not None and out.before is not None and out.after >= out.before:
        warnings.append(f"no note can be dated on or after {_day(out.after)} and before {_day(out.before)}")
    rest = []
    for number, line in enumerate(lines):
        spans = sorted(removed.get(number, []))
        if not spans:
            rest.append(written[number])
            continue
        pieces, pos = [], 0
        for start, end in spans:
            pieces.append(line[pos:start])
            pos = end
        pieces.append(line[pos:])
        rest.append(" ".join(" ".join(pieces).split()))
    return ParsedFilters(text="\n".join(rest).strip(), filters=out, warnings=warnings)


HAS_WORDS = frozenset({"has"})
DATE_WORDS = frozenset({"date"})  # the note's date (after:/before:; it comes from frontmatter `date` first)
_OPEN_BEFORE_FILTER = LazyPattern(r"(?<!\S)(\(+)(?=-?[A-Za-z_][\w.-]*:)")
_CLOSE_AFTER_FILTER = LazyPattern(
    r"(?<!\S)(-?[A-Za-z_][\w.-]*:(?:[<>]=?)?(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'()]+))(\)+)(?=\s|$)")


def _spaced_parentheses(line: str) -> str:
    """`(tag:db OR status:draft)` with its parentheses apart from the filters they hold."""
    if "(" not in line and ")" not in line:
        return line
    line = _OPEN_BEFORE_FILTER.sub(lambda m: " ".join(m.group(1)) + " ", line)
    return _CLOSE_AFTER_FILTER.sub(lambda m: m.group(1) + " " + " ".join(m.group(2)), line)


def _runs(row: list[list]) -> list[list[list]]:
    """The stretches of a line between its words that hold a filter."""
    out, current = [], []
    for item in row + [["word", 0, 0, None]]:
        if item[0] == "word":
            if any(i[0] == "filter" for i in current):
                out.append(current)
            current = []
        else:
            current.append(item)
    return out


def _tree(run: list[list]):
    """Filters, OR and parentheses as a tree (("or" | "and", children) or ("leaf", token)); None when
    they are not well formed."""
    pos = 0

    def peek():
        return run[pos][0] if pos < len(run) else None

    def expr():
        nonlocal pos
        alternatives = [conjunction()]
        while peek() == "or":
            pos += 1
            alternatives.append(conjunction())
        return ("or", alternatives) if len(alternatives) > 1 else alternatives[0]

    def conjunction():
        nonlocal pos
        parts = []
        while peek() in ("filter", "("):
            if peek() == "filter":
                parts.append(("leaf", run[pos][3]))
                pos += 1
            else:
                pos += 1
                parts.append(expr())
                if peek() != ")":
                    raise ValueError
                pos += 1
        if not parts:
            raise ValueError
        return ("and", parts)

    try:
        tree = expr()
    except ValueError:
        return None
    return tree if pos == len(run) else None


def _type_kinds(low: str, values: list[str]) -> list[str]:
    """`type:pdf,docx` names file types (their lower-case names), else [] (a frontmatter field `type`)."""
    kinds = [v.lower() for v in values]
    return kinds if low in TYPE_WORDS and kinds and all(k in TYPE_NAMES for k in kinds) else []


def _build(node, into: SearchFilters, tokens, found, now) -> None:
    if node[0] == "leaf":
        _apply(into, tokens[node[1]], found, now)
    elif node[0] == "and":
        for child in node[1]:
            _build(child, into, tokens, found, now)
    else:
        group = []
        for child in node[1]:
            alternative = SearchFilters()
            _build(child, alternative, tokens, found, now)
            group.append(alternative)
        into.any_of.append(group)


def _apply(out: SearchFilters, token, found, now) -> None:
    """One `word:value` token into `out`."""
    _, _, _, neg, word, value, quoted = token
    low = word.lower()
    values = [value] if quoted else split_values(value)
    if low in TAG_WORDS:
        tags = _unique(t for t in (clean_tag(v) for v in values) if t)
        if not tags:
            return
        if neg:
            out.exclude_tags = _unique(out.exclude_tags + tags)
        else:
            out.tags.append(tags)
    elif low in PATH_WORDS:
        globs = _unique(clean_glob(v) for v in values)
        if neg:
            out.exclude_paths = _unique(out.exclude_paths + globs)
        else:
            out.paths.append(globs)
    elif low in AFTER_WORDS or low in BEFORE_WORDS:
        _dated(out, after=(low in AFTER_WORDS) != neg, when=date_boundary(value, now=now, what=low), text=value)
    elif low in DATE_WORDS:
        bounds = range_bounds(value, now=now, what=low, dates=True) or [
            (">=", _iso(date_boundary(value, now=now, what=low))), ("<", _iso(period_end(value, now=now)))]
        for op, bound in bounds:  # -date:X… reads as the other side, as -after:X is before:X
            _dated(out, after=(op == ">=") != neg, when=date_boundary(bound, now=now, what=low), text=value)
    elif _type_kinds(low, values):
        globs = _unique(type_glob(TYPE_NAMES[k]) for k in _type_kinds(low, values))
        if neg:
            out.exclude_paths = _unique(out.exclude_paths + globs)
        else:
            out.paths.append(globs)
    elif low in HAS_WORDS:
        entry = FieldFilter(key=value, values=[], keys=tuple(found.get(value.lower(), [value])), has=True)
        (out.exclude_fields if neg else out.fields).append(entry)
    else:
        bounds = range_bounds(value, now=now, what=word)
        entry = FieldFilter(key=word, values=[] if bounds else _unique(values)[:MAX_VALUES],
                            keys=tuple(found[low]), bounds=bounds or [])
        (out.exclude_fields if neg else out.fields).append(entry)


def _dated(out: SearchFilters, *, after: bool, when: datetime, text: str) -> None:
    if after:
        out.after, out.after_text = _latest((out.after, out.after_text), (when, text))
    else:
        out.before, out.before_text = _earliest((out.before, out.before_text), (when, text))


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


def range_bounds(value: str, *, now: datetime | None = None, what: str = "range",
                 dates: bool = False) -> list[tuple[str, str]] | None:
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
    return (([(">=", _iso(date_boundary(low_text, now=now, what=what)))] if low_text else [])
            + ([("<", _iso(period_end(high_text, now=now, what=what)))] if high_text else []))


def _iso(moment: datetime) -> str:
    return moment.date().isoformat() if moment.hour == moment.minute == moment.second == 0 else moment.isoformat()


def period_end(text: str, *, now: datetime | None = None, what: str = "date") -> datetime:
    """The first moment after the year, month or day `text` names (`2025-03` → 2025-04-01)."""
    value = " ".join(str(text).strip().lower().split())
    iso = _ISO_DAY.match(value)
    start = date_boundary(text, now=now, what=what)
    if iso and not iso.group(2):
        return start.replace(year=start.year + 1)
    if iso and not iso.group(3):
        return datetime.combine(_months_back(start.date(), -1), time(), tzinfo=UTC)
    if start.hour == start.minute == start.second == 0:
        return start + timedelta(days=1)
    return start


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


# --- dates ---------------------------------------------------------------------------------------

_ISO_DAY = LazyPattern(r"^(\d{4})(?:[-/](\d{1,2})(?:[-/](\d{1,2}))?)?$")
_AGO = LazyPattern(r"^(\d{1,4})\s*(h|hours?|d|days?|w|weeks?|m|mo|months?|y|years?)(?:\s+ago)?$")
_UNITS = {"h": "hour", "d": "day", "w": "week", "m": "month", "mo": "month", "y": "year"}
DATE_HELP = ("YYYY, YYYY-MM, YYYY-MM-DD, an ISO datetime, today, yesterday, 'this week|month|year', "
             "'last week|month|year', 'N days|weeks|months|years ago', 3d, 2w, 6m, 1y")


def date_boundary(text: str, *, now: datetime | None = None, what: str = "date") -> datetime:
    """The moment a date filter value starts: the first instant of the day, month or year written,
    or of the day a relative form names. Dates are read as UTC days, as the index reads a note's
    dates (indexing.structure); relative forms count from `now` in the server's time zone."""
    value = " ".join(str(text).strip().lower().replace("_", " ").split())
    if not value:
        raise InvalidSearchInput(f"{what}: the date is empty")
    now = now or _now()
    today = _local_date(now)
    day = None
    if value in ("now",):
        return now.astimezone(UTC)
    if value == "today":
        day = today
    elif value == "yesterday":
        day = today - timedelta(days=1)
    elif value == "tomorrow":
        day = today + timedelta(days=1)
    elif value in ("this week", "week"):
        day = today - timedelta(days=today.weekday())
    elif value in ("this month", "month"):
        day = today.replace(day=1)
    elif value in ("this year", "year"):
        day = today.replace(month=1, day=1)
    elif value in ("last week", "past week"):
        day = today - timedelta(days=7)
    elif value in ("last month", "past month"):
        day = _months_back(today, 1)
    elif value in ("last year", "past year"):
        day = _months_back(today, 12)
    else:
        ago = _AGO.match(value)
        if ago:
            n, unit = int(ago.group(1)), _UNITS.get(ago.group(2), ago.group(2).rstrip("s"))
            if unit == "hour":
                return (now - timedelta(hours=n)).astimezone(UTC)
            if unit == "day":
                day = today - timedelta(days=n)
            elif unit == "week":
                day = today - timedelta(weeks=n)
            elif unit == "month":
                day = _months_back(today, n)
            else:
                day = _months_back(today, 12 * n)
    if day is not None:
        return datetime.combine(day, time(), tzinfo=UTC)
    iso = _ISO_DAY.match(value)
    try:
        if iso:
            year, month, dd = int(iso.group(1)), int(iso.group(2) or 1), int(iso.group(3) or 1)
            return datetime(year, month, dd, tzinfo=UTC)
        text_iso = value.upper().replace(" ", "T", 1)
        if text_iso.endswith("Z"):
            text_iso = text_iso[:-1] + "+00:00"
        if text_iso[:4].isdigit():
            parsed = datetime.fromisoformat(text_iso)
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except ValueError:
        pass
    raise InvalidSearchInput(f"{what}: cannot read the date '{text}' (use {DATE_HELP})")


def _now() -> datetime:
    from django.utils import timezone

    return timezone.now()


def _local_date(now: datetime) -> date:
    try:
        from django.utils import timezone

        return timezone.localtime(now).date()
    except Exception:  # noqa: BLE001 - without Django settings: UTC
        return now.astimezone(UTC).date()


def _months_back(day: date, months: int) -> date:
    index = day.year * 12 + (day.month - 1) - months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _relative(text: str) -> bool:
    return bool(text) and not text[:4].isdigit()


def _day(moment: datetime) -> str:
    if moment.hour == moment.minute == moment.second == 0:
        return moment.date().isoformat()
    return moment.isoformat()


def _latest(a: tuple, b: tuple) -> tuple:
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return a if a[0] >= b[0] else b


def _earliest(a: tuple, b: tuple) -> tuple:
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return a if a[0] <= b[0] else b


# --- structured input ------------------------------------------------------------------------------


def _unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))


def _strings(value, name: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return split_values(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                for v in value):
        if len(value) > MAX_VALUES:
            raise InvalidSearchInput(f"filter '{name}': at most {MAX_VALUES} values")
        return [str(v).strip() for v in value if str(v).strip()]
    raise InvalidSearchInput(f"filter '{name}' must be a string or a list of strings")


def _field_filters(value, name: str, *, now: datetime | None = None) -> list[FieldFilter]:
    if not value:
        return []
    if not isinstance(value, dict):
        raise InvalidSearchInput(f"filter '{name}' must be an object of frontmatter keys and values: "
                          '{"status": "draft", "author": ["ana", "bo"]}')
    if len(value) > MAX_VALUES:
        raise InvalidSearchInput(f"filter '{name}': at most {MAX_VALUES} keys")
    out = []
    for key, raw in value.items():
        key = str(key).strip()
        if not key:
            raise InvalidSearchInput(f"filter '{name}': a key is empty")
        if isinstance(raw, dict):  # a range: {">=": 2, "<": 5}
            bounds = []
            for op, bound in raw.items():
                if op not in (">=", ">", "<", "<=") or isinstance(bound, (bool, dict, list)) or bound in (None, ""):
                    raise InvalidSearchInput(f"filter '{name}': the range of '{key}' takes >=, >, <, <= with a number "
                                             "or a date")
                bounds += range_bounds(f"{op}{bound}", now=now, what=key) or []
            if not bounds:
                raise InvalidSearchInput(f"filter '{name}': '{key}' has no range")
            out.append(FieldFilter(key=key, values=[], bounds=bounds))
            continue
        items = raw if isinstance(raw, (list, tuple)) else [raw]
        values = []
        for item in items:
            if isinstance(item, bool):
                values.append("true" if item else "false")
            elif isinstance(item, (str, int, float)):
                if str(item).strip():
                    values.append(str(item).strip())
            else:
                raise InvalidSearchInput(f"filter '{name}': the value of '{key}' must be a string, number or list of them")
        if not values:
            raise InvalidSearchInput(f"filter '{name}': '{key}' has no value")
        out.append(FieldFilter(key=key, values=_unique(values)[:MAX_VALUES]))
    return out


def type_glob(kind: str) -> str:
    """The path glob of a file type: `pdf` → `**/*.pdf`, `markdown` → `**/*.{md,markdown,mdown,mkd}`."""
    exts = FORMAT_EXTENSIONS[kind]
    return "**/*." + (exts[0] if len(exts) == 1 else "{" + ",".join(exts) + "}")


def filters_from_options(*, tags=(), exclude_tags=(), paths=(), after=None, before=None, where=(),
                         now: datetime | None = None) -> SearchFilters:
    """The CLI's --tag/--path/--after/--before/--where k=v (k!=v or -k=v to exclude) as SearchFilters."""
    fields: dict[str, list[str]] = {}
    exclude: dict[str, list[str]] = {}
    for item in where or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        negated = key.startswith("-") or key.endswith("!")
        key = key.lstrip("-").rstrip("!").strip()
        if not sep or not key or not value.strip():
            raise InvalidSearchInput(f"where {item!r}: write KEY=VALUE (or KEY!=VALUE to exclude)")
        (exclude if negated else fields).setdefault(key, []).extend(split_values(value))
    return SearchFilters.from_dict({
        "tags": [t for item in tags or () for t in split_values(item)],
        "exclude_tags": [t for item in exclude_tags or () for t in split_values(item)],
        "path": [p for item in paths or () for p in split_values(item)],
        "after": after, "before": before, "fields": fields, "exclude_fields": exclude,
    }, now=now)


# --- time words in a plain query ("meeting notes last week") ------------------------------------------

_TIME_WORDS = re.compile(
    r"(?<![\w:\"'-])(?P<phrase>yesterday|today|this (?:week|month|year)|last (?:week|month|year)"
    r"|(?:in )?the (?:last|past) (?:week|month|year)|past (?:week|month|year)|recently|recent)(?![\w:\"'-])",
    re.IGNORECASE)
RECENT = "30 days ago"  # what "recent" and "recently" mean


@dataclass
class TimeWords:
    """Time words read as a date filter: the text without them, the filter, the words as written."""

    text: str
    filters: SearchFilters
    phrase: str


def time_words(text: str, *, now: datetime | None = None) -> TimeWords | None:
    """The first time phrase of a plain query as the dates it names: `yesterday` is that day, `today`
    and `this week|month|year` from their start, `last week|month|year` the 7 days, month or year up to
    now, `recent`/`recently` the last 30 days. None without one (a quoted phrase or a filter value is
    not read)."""
    if not text or '"' in text and text.count('"') % 2 == 0 and _inside_quotes(text):
        return None
    match = _TIME_WORDS.search(text)
    if match is None:
        return None
    phrase = match.group("phrase")
    word = " ".join(phrase.lower().split())
    word = re.sub(r"^(?:in )?the (?:last|past) ", "last ", word).replace("past ", "last ")
    out = SearchFilters()
    if word in ("recent", "recently"):
        out.after, out.after_text = date_boundary(RECENT, now=now), phrase
    else:
        out.after, out.after_text = date_boundary(word, now=now), phrase
        if word == "yesterday":
            out.before, out.before_text = date_boundary("today", now=now), phrase
    rest = " ".join((text[:match.start()] + " " + text[match.end():]).split())
    return TimeWords(text=rest, filters=out, phrase=phrase)


def _inside_quotes(text: str) -> bool:
    """Some time phrase lies inside a quoted phrase: the words are meant literally."""
    return any(_TIME_WORDS.search(q) for q in re.findall(r'"([^"]*)"', text))
