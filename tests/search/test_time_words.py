"""Time words: "last week", "yesterday", "recent" in a plain query become a date
filter, shown as applied and removable; off with a setting. Measured on a dated fixture vault."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from indexing.access import Access
from indexing.models import Document
from search.filters import time_words
from search.request import SearchRequest
from tests.support.factories import make_vault

NOW = datetime(2025, 6, 18, 15, 30, tzinfo=UTC)  # a Wednesday


def test_time_words_read_as_dates():
    read = time_words("meeting notes last week", now=NOW)
    assert read.text == "meeting notes" and read.filters.after == datetime(2025, 6, 11, tzinfo=UTC)
    read = time_words("what did we decide yesterday", now=NOW)
    assert read.text == "what did we decide"
    assert (read.filters.after, read.filters.before) == (
        datetime(2025, 6, 17, tzinfo=UTC),
        datetime(2025, 6, 18, tzinfo=UTC),
    )
    assert time_words("recent incidents", now=NOW).filters.after == datetime(2025, 5, 19, tzinfo=UTC)
    assert time_words("in the past month outages", now=NOW).filters.after == datetime(2025, 5, 18, tzinfo=UTC)
    assert time_words("postgres vacuum", now=NOW) is None
    assert time_words('"last week tonight" episodes', now=NOW) is None  # a quoted phrase is literal
    assert time_words("yesterdays news", now=NOW) is None


# A dated vault: each note is an incident or a meeting on a day relative to today.
DAYS = {
    "meeting-today.md": 0,
    "meeting-yesterday.md": 1,
    "meeting-5d.md": 5,
    "meeting-20d.md": 20,
    "meeting-60d.md": 60,
    "incident-2d.md": 2,
    "incident-25d.md": 25,
    "incident-90d.md": 90,
}
# (query, the notes it should find)
CASES = [
    ("meeting notes last week", {"meeting-today.md", "meeting-yesterday.md", "meeting-5d.md"}),
    ("what did we decide in the meeting yesterday", {"meeting-yesterday.md"}),
    ("recent incidents", {"incident-2d.md", "incident-25d.md"}),
    ("meeting today", {"meeting-today.md"}),
    ("incident last month", {"incident-2d.md", "incident-25d.md"}),
]


@pytest.fixture
def dated(db, tmp_path):
    notes = {name: f"# {name[:-3]}\n\nThe {name.split('-')[0]} log: what we decided.\n" for name in DAYS}
    collection = make_vault(tmp_path / "v", notes, name="dated")
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    for name, days in DAYS.items():
        Document.objects.filter(collection=collection, path=name).update(
            note_date=today - timedelta(days=days), date_source="frontmatter:date"
        )
    return collection


def search(query: str, **kwargs):
    from search.pipeline.dispatch import search_run

    return search_run(SearchRequest(query=query, access=Access.local_user(), limit=20, **kwargs))


def test_time_worded_queries_over_a_dated_vault(dated, settings):
    hits = 0
    for query, expected in CASES:
        response = search(query)
        found = {r.path for r in response.results}
        assert response.time_words and response.filters is not None
        hits += found == expected
    assert hits == len(CASES)  # every time-worded query finds exactly its dated notes
    plain = search("meeting notes last week", time_words=False)
    assert plain.time_words is None and len(plain.results) == 5  # the date filter removed: every meeting
    settings.PMD_TIME_WORDS = False
    assert search("recent incidents").time_words is None


def test_every_face_shows_the_date_filter_it_read(dated, run_cli):
    code, out, err = run_cli("search", "recent", "incidents")
    assert "read 'recent' as a date filter" in " ".join(err.split()) and "incident-2d.md" in out
    assert "incident-90d.md" not in out
    from tests.support.factories import make_user, web_client

    page = web_client(make_user("reader")).get("/", {"q": "recent incidents"}).content.decode()
    assert "Remove the date filter" in page and "words=1" in page


def test_time_words_that_leave_nothing_are_searched_as_words(dated):
    response = search("incident yesterday")  # no incident is dated yesterday
    assert response.time_words is None and response.results
    assert response.warnings[0] == "no notes dated 'yesterday' match: searched it as words"
