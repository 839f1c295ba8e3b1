"""What a search is filtered by (SearchFilters), and the structured form of it (API, MCP, CLI options)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from indexing.errors import InvalidSearchInput
from search.filters.dates import _day, _earliest, _latest, _relative, date_boundary
from search.filters.values import MAX_VALUES, _strings, _unique, clean_glob, clean_tag, range_bounds, split_values


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
        return not (
            self.tags
            or self.exclude_tags
            or self.paths
            or self.exclude_paths
            or self.after
            or self.before
            or self.fields
            or self.exclude_fields
            or self.any_of
        )

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
            tags=self.tags + other.tags,
            exclude_tags=_unique(self.exclude_tags + other.exclude_tags),
            paths=self.paths + other.paths,
            exclude_paths=_unique(self.exclude_paths + other.exclude_paths),
            after=after,
            before=before,
            after_text=after_text,
            before_text=before_text,
            fields=self.fields + other.fields,
            exclude_fields=self.exclude_fields + other.exclude_fields,
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
            parts.append(
                f"before {_day(self.before)}" + (f" ({self.before_text})" if _relative(self.before_text) else "")
            )
        parts += [f.describe() for f in self.fields]
        parts += [
            ("no " + f.key)
            if f.has
            else f"not ({f.describe()})"
            if f.bounds
            else f"{f.key} not " + " or ".join(f.values)
            for f in self.exclude_fields
        ]
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
        known = {
            "tags",
            "tag",
            "exclude_tags",
            "path",
            "paths",
            "exclude_path",
            "exclude_paths",
            "after",
            "before",
            "fields",
            "exclude_fields",
            "has",
            "exclude_has",
            "any_of",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidSearchInput(
                f"unknown filter '{unknown[0]}': use one of tags, exclude_tags, path, exclude_path, "
                "after, before, fields, exclude_fields, has, exclude_has, any_of"
            )
        out = cls()
        tags = _strings(data.get("tags"), "tags") + _strings(data.get("tag"), "tag")
        if tags:
            out.tags = [_unique(t for t in (clean_tag(x) for x in tags) if t)]
        out.exclude_tags = _unique(
            t for t in (clean_tag(x) for x in _strings(data.get("exclude_tags"), "exclude_tags")) if t
        )
        paths = _strings(data.get("path"), "path") + _strings(data.get("paths"), "paths")
        if paths:
            out.paths = [_unique(clean_glob(p) for p in paths)]
        out.exclude_paths = _unique(
            clean_glob(p)
            for p in _strings(data.get("exclude_path"), "exclude_path")
            + _strings(data.get("exclude_paths"), "exclude_paths")
        )
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
        out.exclude_fields += [
            FieldFilter(key=k, values=[], has=True) for k in _strings(data.get("exclude_has"), "exclude_has")
        ]
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


def _field_filters(value, name: str, *, now: datetime | None = None) -> list[FieldFilter]:
    if not value:
        return []
    if not isinstance(value, dict):
        raise InvalidSearchInput(
            f"filter '{name}' must be an object of frontmatter keys and values: "
            '{"status": "draft", "author": ["ana", "bo"]}'
        )
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
                    raise InvalidSearchInput(
                        f"filter '{name}': the range of '{key}' takes >=, >, <, <= with a number or a date"
                    )
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
                raise InvalidSearchInput(
                    f"filter '{name}': the value of '{key}' must be a string, number or list of them"
                )
        if not values:
            raise InvalidSearchInput(f"filter '{name}': '{key}' has no value")
        out.append(FieldFilter(key=key, values=_unique(values)[:MAX_VALUES]))
    return out


def filters_from_options(
    *, tags=(), exclude_tags=(), paths=(), after=None, before=None, where=(), now: datetime | None = None
) -> SearchFilters:
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
    return SearchFilters.from_dict(
        {
            "tags": [t for item in tags or () for t in split_values(item)],
            "exclude_tags": [t for item in exclude_tags or () for t in split_values(item)],
            "path": [p for item in paths or () for p in split_values(item)],
            "after": after,
            "before": before,
            "fields": fields,
            "exclude_fields": exclude,
        },
        now=now,
    )
