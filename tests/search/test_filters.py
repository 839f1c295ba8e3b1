"""Filters: the one parser (search.filters), the one SQL builder
(search.retrieval.filters) inside keyword, vector and hybrid retrieval, dates and sorting, and
the same answers through the CLI, the API and MCP."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from indexing.access import Access
from indexing.errors import InvalidSearchInput
from search.filters import (
    SearchFilters,
    date_boundary,
    filters_from_options,
    glob_to_regex,
    parse_filters,
)
from search.request import Mode, SearchRequest
from tests.support.factories import api_client, make_user
from tests.support.mcp_client import SERVED_DB, call_tool, close_other_connections

NOW = datetime(2025, 6, 18, 15, 30, tzinfo=UTC)  # a Wednesday


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def parse(text: str, keys=("status", "author", "authors", "priority"), **kwargs):
    """parse_filters with a fixed now and these frontmatter keys known (as the index spells them)."""
    lookups = []

    def field_keys(words):
        lookups.append(set(words))
        return {w: [w] for w in words if w in keys}

    parsed = parse_filters(text, field_keys=field_keys, now=NOW, **kwargs)
    parsed.lookups = lookups
    return parsed


# --- the parser ------------------------------------------------------------------------------------


def test_tags_any_of_every_group_and_exclusions():
    parsed = parse("postgres tag:DB tag:#a,b -tag:x,Y vacuum")
    assert parsed.text == "postgres vacuum"
    f = parsed.filters
    assert f.tags == [["db"], ["a", "b"]]  # lower case, no '#'; a comma list is one group
    assert f.exclude_tags == ["x", "y"]
    assert parse("tags:ops").filters.tags == [["ops"]]  # `tags:` is `tag:`
    assert not parsed.warnings and parsed.lookups == []  # built-in filters need no key lookup


def test_path_globs_dates_and_fields():
    parsed = parse(
        'meetings path:meetings/** -path:"archive/old notes/**" after:2025-01-01 before:2025-06 '
        "status:draft -author:bo priority:1,2"
    )
    f = parsed.filters
    assert parsed.text == "meetings"
    assert f.paths == [["meetings/**"]] and f.exclude_paths == ["archive/old notes/**"]
    assert f.after == day("2025-01-01") and f.before == day("2025-06-01")
    assert [(e.key, e.values, e.keys) for e in f.fields] == [
        ("status", ["draft"], ("status",)),
        ("priority", ["1", "2"], ("priority",)),
    ]
    assert [(e.key, e.values) for e in f.exclude_fields] == [("author", ["bo"])]
    assert parsed.lookups == [{"status", "author", "priority"}]  # one lookup for all of them


def test_quoted_values_keep_spaces_and_commas():
    f = parse('author:"Lopez, Ana" tag:"my tag" after:\'last week\'').filters
    assert [(e.key, e.values) for e in f.fields] == [("author", ["Lopez, Ana"])]
    assert f.tags == [["my tag"]]
    assert f.after == day("2025-06-11")
    assert f.after_text == "last week"


def test_relative_dates_from_a_fixed_now():
    expected = {
        "today": "2025-06-18",
        "yesterday": "2025-06-17",
        "this week": "2025-06-16",
        "this month": "2025-06-01",
        "this year": "2025-01-01",
        "last week": "2025-06-11",
        "last month": "2025-05-18",
        "last year": "2024-06-18",
        "3 days ago": "2025-06-15",
        "1 day ago": "2025-06-17",
        "2 weeks ago": "2025-06-04",
        "3d": "2025-06-15",
        "2w": "2025-06-04",
        "6m": "2024-12-18",
        "1y": "2024-06-18",
        "2 months ago": "2025-04-18",
        "2025": "2025-01-01",
        "2025-03": "2025-03-01",
        "2025-03-14": "2025-03-14",
        "2025/3/4": "2025-03-04",
    }
    for text, when in expected.items():
        assert date_boundary(text, now=NOW) == day(when), text
    assert date_boundary("2025-03-14T10:30:00+02:00", now=NOW) == datetime(2025, 3, 14, 8, 30, tzinfo=UTC)
    assert date_boundary("2025-03-14 10:30", now=NOW) == datetime(2025, 3, 14, 10, 30, tzinfo=UTC)
    assert date_boundary("48h", now=NOW) == NOW - timedelta(hours=48)
    assert date_boundary("last month", now=datetime(2025, 3, 31, tzinfo=UTC)) == day("2025-02-28")
    f = parse('after:"3 days ago" before:today').filters
    assert (f.after, f.before) == (day("2025-06-15"), day("2025-06-18"))


def test_an_unreadable_date_is_an_error_not_ignored():
    with pytest.raises(InvalidSearchInput, match="cannot read the date 'soonish'"):
        parse("x after:soonish")
    with pytest.raises(InvalidSearchInput):
        date_boundary("2025-13-01", now=NOW)


def test_the_latest_after_and_earliest_before_win_and_minus_after_reads_before():
    f = parse("after:2024 after:2025-02 before:2025-06 before:2025-05").filters
    assert (f.after, f.before) == (day("2025-02-01"), day("2025-05-01"))
    assert parse("-after:2025").filters.before == day("2025-01-01")
    impossible = parse("after:2025-06 before:2025-01")
    assert any("no note can be dated" in w for w in impossible.warnings)


def test_an_unknown_field_stays_text_with_a_warning():
    parsed = parse("postgres foo:bar status:draft")
    assert parsed.text == "postgres foo:bar"
    assert parsed.warnings == ["no notes have a field 'foo'; searched 'foo:bar' as text"]
    assert [e.key for e in parsed.filters.fields] == ["status"]
    # without a key lookup no word:value is a field
    bare = parse_filters("status:draft", now=NOW)
    assert bare.text == "status:draft" and bare.filters.empty and bare.warnings


def test_urls_phrases_times_and_query_document_lines_are_text():
    for text in [
        "see http://example.com/a:b",
        "pmd://notes/a.md",
        "mailto:ana@example.com",
        "meet at 10:30",
        "std::vector",
        '"tag:db in a phrase"',
        "C:\\Users\\ana",
        "error: disk full",
        "foo://bar",
    ]:
        parsed = parse(text)
        assert parsed.text == text and parsed.filters.empty and not parsed.warnings, text
    document = parse("vacuum tag:db\nlex: autovacuum settings\nvec: how to tune vacuum\nintent: postgres")
    assert document.text == "vacuum\nlex: autovacuum settings\nvec: how to tune vacuum\nintent: postgres"
    assert document.filters.tags == [["db"]] and not document.warnings


def test_only_filters_leave_no_text():
    parsed = parse("tag:meeting after:2025-01")
    assert parsed.text == "" and not parsed.filters.empty


def test_glob_translation():
    cases = {
        "meetings/**": (["meetings/a.md", "meetings/2025/b.md"], ["meetingsx/a.md", "a/meetings/b.md"]),
        "meetings": (["meetings/a.md", "meetings/x/y.md", "meetings"], ["meetings.md", "other/meetings/a.md"]),
        "meetings/": (["meetings/a.md"], ["meetings.md"]),
        "*.md": (["a.md"], ["x/a.md"]),
        "**/*.md": (["a.md", "x/y/a.md"], ["a.txt"]),
        "projects/*/notes.md": (["projects/db/notes.md"], ["projects/db/x/notes.md"]),
        "a+b (1).md": (["a+b (1).md"], ["aab 1.md", "ab 1.md"]),
        "{x,y}/[ab]?.md": (["x/a1.md", "y/bz.md"], ["z/a1.md", "x/c1.md"]),
        "[!a]*.md": (["b.md"], ["a.md"]),
        "100%_done$.md": (["100%_done$.md"], ["100x_done.md"]),
    }
    for glob, (yes, no) in cases.items():
        regex = re.compile(glob_to_regex(glob))  # ARE and Python agree on what it uses
        assert all(regex.search(p) for p in yes), (glob, regex.pattern)
        assert not any(regex.search(p) for p in no), (glob, regex.pattern)


def test_glob_literal_starts_and_which_filters_an_index_answers():
    from search.retrieval.filters import glob_prefix, narrows_by_index

    assert [
        glob_prefix(g)
        for g in [
            "meetings/**",
            "projects/db",
            "projects/*/x.md",
            "**/2025-*.md",
            "{a,b}/**",
            "odd/a+b (1).md",
            "notes/",
        ]
    ] == ["meetings/", "projects/db", "projects/", "", "", "odd/a+b (1).md", "notes"]
    assert narrows_by_index(SearchFilters.from_dict({"path": "meetings/**"}))
    assert narrows_by_index(SearchFilters.from_dict({"tags": "db", "exclude_tags": "x"}))
    assert not narrows_by_index(SearchFilters.from_dict({"path": ["meetings/**", "**/x.md"]}))
    assert not narrows_by_index(SearchFilters.from_dict({"exclude_tags": "db", "exclude_fields": {"status": "done"}}))
    assert not narrows_by_index(None)


def test_structured_filters_and_cli_options():
    f = SearchFilters.from_dict(
        {
            "tags": ["DB", "ops"],
            "exclude_tags": "x",
            "path": "a/**",
            "after": "2025-01",
            "before": "last week",
            "fields": {"status": "draft", "n": [1, 2], "ok": True},
            "exclude_fields": {"author": "bo"},
        },
        now=NOW,
    )
    assert f.tags == [["db", "ops"]] and f.exclude_tags == ["x"] and f.paths == [["a/**"]]
    assert (f.after, f.before) == (day("2025-01-01"), day("2025-06-11"))
    assert [(e.key, e.values) for e in f.fields] == [("status", ["draft"]), ("n", ["1", "2"]), ("ok", ["true"])]
    assert [(e.key, e.values) for e in f.exclude_fields] == [("author", ["bo"])]
    for bad in [{"tagz": "x"}, {"fields": ["status"]}, {"after": 5}, {"fields": {"k": {"nested": 1}}}, "tag:db"]:
        with pytest.raises(InvalidSearchInput):
            SearchFilters.from_dict(bad)
    opts = filters_from_options(
        tags=["db,ops", "x"], paths=["a/**"], after="2025", where=["status=draft,review", "author!=bo", "-x=1"], now=NOW
    )
    assert opts.tags == [["db", "ops", "x"]] and opts.paths == [["a/**"]] and opts.after == day("2025-01-01")
    assert [(e.key, e.values) for e in opts.fields] == [("status", ["draft", "review"])]
    assert [(e.key, e.values) for e in opts.exclude_fields] == [("author", ["bo"]), ("x", ["1"])]
    with pytest.raises(InvalidSearchInput, match="KEY=VALUE"):
        filters_from_options(where=["status"])
    merged = parse("tag:a after:2025").filters.merged(SearchFilters.from_dict({"tags": "b", "after": "2024"}))
    assert merged.tags == [["a"], ["b"]] and merged.after == day("2025-01-01")


# --- a small vault, indexed -------------------------------------------------------------------------

# path: (text, tags, date, date source); the structure is also set explicitly after indexing, so
# these tests do not depend on how indexing reads it (tests/indexing/test_structure.py covers that)
VAULT = {
    "meetings/2025-01-10-standup.md": (
        (
            "---\ntags: [meeting, db]\ndate: 2025-01-10\nstatus: done\nauthor: ana\n---\n# Standup January\n\n"
            "We discussed postgres vacuum settings and the backup plan.\n"
        ),
        ["db", "meeting"],
        "2025-01-10",
        "frontmatter:date",
    ),
    "meetings/2025-03-02-planning.md": (
        (
            "---\ntags: meeting\ndate: 2025-03-02\nstatus: draft\nauthors: [ana, bo]\n---\n# Planning March\n\n"
            "Roadmap planning: postgres upgrade and a new search page.\n"
        ),
        ["meeting"],
        "2025-03-02",
        "frontmatter:date",
    ),
    "projects/db/indexes.md": (
        (
            "---\ntags: [db]\ncreated: 2024-11-20\nStatus: Draft\npriority: 2\n---\n# Index notes\n\n"
            "GIN and btree indexes in postgres, and when to use each one.\n"
        ),
        ["db"],
        "2024-11-20",
        "frontmatter:created",
    ),
    "projects/db/archive/old-schema.md": (
        (
            "---\ntags: [db, archive]\ndate: 2023-05-01\nstatus: done\n---\n# Old schema\n\n"
            "The postgres schema before the migration of the billing tables.\n"
        ),
        ["archive", "db"],
        "2023-05-01",
        "frontmatter:date",
    ),
    "journal/2025-06-15.md": (
        "# Journal\n\nTuned postgres autovacuum today, long meeting after. #db #ops\n",
        ["db", "ops"],
        "2025-06-15",
        "filename",
    ),
    "inbox/loose-thoughts.md": ("# Loose thoughts\n\nPostgres? Maybe later.\n", [], "2022-01-01", "mtime"),
    "odd/a+b (1).md": ("# Odd name\n\nA file name full of regex characters.\n", [], "2022-02-01", "mtime"),
    "odd/aab 1.md": ("# Odd name too\n\nAnother file name full of regex characters.\n", [], "2022-02-02", "mtime"),
}
# Notes that say "postgres" more than any tagged note, and have no tags: the best unfiltered hits.
FILLERS = {
    f"filler/pg-{n}.md": (f"# Postgres postgres {n}\n\nPostgres postgres postgres postgres.\n", [], None, "")
    for n in range(1, 6)
}
TAGGED_DB = {
    "meetings/2025-01-10-standup.md",
    "projects/db/indexes.md",
    "projects/db/archive/old-schema.md",
    "journal/2025-06-15.md",
}


def _make_vault(root, files, collection_name, **create):
    from indexing.models import Document
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    for path, (text, *_rest) in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    collection = collection_create(path=root, name=collection_name, **create)
    collection_index(collection)
    for path, (_, tags, when, source) in files.items():
        Document.objects.filter(collection=collection, path=path).update(
            tags=tags, note_date=day(when) if when else None, date_source=source
        )
    return collection


@pytest.fixture
def vault(db, tmp_path):
    root = tmp_path / "vault"
    return _make_vault(root, {**VAULT, **FILLERS}, "vault")


def run(query: str, mode=Mode.KEYWORD, access=None, **kwargs):
    from search.pipeline.dispatch import search_run

    kwargs.setdefault("limit", 50)
    return search_run(SearchRequest(query=query, mode=mode, access=access or Access.local_user(), **kwargs))


def paths(response) -> set[str]:
    return {r.path for r in response.results}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("postgres tag:db", TAGGED_DB),
        (
            "postgres tag:meeting,archive",
            {"meetings/2025-01-10-standup.md", "meetings/2025-03-02-planning.md", "projects/db/archive/old-schema.md"},
        ),
        ("postgres tag:db tag:meeting", {"meetings/2025-01-10-standup.md"}),
        ("postgres tag:db -tag:archive", TAGGED_DB - {"projects/db/archive/old-schema.md"}),
        ("postgres -tag:db", {"meetings/2025-03-02-planning.md", "inbox/loose-thoughts.md", *FILLERS}),
        ("postgres TAG:DB,Nothing", TAGGED_DB),
        ("postgres path:meetings/**", {"meetings/2025-01-10-standup.md", "meetings/2025-03-02-planning.md"}),
        ("postgres path:projects/db", {"projects/db/indexes.md", "projects/db/archive/old-schema.md"}),
        ("postgres path:projects/*/indexes.md", {"projects/db/indexes.md"}),
        (
            "postgres path:**/2025-*.md",
            {"meetings/2025-01-10-standup.md", "meetings/2025-03-02-planning.md", "journal/2025-06-15.md"},
        ),
        (
            "postgres -path:filler/** -path:meetings",
            {
                "projects/db/indexes.md",
                "projects/db/archive/old-schema.md",
                "journal/2025-06-15.md",
                "inbox/loose-thoughts.md",
            },
        ),
        ('regex path:"odd/a+b (1).md"', {"odd/a+b (1).md"}),
        (
            "postgres after:2025-01-10",
            {"meetings/2025-01-10-standup.md", "meetings/2025-03-02-planning.md", "journal/2025-06-15.md"},
        ),
        ("postgres after:2025-01-11", {"meetings/2025-03-02-planning.md", "journal/2025-06-15.md"}),
        (
            "postgres before:2025-01-10",
            {"projects/db/indexes.md", "projects/db/archive/old-schema.md", "inbox/loose-thoughts.md"},
        ),  # fillers have no date: no date filter holds
        ("postgres after:2025-02 before:2025-06-15", {"meetings/2025-03-02-planning.md"}),
        ("postgres status:draft", {"meetings/2025-03-02-planning.md", "projects/db/indexes.md"}),  # Status: Draft too
        ("postgres status:done,draft -tag:meeting", {"projects/db/indexes.md", "projects/db/archive/old-schema.md"}),
        ("postgres -status:done tag:db", {"projects/db/indexes.md", "journal/2025-06-15.md"}),
        ("postgres author:ana", {"meetings/2025-01-10-standup.md"}),  # a scalar
        ("postgres authors:bo", {"meetings/2025-03-02-planning.md"}),  # a list holding it
        ("postgres priority:2", {"projects/db/indexes.md"}),  # a number
        ("postgres STATUS:DONE", {"meetings/2025-01-10-standup.md", "projects/db/archive/old-schema.md"}),
    ],
)
def test_keyword_filters_select_exactly_the_matching_notes(vault, query, expected):
    response = run(query)
    assert paths(response) == expected, (query, response.warnings)
    assert not response.warnings
    assert response.as_dict()["filters"]


def test_keyword_filters_listed_first_or_tested_on_each_hit_agree(vault, monkeypatch):
    """A narrow filter lists its notes before scoring; a broad one (here: every one) is tested on
    each scored note: the same results either way."""
    from search.retrieval import keyword

    queries = [
        "postgres tag:db",
        "postgres tag:db -tag:archive",
        "postgres path:projects/db",
        "postgres -tag:db",
        "postgres after:2025-01-10",
        "postgres status:done,draft -tag:meeting",
        "postgres path:**/2025-*.md",
    ]
    listed = {q: [(r.uri, r.score) for r in run(q).results] for q in queries}
    several = {q: [(r.uri, r.line) for r in run(q, hits_per_document=2, limit=3).results] for q in queries}
    monkeypatch.setattr(keyword, "LISTED_DOCUMENTS", 0)
    for query in queries:
        assert [(r.uri, r.score) for r in run(query).results] == listed[query], query
        assert [(r.uri, r.line) for r in run(query, hits_per_document=2, limit=3).results] == several[query], query
    assert len(listed["postgres tag:db"]) == len(TAGGED_DB)


def test_structured_filters_are_the_same_as_written_ones(vault):
    written = run("postgres tag:db -status:done after:2024")
    structured = run(
        "postgres",
        filters=SearchFilters.from_dict({"tags": ["db"], "exclude_fields": {"status": "done"}, "after": "2024"}),
    )
    assert [r.uri for r in structured.results] == [r.uri for r in written.results]
    assert paths(written) == {"projects/db/indexes.md", "journal/2025-06-15.md"}
    both = run("postgres tag:db", filters=SearchFilters.from_dict({"path": "projects/**"}))
    assert paths(both) == {"projects/db/indexes.md", "projects/db/archive/old-schema.md"}


def test_n_results_that_match_even_when_the_best_hits_do_not(vault):
    unfiltered = run("postgres", limit=3)
    assert {r.path for r in unfiltered.results} <= set(FILLERS), "the fillers are the best unfiltered hits"
    filtered = run("postgres tag:db", limit=3)
    assert len(filtered.results) == 3 and paths(filtered) <= TAGGED_DB


def test_a_query_of_filters_only_lists_the_notes_newest_first(vault):
    response = run("tag:db")
    assert [r.path for r in response.results] == [
        "journal/2025-06-15.md",
        "meetings/2025-01-10-standup.md",
        "projects/db/indexes.md",
        "projects/db/archive/old-schema.md",
    ]
    assert [(r.date[:10], r.date_source) for r in response.results] == [
        ("2025-06-15", "filename"),
        ("2025-01-10", "frontmatter:date"),
        ("2024-11-20", "frontmatter:created"),
        ("2023-05-01", "frontmatter:date"),
    ]
    assert any("newest first" in w and "#db" in w for w in response.warnings)
    top = response.results[0]
    assert top.snippet.startswith("Tuned postgres autovacuum") and top.line == 3
    assert [r.path for r in run("tag:db", limit=2).results] == [
        "journal/2025-06-15.md",
        "meetings/2025-01-10-standup.md",
    ]
    assert run("tag:nothing-has-this").results == []
    for mode in (Mode.VECTOR, Mode.HYBRID):  # no words: no model is asked, the same list
        assert [r.path for r in run("tag:db", mode=mode).results] == [r.path for r in response.results]


def test_every_result_says_its_date_and_sort_by_date(vault):
    relevance = run("postgres tag:db")
    by_date = run("postgres tag:db", sort="date")
    assert [r.path for r in by_date.results] == [
        "journal/2025-06-15.md",
        "meetings/2025-01-10-standup.md",
        "projects/db/indexes.md",
        "projects/db/archive/old-schema.md",
    ]
    assert [r.path for r in relevance.results] != [r.path for r in by_date.results]
    data = by_date.as_dict()
    assert data["sort"] == "date" and data["results"][0]["date"].startswith("2025-06-15")
    assert data["results"][0]["date_source"] == "filename"
    plain = run("postgres", sort="date").results
    undated = [r for r in plain if r.date is None]
    assert undated and plain[-len(undated) :] == undated, "notes without a date come last"
    from indexing.errors import InvalidSearchInput as Error

    with pytest.raises(Error, match="unknown sort"):
        run("postgres", sort="alphabetical")


def test_unknown_field_is_searched_as_text_with_a_warning(vault):
    response = run("billing foo:bar")
    assert response.warnings == ["no notes have a field 'foo'; searched 'foo:bar' as text"]
    assert paths(response) == {"projects/db/archive/old-schema.md"}
    assert response.filters is None and response.as_dict()["filters"] is None
    # a key some note has, with a value none has: a filter that matches nothing, no warning
    known = run("postgres status:archived")
    assert known.results == [] and not known.warnings and known.filters is not None
    assert [e.keys for e in known.filters.fields] == [("Status", "status")]  # every spelling in the index
    structured = run("billing", filters=SearchFilters.from_dict({"fields": {"foo": "bar"}}))
    assert structured.results == [] and "no notes have a field 'foo'" in structured.warnings


NESTED = {
    "alpha.md": ("# Alpha\n\nPostgres work. #project/alpha\n", ["project/alpha"], None, ""),
    "deep.md": ("# Deep\n\nPostgres work. #project/alpha/api\n", ["project/alpha/api"], None, ""),
    "plain.md": ("# Plain\n\nPostgres work. #project\n", ["project"], None, ""),
    "lookalike.md": ("# Lookalike\n\nPostgres work. #projects #project-x\n", ["project-x", "projects"], None, ""),
    "other.md": ("# Other\n\nPostgres work. #area/project\n", ["area/project"], None, ""),
}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("postgres tag:project", {"alpha.md", "deep.md", "plain.md"}),  # the tag and every tag below it
        ("postgres tag:project/alpha", {"alpha.md", "deep.md"}),
        ("postgres tag:PROJECT/ALPHA/API", {"deep.md"}),
        ("postgres tag:project/alp", set()),  # a parent is a whole part of the path, not a prefix
        ("postgres -tag:project", {"lookalike.md", "other.md"}),
        ("postgres tag:project -tag:project/alpha", {"plain.md"}),
        ("postgres tag:area", {"other.md"}),
        ("tag:project/alpha", {"alpha.md", "deep.md"}),  # filters only
    ],
)
def test_nested_tags_match_below_them(db, tmp_path, query, expected):
    from indexing.models import Document

    collection = _make_vault(tmp_path / "nested", NESTED, "nested")
    assert paths(run(query)) == expected
    # facets and results keep the tags as written
    assert Document.objects.get(collection=collection, path="deep.md").tags == ["project/alpha/api"]
    structured = run("postgres", filters=SearchFilters.from_dict({"tags": ["project"]}))
    assert paths(structured) == {"alpha.md", "deep.md", "plain.md"}


def test_relative_dates_count_from_now(vault):
    from django.utils import timezone

    from indexing.models import Document

    now = timezone.now()
    Document.objects.filter(path="inbox/loose-thoughts.md").update(note_date=now - timedelta(days=2))
    Document.objects.filter(path="journal/2025-06-15.md").update(note_date=now - timedelta(days=40))
    assert paths(run('postgres after:"last week"')) == {"inbox/loose-thoughts.md"}
    assert paths(run("postgres after:3d")) == {"inbox/loose-thoughts.md"}
    assert "journal/2025-06-15.md" in paths(run("postgres after:2m"))


def test_a_filter_never_shows_what_the_access_does_not_allow(vault, tmp_path, django_user_model):
    from indexing.models import Collection

    owner = make_user("owner")
    member = make_user("member")
    _make_vault(
        tmp_path / "secret",
        {
            "plans.md": (
                "---\ntags: [db]\nclearance: top\n---\n# Secret plans\n\nPostgres secret plans.\n",
                ["db"],
                "2030-01-01",
                "frontmatter:date",
            ),
        },
        "secret",
        owner=owner,
        visibility=Collection.Visibility.PRIVATE,
    )
    local = run("postgres tag:db")
    assert "pmd://secret/plans.md" in {r.uri for r in local.results}, "the local user sees it (the test can fail)"
    assert "pmd://secret/plans.md" in {r.uri for r in run("tag:db").results}
    as_member = Access.for_user(member)
    for query in ["postgres tag:db", "tag:db", "postgres after:2029", "after:2029", "postgres clearance:top"]:
        response = run(query, access=Access.for_user(member))
        assert all(r.collection == "vault" for r in response.results), query
    assert run("after:2029", access=as_member).results == []
    hidden_field = run("postgres clearance:top", access=Access.for_user(member))
    assert hidden_field.warnings == ["no notes have a field 'clearance'; searched 'clearance:top' as text"]
    assert [r.uri for r in run("postgres clearance:top").results] == ["pmd://secret/plans.md"]
    with pytest.raises(Exception, match="secret"):  # naming it: unknown, as for any missing collection
        run("tag:db", access=Access.for_user(member), collections=["secret"])


def test_web_search_box_reads_filters(vault, django_user_model):
    from django.test import Client

    user = make_user("webber")
    client = Client()
    client.force_login(user)
    page = client.get("/", {"q": "postgres tag:db -tag:archive", "mode": "keyword"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Index notes" in html and "Standup January" in html and "Old schema" not in html
    assert "Planning March" not in html
    dated = client.get("/", {"q": "tag:db", "sort": "date"}).content.decode()
    assert dated.index("Journal") < dated.index("Standup January") < dated.index("Index notes")
    assert "newest first" in dated and "2025-06-15" in dated
    warned = client.get("/", {"q": "postgres foo:bar"}).content.decode()
    assert "no notes have a field" in warned
    bad = client.get("/", {"q": "postgres after:someday"})
    assert bad.status_code == 200 and "cannot read the date" in bad.content.decode()


# --- vector and hybrid search with filters --------------------------------------------------------


# More chunks nearer to "postgres" than any tagged note's than one HNSW pass reads (vector search asks
# for at least 40): a filter applied after the index scan would find none of the tagged notes. And a
# copy of a tagged note outside projects/ (the same content: one set of chunks, two documents).
MANY_FILLERS = {
    f"noise/pg-{n}.md": (f"# Postgres {n}\n\nPostgres postgres postgres.\n", [], None, "") for n in range(1, 61)
}
COPY = {"copies/indexes.md": (VAULT["projects/db/indexes.md"][0], [], "2020-01-01", "mtime")}


@pytest.fixture
def embedded_vault(tmp_path, ollama, settings):
    from indexing.services.embedding import embed_pending

    settings.PMD_CHUNK_TOKENS = 200
    collection = _make_vault(tmp_path / "vault", {**VAULT, **FILLERS, **MANY_FILLERS, **COPY}, "vault")
    embed_pending()
    return collection


@SERVED_DB
def test_vector_search_with_filters(embedded_vault, monkeypatch):
    from search.retrieval import vector

    unfiltered = run("postgres", mode=Mode.VECTOR, limit=10)
    assert {r.path for r in unfiltered.results} <= set(FILLERS) | set(MANY_FILLERS)
    for query, expected in [
        ("postgres tag:db", TAGGED_DB),  # not the copy: same chunks, no tags
        (
            "postgres status:draft",
            {"meetings/2025-03-02-planning.md", "projects/db/indexes.md", "copies/indexes.md"},
        ),  # the copy's frontmatter too
        ("postgres path:meetings/** after:2025-02", {"meetings/2025-03-02-planning.md"}),
        ("postgres path:projects/**", {"projects/db/indexes.md", "projects/db/archive/old-schema.md"}),
        ("gin btree path:{projects,copies}/** -tag:archive", {"projects/db/indexes.md", "copies/indexes.md"}),
    ]:
        response = run(query, mode=Mode.VECTOR)
        assert paths(response) == expected, query
        assert all(r.date for r in response.results)
    three = run("postgres tag:db", mode=Mode.VECTOR, limit=3)
    assert len(three.results) == 3 and paths(three) <= TAGGED_DB
    exact = {
        q: [r.uri for r in run(q, mode=Mode.VECTOR, limit=5).results]
        for q in ["postgres -tag:meeting", "postgres tag:db", "postgres path:projects/**"]
    }
    # a filter matching more documents than EXACT_FILTER_DOCUMENTS goes through the HNSW index,
    # filtered inside the scan (pgvector's iterative scan): the same answers
    monkeypatch.setattr(vector, "EXACT_FILTER_DOCUMENTS", 1)
    for query, uris in exact.items():
        approximate = run(query, mode=Mode.VECTOR, limit=5)
        assert [r.uri for r in approximate.results] == uris, query
        assert "filter_count" in approximate.timings
    assert len(exact["postgres tag:db"]) == 4
    assert run("postgres tag:none-has-it", mode=Mode.VECTOR).results == []


@SERVED_DB
def test_hybrid_search_with_filters_in_every_sub_search(embedded_vault, ollama, settings, monkeypatch):
    from search.pipeline import hybrid

    # Expansion must run whatever keyword search scores first (a strong first hit skips it):
    # this test is about the filters reaching every sub-search.
    monkeypatch.setattr(hybrid, "STRONG_SCORE", 1.01)
    settings.PMD_GENERATE_MODEL = "qwen3:0.6b"
    settings.PMD_RERANK_MODEL = ""
    settings.PMD_QUERY_TIMEOUT = 20.0
    # expansion adds a keyword and a vector search of words the fillers hold: they must be filtered too
    ollama.generate_handler = lambda body: json.dumps(
        {"variants": [{"type": "lex", "text": "postgres postgres"}, {"type": "vec", "text": "postgres database"}]}
    )
    response = run("postgres tag:db", mode=Mode.HYBRID, rerank=False)
    assert paths(response) == TAGGED_DB, response.warnings
    assert ollama.requests_to("/api/generate"), "expansion ran"
    prompt = ollama.requests_to("/api/generate")[0].body["prompt"]
    assert "tag:db" not in prompt, "the model sees the words, not the filters"
    three = run("postgres tag:db", mode=Mode.HYBRID, rerank=False, limit=3)
    assert len(three.results) == 3 and paths(three) <= TAGGED_DB
    typed = run("tag:db", mode=Mode.HYBRID, rerank=False, searches=[("lex", "postgres")])
    assert paths(typed) == TAGGED_DB


# --- the same answers through every face -----------------------------------------------------------


@SERVED_DB
@pytest.mark.parametrize(
    "query, structured, cli_options",
    [
        ("postgres tag:db -status:done", None, []),
        (
            "postgres",
            {"tags": ["db"], "exclude_fields": {"status": "done"}},
            ["--tag", "db", "--where", "status!=done"],
        ),
        ("postgres path:meetings/** after:2025-01-01", None, []),
        (
            "postgres",
            {"path": "meetings/**", "after": "2025-01-01"},
            ["--path", "meetings/**", "--after", "2025-01-01"],
        ),
        ("tag:db", None, []),
        ("postgres", {"fields": {"authors": "bo"}}, ["--where", "authors=bo"]),
    ],
)
def test_cli_api_and_mcp_give_the_same_filtered_results(
    request, tmp_path, run_cli, django_user_model, query, structured, cli_options
):

    request.addfinalizer(close_other_connections)  # the MCP tools ran in worker threads
    _make_vault(tmp_path / "vault", {**VAULT, **FILLERS}, "vault")
    code, out, err = run_cli("search", query, *cli_options, "-n", "10", "--json")  # one argument, as quoted
    assert code == 0, err
    cli = json.loads(out)
    user = make_user("reader")
    api = api_client(user, write=False)
    body = {"query": query, "limit": 10, **({"filters": structured} if structured else {})}
    posted = api.post("/api/search", body, content_type="application/json")
    assert posted.status_code == 200, posted.content
    api_json = posted.json()
    mcp = call_tool("pmd_search", {"query": query, "limit": 10, **({"filters": structured} if structured else {})})
    expected = [(r["uri"], r["date"], r["date_source"]) for r in cli["results"]]
    assert expected, "something matches"
    assert [(r["uri"], r["date"], r["date_source"]) for r in api_json["results"]] == expected
    assert [(r["uri"], r["date"], r["date_source"]) for r in mcp["results"]] == expected
    assert [r["score"] for r in api_json["results"]] == [r["score"] for r in cli["results"]]
    assert cli["filters"] == api_json["filters"] == mcp["filters"]
    assert set(api_json) == set(cli) | {"search_id"}  # the API also names its search-log entry
    if not structured and "postgres" in query:  # the GET form of the API, from query parameters
        got = api.get("/api/search", {"q": query, "limit": 10}).json()
        assert [r["uri"] for r in got["results"]] == [uri for uri, _, _ in expected]
    if structured and "tags" in structured:
        got = api.get("/api/search", {"q": query, "limit": 10, "tag": "db", "where": "status!=done"}).json()
        assert [r["uri"] for r in got["results"]] == [uri for uri, _, _ in expected]


def test_cli_options_sort_and_dates_in_text_output(vault, run_cli):
    code, out, err = run_cli("search", "postgres", "--tag", "db", "--sort", "date")
    assert code == 0, err
    assert (
        out.index("journal/2025-06-15.md")
        < out.index("meetings/2025-01-10-standup.md")
        < out.index("projects/db/indexes.md")
        < out.index("projects/db/archive/old-schema.md")
    )
    assert "date: 2025-06-15 (filename)" in out and "date: 2024-11-20 (frontmatter:created)" in out
    # --sort date orders the best matches (the same ones -n 2 shows by relevance), newest first
    code, out, err = run_cli("search", "postgres", "--tag", "db", "-n", "2", "--files")
    best = [line.split(",")[2] for line in out.splitlines()]
    code, out, err = run_cli("search", "postgres", "--tag", "db", "-n", "2", "--files", "--sort", "date")
    assert sorted(line.split(",")[2] for line in out.splitlines()) == sorted(best)
    code, out, err = run_cli("search", "postgres", "--tag", "db", "-n", "2")
    assert "date:" not in out, "dates are shown when a date filter or sort used them"
    code, out, err = run_cli("search", "--tag", "meeting", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert [r["path"] for r in listed["results"]] == [
        "meetings/2025-03-02-planning.md",
        "meetings/2025-01-10-standup.md",
    ]
    assert "newest first" in err
    code, out, err = run_cli("search", "postgres", "--after", "someday")
    assert code == 1 and "cannot read the date 'someday'" in err
    code, out, err = run_cli("search")
    assert code == 1 and "empty query" in err


def test_api_rejects_bad_filters_with_422(vault, django_user_model):

    user = make_user("reader")
    api = api_client(user, write=False)
    for body in [
        {"query": "x", "filters": {"after": "someday"}},
        {"query": "x after:someday"},
        {"query": "x", "sort": "alphabetical"},
        {"filters": {}},
        {"query": "", "filters": {"tags": "x"}},
    ]:
        response = api.post("/api/search", body, content_type="application/json")
        assert response.status_code == 422, (body, response.content)
    listed = api.post("/api/search", {"filters": {"tags": "meeting"}}, content_type="application/json")
    assert listed.status_code == 200 and len(listed.json()["results"]) == 2
    got = api.get("/api/search", {"tag": "meeting", "sort": "date"})
    assert got.status_code == 200, got.content
    assert [r["path"] for r in got.json()["results"]] == [
        "meetings/2025-03-02-planning.md",
        "meetings/2025-01-10-standup.md",
    ]
    assert api.get("/api/search", {"after": "someday"}).status_code == 422
