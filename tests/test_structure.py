"""The notes' structure: tags, dates and links parsed from the text (indexing.structure), stored and
resolved when indexing (indexing.services.scanning, indexing.services.links), and shown by
`pmd links`/`pmd backlinks`, /api/links and the MCP tool pmd_links. The fixture vault is
tests/fixtures/vault."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from indexing.structure import (
    DATE_CREATED,
    DATE_FILENAME,
    DATE_FRONTMATTER,
    DATE_MTIME,
    EMBED,
    MARKDOWN,
    WIKILINK,
    filename_date,
    frontmatter_names,
    frontmatter_tags,
    inline_tags,
    link_candidates,
    masked,
    note_date,
    note_links,
    note_structure,
    note_tags,
    parse_date,
)
from indexing.text import parse_frontmatter


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- tags ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("frontmatter, expected", [
    ({"tags": ["DB", "#Search"]}, ["db", "search"]),
    ({"tags": "db, search"}, ["db", "search"]),
    ({"tags": "db search #x"}, ["db", "search", "x"]),
    ({"tag": "Solo"}, ["solo"]),
    ({"Tags": ["a/b"]}, ["a/b"]),
    ({"tags": None}, []),
    ({"tags": [None, {"x": 1}, "ok"]}, ["ok"]),
    ({"title": "no tags"}, []),
])
def test_frontmatter_tags_in_every_shape(frontmatter, expected):
    assert sorted(frontmatter_tags(frontmatter)) == expected


def test_inline_tags_skip_code_headings_urls_numbers_and_frontmatter():
    text = (
        "---\ntags: [fm]\nnote: \"#infrontmatter\"\n---\n"
        "# Heading #InHeading\n"
        "##notatag because it is a heading marker? no: ## then text\n"
        "Text #Alpha, #a/b-c_d and #Ünïcode; issue #123, #1-2 and x#glued.\n"
        "A url https://example.com/page#fragment and [[Note#Heading]] and [x](#anchor) and &#123;.\n"
        "`#inline` code and ``#double `tick` code``\n"
        "```\n#fenced [[no]]\n```\n"
        "~~~~\n#tilde\n~~~\n#still-in-the-fence\n~~~~\n"
        "<!-- #commented -->\n"
        "#start-of-line tag, trailing #slash/\n"
    )
    assert sorted(inline_tags(text)) == sorted(
        ["inheading", "alpha", "a/b-c_d", "ünïcode", "start-of-line", "slash"])


def test_note_tags_merge_lower_case_unique_sorted():
    assert note_tags("Body #Zeta #db #DB", {"tags": ["DB", "alpha"]}) == ["alpha", "db", "zeta"]


def test_masked_keeps_offsets_and_line_breaks():
    text = "---\na: 1\n---\nx `code` y\n```\nblock\n```\nend"
    out = masked(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert "code" not in out and "block" not in out and "a: 1" not in out
    assert out.endswith("end") and "x " in out and " y" in out


# --- dates ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("2025-03-14", utc(2025, 3, 14)),
    ("2025-03-14T10:30:00", utc(2025, 3, 14, 10, 30)),
    ("2025-03-14 10:30", utc(2025, 3, 14, 10, 30)),
    ("2025-03-14T10:30:00+02:00", utc(2025, 3, 14, 8, 30)),
    ("2025-03-14T10:30:00Z", utc(2025, 3, 14, 10, 30)),
    ("2025/3/4", utc(2025, 3, 4)),
    ("2025-03", utc(2025, 3, 1)),
    ("yesterday", None),
    ("2025-13-01", None),
    (20250314, None),
    (None, None),
])
def test_parse_date(value, expected):
    assert parse_date(value) == expected


def test_yaml_dates_become_iso_strings_that_parse():
    fm, _ = parse_frontmatter("---\ndate: 2025-03-14\ncreated: 2024-01-02 03:04:05\n---\nbody")
    assert note_date(fm, "x.md", 0) == (utc(2025, 3, 14), DATE_FRONTMATTER)
    del fm["date"]
    assert note_date(fm, "x.md", 0) == (utc(2024, 1, 2, 3, 4, 5), DATE_CREATED)


@pytest.mark.parametrize("path, expected", [
    ("journal/2025-03-14 standup.md", utc(2025, 3, 14)),
    ("20250314-x.md", utc(2025, 3, 14)),
    ("2025_03_14.md", utc(2025, 3, 14)),
    ("notes/2025-03.md", utc(2025, 3, 1)),
    ("meetings/2025-01-standup.md", utc(2025, 1, 1)),
    ("2025/notes.md", None),  # a folder is not the note's name
    ("rfc-21190314.md", None),
    ("v1234567890.md", None),
    ("2025-02-30.md", None),
])
def test_filename_dates(path, expected):
    assert filename_date(path) == expected


def test_note_date_order_date_created_filename_mtime():
    mtime = utc(2024, 6, 1, 12).timestamp()
    assert note_date({"date": "2025-01-01", "created": "2024-01-01"}, "2023-01-01.md", mtime) == (
        utc(2025, 1, 1), DATE_FRONTMATTER)
    assert note_date({"date": "soon", "created": "2024-01-01"}, "2023-01-01.md", mtime) == (
        utc(2024, 1, 1), DATE_CREATED)
    assert note_date({"date": "soon"}, "j/2023-01-01 x.md", mtime) == (utc(2023, 1, 1), DATE_FILENAME)
    assert note_date({}, "plain.md", mtime) == (utc(2024, 6, 1, 12), DATE_MTIME)
    assert note_date({}, "plain.md", None) == (None, "")


# --- links ---------------------------------------------------------------------------------------

LINKS_TEXT = """---
links: "[[Not In Frontmatter]]"
---
# Title

