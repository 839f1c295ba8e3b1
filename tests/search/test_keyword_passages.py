"""The keyword index scores passages (markdown sections) with per-collection statistics."""

import importlib
from pathlib import Path

import pytest
from django.db import connection

from indexing.access import Access
from indexing.keyword.keyword_index import PASSAGE_WORDS, split_passages
from indexing.services.collections import collection_create
from indexing.services.scanning import collection_index
from search.request import SearchRequest
from search.retrieval.keyword import keyword_search


def search(query, **kw):
    return keyword_search(SearchRequest(query=query, **kw, access=Access.local_user()))


def index(tmp_path, name, files, **kw):
    root = tmp_path / name
    root.mkdir()
    for path, text in files.items():
        (root / path).write_text(text)
    collection = collection_create(path=root, name=name, **kw)
    collection_index(collection)
    return collection


# --- splitting -----------------------------------------------------------------------------


def test_sections_at_headings_outside_fences():
    body = (
        "---\ntitle: Notes\n---\n\n# Notes\n\n## Alpha\n\nalpha text\n\n"
        "## Beta\n\n```sh\n# a comment, not a heading\n```\nbeta text\n"
    )
    passages = split_passages("Notes", body)
    # The frontmatter is no passage of its own (its snippet would be raw YAML): it joins the first
    # section; "# Notes" has no text of its own either: it joins "## Alpha".
    assert [p.head for p in passages] == ["Notes\nAlpha", "Notes\nBeta"]
    assert "alpha text" in passages[0].body and "Alpha" not in passages[0].body  # headings go to the title field
    assert "title: Notes" in passages[0].body
    assert "# a comment" in passages[1].body
    lines = body.splitlines(keepends=True)
    for p in passages:  # ranges cover the body, in order, and agree with each other
        assert body[p.start_char : p.end_char] == "".join(lines[p.start_line - 1 : p.end_line])
    assert passages[0].start_char == 0 and passages[-1].end_char == len(body)
    assert [p.ordinal for p in passages] == [0, 1]
    assert passages[0].start_line == 1 and passages[1].start_line == 11


def test_the_title_is_not_repeated_and_short_notes_are_one_passage():
    assert [p.head for p in split_passages("Guide", "# Guide\n\nSome text.\n")] == ["Guide"]
    assert len(split_passages("Plain", "no headings at all\nsecond line\n")) == 1
    empty = split_passages("Empty", "")
    assert len(empty) == 1 and empty[0].head == "Empty" and empty[0].start_line == 1


def test_a_long_section_is_cut_at_paragraph_breaks():
    paragraph = " ".join(["word"] * 100)
    body = "# Long\n\n" + "\n\n".join([paragraph] * 25) + "\n"
    passages = split_passages("Long", body)
    assert len(passages) == 4
    assert all(p.head == "Long" for p in passages)
    assert all(len(p.body.split()) <= PASSAGE_WORDS for p in passages)
    assert sum(len(p.body.split()) for p in passages) == 2500
    for before, after in zip(passages, passages[1:]):
        assert before.end_char == after.start_char and before.end_line + 1 == after.start_line


# --- scoring -------------------------------------------------------------------------------

FILLER = [
    "orchard apples",
    "violin lessons",
    "tax return",
    "garden fence",
    "chess opening",
    "bread recipe",
    "cycling route",
    "piano tuning",
    "roof repair",
    "bird watching",
    "jazz records",
    "tea ceremony",
]


