"""The filter language: ranges on numbers and dates, has:/-has:, OR and parentheses
across keys, quoted values; one parser for every face, and the same structured form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from indexing.access import Access
from search.filters import SearchFilters, parse_filters, range_bounds
from search.request import SearchRequest
from tests.support.factories import make_vault
from tests.support.mcp_client import SERVED_DB

NOW = datetime(2025, 6, 18, 15, 30, tzinfo=UTC)


def parse(text: str, keys=("status", "priority", "reviewed", "due")):
    return parse_filters(text, field_keys=lambda words: {w: [w] for w in words if w in keys}, now=NOW)


def test_ranges_on_numbers_and_dates():
    assert range_bounds(">=2") == [(">=", "2")]
    assert range_bounds("2..5") == [(">=", "2"), ("<=", "5")]
    assert range_bounds("2025-01..2025-03") == [(">=", "2025-01-01"), ("<", "2025-04-01")]
    assert range_bounds('<"30 days ago"', now=NOW) == [("<", "2025-05-19")]
    assert range_bounds("<=2025", dates=True) == [("<", "2026-01-01")]  # a date end holds its whole year
    assert range_bounds("<=2025") == [("<=", "2025")]  # a number, unless the key is a date
    assert range_bounds("draft") is None
    parsed = parse('vacuum priority:>=2 reviewed:<"30 days ago"')
    assert parsed.text == "vacuum"
    assert [(f.key, f.bounds) for f in parsed.filters.fields] == [
        ("priority", [(">=", "2")]),
        ("reviewed", [("<", "2025-05-19")]),
    ]


def test_date_is_the_notes_date():
    f = parse("date:2025-01..2025-03").filters
    assert (f.after, f.before) == (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC))
    f = parse("date:2025-02").filters
    assert (f.after, f.before) == (datetime(2025, 2, 1, tzinfo=UTC), datetime(2025, 3, 1, tzinfo=UTC))
    assert parse("date:>=2025-05").filters.after == datetime(2025, 5, 1, tzinfo=UTC)


def test_has_and_not_has():
    parsed = parse("x has:due -has:status")
    assert parsed.text == "x"
    assert [(f.key, f.has) for f in parsed.filters.fields] == [("due", True)]
    assert [(f.key, f.has) for f in parsed.filters.exclude_fields] == [("status", True)]
    assert parse("has:nothing").warnings == ["no notes have a field 'nothing'"]


def test_or_and_parentheses_across_keys():
    parsed = parse("postgres (tag:db OR status:draft) priority:>=2")
    assert parsed.text == "postgres"
    f = parsed.filters
    assert [(g[0].tags, [e.key for e in g[1].fields]) for g in f.any_of] == [([["db"]], ["status"])]
    assert f.fields[0].key == "priority"
    nested = parse("tag:a OR (tag:b status:draft)").filters.any_of[0]
    assert nested[0].tags == [["a"]] and nested[1].tags == [["b"]] and nested[1].fields[0].values == ["draft"]
    # OR between words is text; a lone parenthesis is text, the filters still hold
    plain = parse("cats OR dogs tag:x")
    assert plain.text == "cats OR dogs" and plain.filters.tags == [["x"]]
    broken = parse("(tag:x OR")
    assert broken.filters.tags == [["x"]] and "OR" in broken.text
    assert parse('status:"in review"').filters.fields[0].values == ["in review"]


def test_structured_form_is_the_same_model():
    f = SearchFilters.from_dict(
        {
            "fields": {"priority": {">=": 2}},
            "has": "due",
            "exclude_has": ["status"],
            "any_of": [{"tags": "db"}, {"fields": {"status": "draft"}}],
        }
    )
    assert f.fields[0].bounds == [(">=", "2")] and f.fields[1].has and f.exclude_fields[0].has
    assert f.any_of[0][0].tags == [["db"]] and f.any_of[0][1].fields[0].values == ["draft"]
    assert f.as_dict()["any_of"] == [[{"tags": [["db"]]}, {"fields": [{"key": "status", "values": ["draft"]}]}]]


NOTES = {
    "a.md": "---\npriority: 3\nstatus: draft\nreviewed: 2025-01-10\ndue: 2025-07-01\ntags: [db]\n---\n"
    "# A\n\npostgres\n",
    "b.md": "---\npriority: 1\nstatus: done\nreviewed: 2025-06-01\n---\n# B\n\npostgres\n",
    "c.md": "---\npriority: '2'\nstatus: In Review\n---\n# C\n\npostgres\n",
    "d.md": "---\ndate: 2025-02-14\n---\n# D\n\npostgres\n",
    "e.md": "# E\n\npostgres, no frontmatter\n",
}


@pytest.fixture
def vault(db, tmp_path):
    return make_vault(tmp_path / "v", NOTES, name="fm")


def found(query: str, **kwargs) -> set[str]:
    from search.pipeline.dispatch import search_run

    response = search_run(SearchRequest(query=query, access=Access.local_user(), limit=50, **kwargs))
    return {r.path for r in response.results}


def test_the_language_in_sql(vault):
    assert found("postgres priority:>=2") == {"a.md", "c.md"}  # a number, or a text holding one
    assert found("postgres priority:1..2") == {"b.md", "c.md"}
    assert found("postgres reviewed:2025-01..2025-03") == {"a.md"}
    assert found("postgres has:due") == {"a.md"}
    assert found("postgres -has:status") == {"d.md", "e.md"}
    assert found("postgres tag:db OR status:done") == {"a.md", "b.md"}
    assert found("postgres (status:done OR priority:>2) -has:due") == {"b.md"}
    assert found('postgres status:"in review"') == {"c.md"}
    assert found("postgres date:2025-02") == {"d.md"}
    assert found(
        "postgres", filters=SearchFilters.from_dict({"any_of": [{"has": "due"}, {"fields": {"priority": {"<": 2}}}]})
    ) == {"a.md", "b.md"}
    assert found("priority:>=2") == {"a.md", "c.md"}  # filters alone list the notes


# --- field discovery, and the language through every face -------------------------------------------


@SERVED_DB
def test_fields_and_the_language_in_every_face(request, tmp_path, run_cli):
    import json

    from tests.support.factories import api_client, make_user, web_client
    from tests.support.mcp_client import call_tool, close_other_connections

    request.addfinalizer(close_other_connections)
    make_vault(tmp_path / "v", NOTES, name="fm")
    code, out, err = run_cli("fields", "--json")
    assert code == 0, err
    fields = {f["key"]: f for f in json.loads(out)["fields"]}
    assert fields["priority"]["types"] == {"number": 2, "text": 1} and fields["priority"]["notes"] == 3
    assert fields["reviewed"]["types"] == {"date": 2}
    assert {"value": "db", "notes": 1} in fields["tags"]["values"]
    code, out, err = run_cli("fields", "fm")
    assert code == 0 and "status" in out and "draft (1)" in out

    query = "postgres (status:done OR priority:>2) -has:due"
    code, out, err = run_cli("search", query, "--json")
    assert [r["uri"] for r in json.loads(out)["results"]] == ["pmd://fm/b.md"]
    user = make_user("reader")
    api = api_client(user, write=False)
    assert {f["key"] for f in api.get("/api/fields").json()["fields"]} == set(fields)
    answer = api.post(
        "/api/search",
        {
            "query": "postgres",
            "filters": {
                "exclude_has": "due",
                "any_of": [{"fields": {"status": "done"}}, {"fields": {"priority": {">": 2}}}],
            },
        },
        content_type="application/json",
    ).json()
    assert [r["uri"] for r in answer["results"]] == ["pmd://fm/b.md"]
    assert [r["uri"] for r in api.get("/api/search", {"q": query}).json()["results"]] == ["pmd://fm/b.md"]
    page = web_client(user).get("/", {"q": query}).content.decode()
    assert "b.md" in page and "a.md" not in page
    assert [r["uri"] for r in call_tool("pmd_search", {"query": query})["results"]] == ["pmd://fm/b.md"]
    assert {f["key"] for f in call_tool("pmd_fields", {})["fields"]} == set(fields)
