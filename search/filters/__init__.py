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
    after:"last week" relative dates (see `date_boundary`)
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

The package is pure (no database): the frontmatter keys are looked up by the caller's
`field_keys` function.

Its modules: `model` (SearchFilters and its structured form), `syntax` (the query text), `values`
(words, tags, globs, ranges), `dates`, `time_words`.
"""

from __future__ import annotations

from search.filters.dates import DATE_HELP, date_boundary, period_end
from search.filters.model import FieldFilter, ParsedFilters, SearchFilters, filters_from_options
from search.filters.syntax import parse_filters
from search.filters.time_words import RECENT, TimeWords, time_words
from search.filters.values import (
    MAX_VALUES,
    SORT_DATE,
    SORT_RELEVANCE,
    SORTS,
    TYPE_NAMES,
    clean_glob,
    clean_tag,
    glob_to_regex,
    range_bounds,
    split_values,
    type_glob,
)

__all__ = [
    "DATE_HELP",
    "FieldFilter",
    "MAX_VALUES",
    "ParsedFilters",
    "RECENT",
    "SORTS",
    "SORT_DATE",
    "SORT_RELEVANCE",
    "SearchFilters",
    "TYPE_NAMES",
    "TimeWords",
    "clean_glob",
    "clean_tag",
    "date_boundary",
    "filters_from_options",
    "glob_to_regex",
    "parse_filters",
    "period_end",
    "range_bounds",
    "split_values",
    "time_words",
    "type_glob",
]