def notebook(topic_section: str | None, n: int = 12) -> str:
    parts = ["# Notebook\n"]
    for i in range(n):
        words = FILLER[i % len(FILLER)]
        parts.append(f"## {words.title()} {i}\n\n" + f"Notes about {words} and more {words}. " * 12 + "\n")
    if topic_section:
        parts.insert(n // 2, topic_section)
    return "\n".join(parts)


@pytest.fixture
def notebooks(db, tmp_path):
    return index(
        tmp_path,
        "nb",
        {
            "long.md": notebook("## Zeppelin hangar\n\nThe zeppelin hangar roof leaks near the mooring mast.\n"),
            "weak.md": "# Weak\n\nOnce we mentioned a zeppelin, and a hangar, among "
            + "many other unrelated words in a long rambling note about everything " * 25
            + "\n",
            "other.md": notebook(None),
        },
    )


def test_the_relevant_section_of_a_long_note_is_found_and_shown(notebooks):
    hit = search("zeppelin hangar mooring").results[0]
    assert hit.path == "long.md"
    body = Path(f"{notebooks.root_path}/long.md").read_text().splitlines()
    assert "mooring mast" in body[hit.line - 1] and "mooring" in hit.snippet
    marked = {hit.snippet[s:e].lower() for s, e in hit.highlights}
    assert {"zeppelin", "hangar", "mooring"} <= marked


def test_several_hits_per_document_come_from_its_best_passages(db, tmp_path):
    text = notebook("## Marmots\n\nA marmot colony lives here.\n") + "\n## More marmots\n\nA second marmot burrow.\n"
    index(tmp_path, "m", {"m.md": text})
    hits = search("marmot", hits_per_document=3).results
    assert len(hits) == 2 and {h.path for h in hits} == {"m.md"}
    lines = text.splitlines()
    assert {lines[h.line - 1] for h in hits} == {"A marmot colony lives here.", "A second marmot burrow."}
    assert hits[0].score >= hits[1].score


def test_phrases_and_exclusions_apply_to_the_document(notebooks):
    assert [r.path for r in search('"mooring mast"', all=True).results] == ["long.md"]
    # each phrase may sit in a different section of the same note
    assert [r.path for r in search('"mooring mast" "violin lessons"', all=True).results] == ["long.md"]
    assert "long.md" not in {r.path for r in search("zeppelin -violin", all=True).results}


def test_prefix_expansion(notebooks):
    assert search("zeppe*").results[0].path in {"long.md", "weak.md"}


# --- collection-scoped statistics ----------------------------------------------------------


def ranking(query, collection):
    return [
        (r.path, r.scores["bm25"], r.score, r.line) for r in search(query, collections=[collection], all=True).results
    ]


def test_a_collection_scores_the_same_whatever_else_is_indexed(db, tmp_path):
    files = {
        f"n{i}.md": f"# Note {i}\n\nThe release plan {i} mentions rollback and deploy steps.\n"
        + ("The rollback drill is rare.\n" if i % 3 == 0 else "")
        for i in range(9)
    }
    index(tmp_path, "small", files)
    queries = ["release rollback", "deploy drill", "plan"]
    alone = {q: ranking(q, "small") for q in queries}
    assert all(alone.values())
    # a large unrelated collection that uses the same words with other frequencies
    index(
        tmp_path,
        "big",
        {f"b{i}.md": "# Big\n\n" + "release deploy plan notes " * (i % 5 + 1) + "\n" for i in range(60)},
    )
    assert {q: ranking(q, "small") for q in queries} == alone
    # searching both uses the statistics of both (so the scores differ from either alone)
    both = search("release rollback", collections=["small", "big"], all=True).results
    assert {r.collection for r in both} == {"small", "big"}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.name, s.n_documents, s.n_passages FROM search_keyword_stats s"
            " JOIN indexing_collection c ON c.id = s.collection_id ORDER BY 1"
        )
        assert cursor.fetchall() == [("big", 60, 60), ("small", 9, 9)]


def test_the_migration_rebuilds_the_index(notebooks):
    migration = importlib.import_module("search.migrations.0005_keyword_passages")
    before = ranking("zeppelin hangar", "nb")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM search_keyword_passage")
    assert search("zeppelin").results == []
    migration.rebuild(None, None)
    assert ranking("zeppelin hangar", "nb") == before


# --- shown score across text search configurations ---------------------------------------


def test_the_shown_score_does_not_depend_on_other_configurations(db, tmp_path):
    index(
        tmp_path,
        "en",
        {"deploy.md": "# Deploy\n\nrunning deployments of postgres servers\n"},
        text_search_config="english",
    )
    query = "running deployments postgres"
    before = search(query, collections=["en"]).results[0].score
    assert before > 0.9
    index(tmp_path, "plain", {"misc.md": "# Misc\n\nan unrelated note about gardening\n"}, text_search_config="simple")
    assert search(query, collections=["en"]).results[0].score == pytest.approx(before)
    assert search(query).results[0].score == pytest.approx(before)
    assert search(query, collections=["en", "plain"]).results[0].score == pytest.approx(before)


def test_a_phrase_of_stop_words_does_not_wipe_out_the_results(db, tmp_path):
    index(
        tmp_path,
        "notes",
        {"alpha.md": "# Alpha\n\nalpha release notes\n", "beta.md": "# Beta\n\nbeta notes\n"},
        text_search_config="english",
    )
    assert [r.path for r in search('"the" alpha').results] == ["alpha.md"]
    only = search('"the"')
    assert not only.results and only.warnings


def test_fences_close_only_on_a_matching_fence():
    body = (
        "# Doc\n\nintro\n\n````md\n```\n# not a heading (inside a four-backtick fence)\n```\n````\n\n"
        "## After\n\n~~~\n```\n# still code\n```\n~~~\n\n## Last\n\n```\n``` not a close\n# code too\n```\n"
    )
    passages = split_passages("Doc", body)
    assert [p.head for p in passages] == ["Doc", "Doc\nAfter", "Doc\nLast"]
    assert "# not a heading" in passages[0].body
    assert "# still code" in passages[1].body
    assert "# code too" in passages[2].body


def test_a_heading_keeps_a_hash_that_is_part_of_its_text():
    body = "## Learning C#\n\ntext\n\n## Closed ##\n\nmore\n\n## F# notes #\n\nend\n"
    assert [p.head for p in split_passages("T", body)] == ["T\nLearning C#", "T\nClosed", "T\nF# notes"]