First [[Note]] then [[Note|shown text]] and [[Note#Heading]] and [[Note#Heading|both]].
Embedded: ![[Embedded Note]] and ![[Other#Part|label]]; an image ![[pic.PNG]] and [[#Local heading]].
Markdown [rel](sub/page.md), [up](../x.md#anchor "title"), [enc](My%20Note.md) and [angle](<With Space.md>).
Not links: [web](https://example.com/a.md), [mail](mailto:a@b.c), [anchor](#here), [img](pic.png).

```
[[In Fence]] [x](in-fence.md)
```

In `[[Inline Code]]` no link. A table cell [[Table Note\\|cell]] works.

[def]: defs/target.md
"""


def test_note_links_every_form_with_lines():
    links = note_links(LINKS_TEXT)
    got = [(link.kind, link.target, link.heading, link.shown, link.line) for link in links]
    assert got == [
        (WIKILINK, "Note", "", "", 6),
        (WIKILINK, "Note", "", "shown text", 6),
        (WIKILINK, "Note", "Heading", "", 6),
        (WIKILINK, "Note", "Heading", "both", 6),
        (EMBED, "Embedded Note", "", "", 7),
        (EMBED, "Other", "Part", "label", 7),
        (MARKDOWN, "sub/page.md", "", "rel", 8),
        (MARKDOWN, "../x.md", "anchor", "up", 8),
        (MARKDOWN, "My Note.md", "", "enc", 8),
        (MARKDOWN, "With Space.md", "", "angle", 8),
        (WIKILINK, "Table Note", "", "cell", 15),
        (MARKDOWN, "defs/target.md", "", "def", 17),
    ]


def test_link_context_is_the_sentence_around_it():
    text = ("# T\n\nA first sentence. The second one names [[Target]] in the middle! A third one.\n\n"
            "- a list item with [[Listed]]\n- another item\n\n"
            "A long paragraph " + "word " * 100 + "with [[Far]] inside " + "more " * 100 + "end.\n")
    by_target = {link.target: link.context for link in note_links(text)}
    assert by_target["Target"] == "The second one names [[Target]] in the middle!"
    assert by_target["Listed"] == "a list item with [[Listed]]"
    far = by_target["Far"]
    assert "[[Far]]" in far and len(far) <= 242 and far.startswith("…") and far.endswith("…")


def test_note_structure_together():
    text = "---\ntags: x\ncreated: 2024-05-06\n---\nBody #y links [[Z]].\n"
    fm, _ = parse_frontmatter(text)
    structure = note_structure(text, fm, "n.md", 0)
    assert structure.tags == ["x", "y"]
    assert (structure.date, structure.date_source) == (utc(2024, 5, 6), DATE_CREATED)
    assert [(link.target, link.line) for link in structure.links] == [("Z", 5)]


def test_frontmatter_names_and_link_candidates():
    assert frontmatter_names({"title": "T", "aliases": ["A", "B", None]}) == ("T", ["A", "B"])
    assert frontmatter_names({"alias": "One, Two"}) == ("", ["One", "Two"])
    assert frontmatter_names({"title": True}) == ("", [])
    assert link_candidates("a/b/c.md", "../x.md") == (["a/x.md"], [])
    assert link_candidates("a/c.md", "Note") == (["a/Note", "a/Note.md"], ["Note", "Note.md"])
    assert link_candidates("c.md", "/abs/Note.md") == ([], ["abs/Note.md"])
    assert link_candidates("c.md", "../../escape") == ([], [])
