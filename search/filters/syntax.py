"""Filters written in the query text: `tag:db -status:done (a:x OR b:y)` into SearchFilters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from indexing.errors import InvalidSearchInput
from indexing.patterns import LazyPattern
from search.filters.dates import _day, _earliest, _iso, _latest, date_boundary, period_end
from search.filters.model import FieldFilter, ParsedFilters, SearchFilters
from search.filters.values import (
    AFTER_WORDS,
    BEFORE_WORDS,
    DATE_WORDS,
    FILTER_WORDS,
    HAS_WORDS,
    MAX_VALUES,
    PATH_WORDS,
    RESERVED_WORDS,
    TAG_WORDS,
    TYPE_NAMES,
    TYPE_WORDS,
    URL_SCHEMES,
    _is_range,
    _unique,
    clean_glob,
    clean_tag,
    range_bounds,
    split_values,
    type_glob,
)

# A filter token: [-]word:value at the start of a word; value quoted or up to the next space.
# Quoted phrases come first so that `"see tag:db"` stays a phrase.
_PIECE = LazyPattern(
    r"""(?P<quoted>(?<!\S)-?"[^"\n]*")"""
    r"""|(?P<filter>(?<!\S)(?P<neg>-?)(?P<word>[A-Za-z_][\w.-]*):(?P<value>(?:[<>]=?)?(?:"[^"\n]*"|'[^'\n]*')|[^\s"':\\][^\s"]*))"""
    r"""|(?P<other>\S+)"""
)


def parse_filters(
    text: str,
    *,
    field_keys: Callable[[dict[str, list[str]]], dict[str, list[str]]] | None = None,
    now: datetime | None = None,
) -> ParsedFilters:
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
        elif (
            low not in FILTER_WORDS
            and low not in DATE_WORDS
            and not _type_kinds(low, [t[5]] if t[6] else split_values(t[5]))
        ):
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


_OPEN_BEFORE_FILTER = LazyPattern(r"(?<!\S)(\(+)(?=-?[A-Za-z_][\w.-]*:)")

_CLOSE_AFTER_FILTER = LazyPattern(
    r"(?<!\S)(-?[A-Za-z_][\w.-]*:(?:[<>]=?)?(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'()]+))(\)+)(?=\s|$)"
)


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
            (">=", _iso(date_boundary(value, now=now, what=low))),
            ("<", _iso(period_end(value, now=now))),
        ]
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
        entry = FieldFilter(
            key=word, values=[] if bounds else _unique(values)[:MAX_VALUES], keys=tuple(found[low]), bounds=bounds or []
        )
        (out.exclude_fields if neg else out.fields).append(entry)


def _dated(out: SearchFilters, *, after: bool, when: datetime, text: str) -> None:
    if after:
        out.after, out.after_text = _latest((out.after, out.after_text), (when, text))
    else:
        out.before, out.before_text = _earliest((out.before, out.before_text), (when, text))
