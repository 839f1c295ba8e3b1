"""The notes' structure: tags, dates and links parsed from the text (indexing.structure), stored and
resolved when indexing (indexing.services.scanning, indexing.services.links), and shown by
`pmd links`/`pmd backlinks`, /api/links and the MCP tool pmd_links. The fixture vault is
tests/fixtures/vault."""

from __future__ import annotations

import importlib
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from indexing.structure import (
    CONTEXT_CHARS,
    DATE_CREATED,
    DATE_FILENAME,
    DATE_FRONTMATTER,
    DATE_MTIME,
    EMBED,
    LINKS_MAX,
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
from indexing.text import FRONTMATTER_MAX_CHARS, FRONTMATTER_MAX_DEPTH, extract_title, parse_frontmatter
from tests.support.factories import api_client, make_user
from tests.support.mcp_client import SERVED_DB
from tests.support.paths import FIXTURE_VAULT


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- tags ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frontmatter, expected",
    [
        ({"tags": ["DB", "#Search"]}, ["db", "search"]),
        ({"tags": "db, search"}, ["db", "search"]),
        ({"tags": "db search #x"}, ["db", "search", "x"]),
        ({"tag": "Solo"}, ["solo"]),
        ({"Tags": ["a/b"]}, ["a/b"]),
        ({"tags": None}, []),
        ({"tags": [None, {"x": 1}, "ok"]}, ["ok"]),
        ({"title": "no tags"}, []),
    ],
)
def test_frontmatter_tags_in_every_shape(frontmatter, expected):
    assert sorted(frontmatter_tags(frontmatter)) == expected


def test_inline_tags_skip_code_headings_urls_numbers_and_frontmatter():
    text = (
        '---\ntags: [fm]\nnote: "#infrontmatter"\n---\n'
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
    assert sorted(inline_tags(text)) == sorted(["inheading", "alpha", "a/b-c_d", "ünïcode", "start-of-line", "slash"])


def test_note_tags_merge_lower_case_unique_sorted():
    assert note_tags("Body #Zeta #db #DB", {"tags": ["DB", "alpha"]}) == ["alpha", "db", "zeta"]


def test_masked_keeps_offsets_and_line_breaks():
    text = "---\na: 1\n---\nx `code` y\n```\nblock\n```\nend"
    out = masked(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert "code" not in out and "block" not in out and "a: 1" not in out
    assert out.endswith("end") and "x " in out and " y" in out


# --- dates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
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
    ],
)
def test_parse_date(value, expected):
    assert parse_date(value) == expected


def test_yaml_dates_become_iso_strings_that_parse():
    fm, _ = parse_frontmatter("---\ndate: 2025-03-14\ncreated: 2024-01-02 03:04:05\n---\nbody")
    assert note_date(fm, "x.md", 0) == (utc(2025, 3, 14), DATE_FRONTMATTER)
    del fm["date"]
    assert note_date(fm, "x.md", 0) == (utc(2024, 1, 2, 3, 4, 5), DATE_CREATED)


@pytest.mark.parametrize(
    "path, expected",
    [
        ("journal/2025-03-14 standup.md", utc(2025, 3, 14)),
        ("20250314-x.md", utc(2025, 3, 14)),
        ("2025_03_14.md", utc(2025, 3, 14)),
        ("notes/2025-03.md", utc(2025, 3, 1)),
        ("meetings/2025-01-standup.md", utc(2025, 1, 1)),
        ("2025/notes.md", None),  # a folder is not the note's name
        ("rfc-21190314.md", None),
        ("v1234567890.md", None),
        ("2025-02-30.md", None),
    ],
)
def test_filename_dates(path, expected):
    assert filename_date(path) == expected


def test_note_date_order_date_created_filename_mtime():
    mtime = utc(2024, 6, 1, 12).timestamp()
    assert note_date({"date": "2025-01-01", "created": "2024-01-01"}, "2023-01-01.md", mtime) == (
        utc(2025, 1, 1),
        DATE_FRONTMATTER,
    )
    assert note_date({"date": "soon", "created": "2024-01-01"}, "2023-01-01.md", mtime) == (
        utc(2024, 1, 1),
        DATE_CREATED,
    )
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
    text = (
        "# T\n\nA first sentence. The second one names [[Target]] in the middle! A third one.\n\n"
        "- a list item with [[Listed]]\n- another item\n\n"
        "A long paragraph " + "word " * 100 + "with [[Far]] inside " + "more " * 100 + "end.\n"
    )
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


# --- indexing the fixture vault ------------------------------------------------------------------

NESTED_MTIME = utc(2024, 6, 1, 12).timestamp()


@pytest.fixture
def vault_dir(tmp_path) -> Path:
    target = tmp_path / "vault"
    shutil.copytree(FIXTURE_VAULT, target)
    os.utime(target / "journal/deep/nested/note.md", (NESTED_MTIME, NESTED_MTIME))
    return target


@pytest.fixture
def vault(db, vault_dir):
    """The fixture vault, indexed as collection `vault`; the first scan's report is `vault.report`."""
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    collection = collection_create(path=vault_dir, name="vault")
    collection.report = collection_index(collection)
    return collection


def _doc(collection, path):
    return collection.documents.get(path=path)


def _links(collection) -> dict[tuple[str, str], str | None]:
    """(source path, target as written) → path of the resolved note, for the active notes."""
    from indexing.models import DocumentLink

    rows = DocumentLink.objects.filter(source__collection=collection, source__active=True).select_related(
        "source", "target"
    )
    return {(r.source.path, r.target_text): (r.target.path if r.target_id else None) for r in rows}


def test_vault_tags_dates_and_their_sources(vault):
    expected = {
        "Home.md": (["home", "index", "project"], utc(2025, 2, 1), DATE_FRONTMATTER),
        "projects/alpha.md": (["db", "project/alpha", "search"], utc(2024, 12, 1), DATE_CREATED),
        "projects/beta.md": (["db"], utc(2025, 1, 5, 8, 30), DATE_FRONTMATTER),
        "projects/Ideas.md": (["idea"], None, DATE_MTIME),
        "journal/2025-03-14 standup.md": (["standup"], utc(2025, 3, 14), DATE_FILENAME),
        "journal/20250320-retro.md": (["retro"], utc(2025, 3, 20), DATE_FILENAME),
        "journal/deep/nested/note.md": ([], utc(2024, 6, 1, 12), DATE_MTIME),
    }
    for path, (tags, when, source) in expected.items():
        doc = _doc(vault, path)
        assert (doc.tags, doc.date_source) == (tags, source), path
        if when is not None:
            assert doc.note_date == when, path
    ideas = _doc(vault, "projects/Ideas.md")
    assert ideas.note_date == datetime.fromtimestamp(ideas.mtime, tz=UTC)


def test_vault_links_resolve_by_path_name_title_and_alias(vault):
    links = _links(vault)
    assert links == {
        ("Home.md", "Ideas"): "projects/Ideas.md",  # file name, in another folder
        ("Home.md", "Alpha Plan"): "projects/alpha.md",  # alias (a list)
        ("Home.md", "The Beta Project"): "projects/beta.md",  # frontmatter title
        ("Home.md", "Missing Note"): None,
        ("Home.md", "2025-03-14 standup"): "journal/2025-03-14 standup.md",  # the embed
        ("Home.md", "journal/2025-03-14 standup.md"): "journal/2025-03-14 standup.md",  # %20, relative
        ("Home.md", "Renamed Note"): "Renamed Note.md",
        ("Home.md", "Old Alias"): "Renamed Note.md",  # alias (a string)
        ("Home.md", "Renamed Title"): "Renamed Note.md",
        ("projects/alpha.md", "beta"): "projects/beta.md",  # the same folder first
        ("projects/alpha.md", "../Home.md"): "Home.md",  # relative markdown link
        ("projects/beta.md", "Home"): "Home.md",
        ("projects/beta.md", "projects/alpha"): "projects/alpha.md",  # from the collection root
        ("projects/beta.md", "alpha"): "projects/alpha.md",
        ("projects/Ideas.md", "Renamed Note"): "Renamed Note.md",
        ("journal/2025-03-14 standup.md", "Home"): "Home.md",
        ("journal/20250320-retro.md", "../projects/alpha.md"): "projects/alpha.md",
        ("journal/deep/nested/note.md", "Ideas"): "projects/Ideas.md",
        ("journal/deep/nested/note.md", "beta"): "projects/beta.md",  # shortest of two beta.md
    }
    from indexing.models import DocumentLink

    kinds = {
        (link.target_text, link.kind, link.heading, link.shown_text, link.line)
        for link in DocumentLink.objects.filter(source=_doc(vault, "Home.md"))
    }
    assert ("2025-03-14 standup", EMBED, "", "", 11) in kinds
    assert ("The Beta Project", WIKILINK, "Goals", "", 9) in kinds
    assert ("Alpha Plan", WIKILINK, "", "the plan", 8) in kinds
    assert ("journal/2025-03-14 standup.md", MARKDOWN, "", "meeting", 13) in kinds


def test_broken_link_is_a_problem_of_the_linking_note(vault):
    from indexing.models import FileProblem

    problems = list(FileProblem.objects.filter(collection=vault).values_list("path", "severity", "message"))
    assert problems == [("Home.md", "warning", "unresolved link [[Missing Note]] on line 9")]
    assert [str(i) for i in vault.report.issues] == ["Home.md: unresolved link [[Missing Note]] on line 9"]


def test_unchanged_rescan_keeps_link_problems_and_a_new_note_satisfies_an_old_link(vault, vault_dir):
    from indexing.models import FileProblem
    from indexing.services.scanning import collection_index

    again = collection_index(vault)
    assert again.unchanged == 9 and [i.path for i in again.issues] == ["Home.md"]
    assert FileProblem.objects.filter(collection=vault).count() == 1

    (vault_dir / "later").mkdir()
    (vault_dir / "later/Missing Note.md").write_text("# Now it exists\n")
    report = collection_index(vault)
    assert report.added == 1 and report.issues == []
    assert _links(vault)[("Home.md", "Missing Note")] == "later/Missing Note.md"
    assert not FileProblem.objects.filter(collection=vault).exists()


def test_renamed_note_keeps_its_backlinks_by_title_and_alias_only(vault, vault_dir):
    from indexing.models import FileProblem
    from indexing.services.scanning import collection_index

    (vault_dir / "moved").mkdir()
    (vault_dir / "Renamed Note.md").rename(vault_dir / "moved/New Name.md")
    report = collection_index(vault)
    assert (report.added, report.removed) == (1, 1)
    links = _links(vault)
    assert links[("Home.md", "Renamed Note")] is None
    assert links[("projects/Ideas.md", "Renamed Note")] is None
    assert links[("Home.md", "Old Alias")] == "moved/New Name.md"
    assert links[("Home.md", "Renamed Title")] == "moved/New Name.md"
    messages = set(FileProblem.objects.filter(collection=vault).values_list("path", "message"))
    assert messages == {
        ("Home.md", "unresolved link [[Missing Note]] on line 9"),
        ("Home.md", "unresolved link [[Renamed Note]] on line 14"),
        ("projects/Ideas.md", "unresolved link [[Renamed Note]] on line 3"),
    }
    # the old document (inactive) is nobody's target any more
    old = _doc(vault, "Renamed Note.md")
    assert not old.active and not old.links_in.exists()


def test_edited_note_replaces_its_links_and_a_touched_file_moves_an_mtime_date(vault, vault_dir):
    from indexing.services.scanning import collection_index

    alpha = vault_dir / "projects/alpha.md"
    alpha.write_text(alpha.read_text().replace("[[beta]]", "[[Ideas]] and [[beta]]"))
    later = NESTED_MTIME + 86400 * 30
    for name in ("journal/deep/nested/note.md", "Home.md", "journal/20250320-retro.md"):
        os.utime(vault_dir / name, (later, later))  # same text, a new mtime
    report = collection_index(vault)
    assert report.updated == 1
    targets = sorted(link.target_text for link in _doc(vault, "projects/alpha.md").links_out.all())
    assert targets == ["../Home.md", "Ideas", "beta"]
    assert _links(vault)[("projects/alpha.md", "Ideas")] == "projects/Ideas.md"
    assert _doc(vault, "journal/deep/nested/note.md").note_date == datetime.fromtimestamp(later, tz=UTC)
    assert _doc(vault, "Home.md").note_date == utc(2025, 2, 1)  # its date is in its frontmatter
    assert _doc(vault, "journal/20250320-retro.md").note_date == utc(2025, 3, 20)  # in its name


def test_backfill_migration_rebuilds_the_structure_of_an_index_without_it(vault):
    from django.apps import apps

    from indexing.models import Document, DocumentLink, FileProblem

    before_docs = {d.path: (d.tags, d.note_date, d.date_source) for d in Document.objects.filter(collection=vault)}
    before_links = _links(vault)
    Document.objects.update(tags=[], note_date=None, date_source="")
    DocumentLink.objects.all().delete()
    FileProblem.objects.all().delete()

    backfill = importlib.import_module("indexing.migrations.0006_structure_backfill").backfill
    backfill(apps, None)

    after_docs = {d.path: (d.tags, d.note_date, d.date_source) for d in Document.objects.filter(collection=vault)}
    assert after_docs == before_docs
    assert _links(vault) == before_links
    assert list(FileProblem.objects.values_list("path", "message")) == [
        ("Home.md", "unresolved link [[Missing Note]] on line 9")
    ]


# --- links and backlinks in every face -------------------------------------------------------------


def test_document_links_selector(vault):
    from indexing.access import Access
    from indexing.links import document_links

    found = document_links("projects/alpha.md", access=Access.local_user())
    assert [(link.written, link.line, link.other.path) for link in found.links] == [
        ("[[beta]]", 8, "projects/beta.md"),
        ("(../Home.md)", 8, "Home.md"),
    ]
    assert [(link.other.path, link.line, link.written) for link in found.backlinks] == [
        ("Home.md", 8, "[[Alpha Plan]]"),
        ("journal/20250320-retro.md", 3, "(../projects/alpha.md)"),
        ("projects/beta.md", 8, "[[projects/alpha]]"),
        ("projects/beta.md", 8, "[[alpha#Details]]"),
    ]
    home = next(link for link in found.backlinks if link.other.path == "Home.md")
    assert home.context == "Start with [[Ideas]] and [[Alpha Plan|the plan]]."
    assert home.text == "Start with Ideas and the plan."  # as every face shows it
    assert (found.links_total, found.backlinks_total) == (2, 4)
    limited = document_links("#" + _doc(vault, "projects/alpha.md").docid, access=Access.local_user(), limit=1)
    assert (len(limited.links), len(limited.backlinks), limited.backlinks_total) == (1, 1, 4)
    home_links = document_links("Home.md", access=Access.local_user()).as_dict()["links"]
    missing = next(link for link in home_links if link["target"] == "Missing Note")
    assert missing["resolved"] is False and missing["uri"] is None and missing["link"] == "[[Missing Note]]"


def test_document_links_shows_only_what_access_sees(vault, django_user_model, tmp_path):
    from indexing.access import Access
    from indexing.errors import CollectionNotFound, DocumentNotFound
    from indexing.links import document_links
    from indexing.models import Collection, Content, Document, DocumentLink

    member = make_user("member")
    secret = Collection.objects.create(name="secret", root_path=str(tmp_path), visibility=Collection.Visibility.PRIVATE)
    content = Content.objects.create(hash="f" * 64, body="[[alpha]]", size=9)
    hidden = Document.objects.create(
        collection=secret, path="hidden.md", title="Hidden", content=content, docid="ffffff"
    )
    # a link across collections cannot come from a scan: made here to prove the read filters it anyway
    DocumentLink.objects.create(
        source=hidden, target=_doc(vault, "projects/alpha.md"), kind="wikilink", target_text="alpha", line=1
    )
    as_member = document_links("pmd://vault/projects/alpha.md", access=Access.for_user(member))
    assert "secret" not in {link.other.collection.name for link in as_member.backlinks}
    assert as_member.backlinks_total == 4
    local = document_links("pmd://vault/projects/alpha.md", access=Access.local_user())
    assert local.backlinks_total == 5  # the local user sees every collection
    with pytest.raises(CollectionNotFound):  # the same words as for a collection never created
        document_links("pmd://secret/hidden.md", access=Access.for_user(member))
    vault.visibility = Collection.Visibility.PRIVATE
    vault.save()
    with pytest.raises(DocumentNotFound):
        document_links("projects/alpha.md", access=Access.for_user(member))


def test_cli_links_and_backlinks_in_every_format(vault, run_cli):
    import csv
    import io
    import json

    code, out, err = run_cli("links", "Home.md")
    assert code == 0, err
    assert "[[Ideas]]  →  pmd://vault/projects/Ideas.md" in out
    assert "[[Missing Note]]  →  unresolved" in out
    assert out.splitlines()[0].startswith("pmd://vault/Home.md #")

    code, out, _ = run_cli("backlinks", "pmd://vault/projects/alpha.md")
    assert code == 0
    assert "pmd://vault/Home.md:8" in out and "Start with Ideas and the plan." in out
    assert "[[Alpha Plan|the plan]]" not in out
    assert "pmd://vault/journal/20250320-retro.md:3" in out

    code, out, _ = run_cli("backlinks", "projects/alpha.md", "--json")
    data = json.loads(out)
    assert data["uri"] == "pmd://vault/projects/alpha.md" and data["backlinks_total"] == 4
    home = next(b for b in data["backlinks"] if b["uri"] == "pmd://vault/Home.md")
    assert home["context"] == "Start with [[Ideas]] and [[Alpha Plan|the plan]]."  # as written, for tools
    assert home["text"] == "Start with Ideas and the plan."
    assert {b["uri"] for b in data["backlinks"]} == {
        "pmd://vault/Home.md",
        "pmd://vault/journal/20250320-retro.md",
        "pmd://vault/projects/beta.md",
    }

    code, out, _ = run_cli("links", "Home.md", "--files")
    assert out.splitlines()[0].endswith(",pmd://vault/projects/Ideas.md")
    assert len(out.splitlines()) == 5  # 9 links, 5 notes (the broken one has none)

    code, out, _ = run_cli("links", "Home.md", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 9 and [r["resolved"] for r in rows].count("no") == 1
    assert rows[0]["link"] == "[[Ideas]]" and rows[0]["uri"] == "pmd://vault/projects/Ideas.md"

    code, out, _ = run_cli("backlinks", "projects/alpha.md", "--md")
    assert out.startswith("# Backlinks of Alpha") and "> Looking back at [Alpha](../projects/alpha.md)" in out

    code, out, _ = run_cli("links", "Home.md", "-n", "2")
    assert "… and 7 more" in out

    code, _, err = run_cli("links", "nowhere.md")
    assert code == 1 and "no document nowhere.md" in err


def test_api_links(vault, django_user_model):
    from django.test import Client

    from indexing.models import Collection

    reader = make_user("reader")
    client = api_client(reader, write=False)
    response = client.get("/api/links", {"ref": "projects/alpha.md"})
    assert response.status_code == 200, response.content
    data = response.json()
    assert [link["uri"] for link in data["links"]] == ["pmd://vault/projects/beta.md", "pmd://vault/Home.md"]
    assert data["backlinks_total"] == 4 and data["backlinks"][0]["context"].startswith("Start with")
    assert data["backlinks"][0]["text"] == "Start with Ideas and the plan."
    limited = client.get("/api/links", {"ref": "projects/alpha.md", "limit": 1}).json()
    assert len(limited["backlinks"]) == 1 and limited["backlinks_total"] == 4
    assert client.get("/api/links", {"ref": "nowhere.md"}).status_code == 404
    assert client.get("/api/links").status_code == 422
    assert Client().get("/api/links", {"ref": "projects/alpha.md"}).status_code == 401
    Collection.objects.filter(pk=vault.pk).update(visibility=Collection.Visibility.PRIVATE)
    hidden = client.get("/api/links", {"ref": "projects/alpha.md"})
    assert hidden.status_code == 404 and "vault" not in hidden.json()["message"]


@SERVED_DB
def test_mcp_pmd_links_over_http(vault, django_user_model):
    import anyio

    from indexing.access import Access
    from indexing.services.tokens import token_create
    from tests.support.mcp_client import http_client, serve_asgi

    user = make_user("agent")
    token = token_create(user=user, name="agent", access=Access.local_user()).raw

    async def run(url):
        async with http_client(url, token) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            both = await client.call_tool("pmd_links", {"ref": "projects/alpha.md"})
            incoming = await client.call_tool("pmd_links", {"ref": "Home.md", "direction": "in"})
            outgoing = await client.call_tool("pmd_links", {"ref": "Home.md", "direction": "out", "limit": 3})
            missing = await client.call_tool("pmd_links", {"ref": "nowhere.md"})
            return tools, both, incoming, outgoing, missing

    with serve_asgi() as url:
        tools, both, incoming, outgoing, missing = anyio.run(run, url)
    assert tools["pmd_links"].annotations.read_only_hint is True
    assert not both.is_error, both.content[0].text
    data = both.structured_content
    assert [link["uri"] for link in data["links"]] == ["pmd://vault/projects/beta.md", "pmd://vault/Home.md"]
    assert data["backlinks_total"] == 4 and data["backlinks"][0]["uri"] == "pmd://vault/Home.md"
    assert "backlinks (4):" in both.content[0].text
    assert data["backlinks"][0]["text"] == "Start with Ideas and the plan."
    assert "Home: Start with Ideas and the plan." in both.content[0].text  # read, as every face shows it
    assert incoming.structured_content["links"] == [] and {
        b["uri"] for b in incoming.structured_content["backlinks"]
    } == {"pmd://vault/projects/alpha.md", "pmd://vault/projects/beta.md", "pmd://vault/journal/2025-03-14 standup.md"}
    out = outgoing.structured_content
    assert out["backlinks"] == [] and len(out["links"]) == 3 and out["links_total"] == 9
    assert "6 more" in outgoing.content[0].text
    assert missing.is_error and "nowhere.md" in missing.content[0].text


def test_removed_and_restored_note_loses_then_regains_its_backlinks(vault, vault_dir):
    from indexing.services.scanning import collection_index

    ideas = vault_dir / "projects/Ideas.md"
    text = ideas.read_text()
    ideas.unlink()
    report = collection_index(vault)
    assert report.removed == 1
    links = _links(vault)
    assert links[("Home.md", "Ideas")] is None and links[("journal/deep/nested/note.md", "Ideas")] is None
    assert ("projects/Ideas.md", "Renamed Note") not in links  # an inactive note's links are not listed
    assert "Home.md: unresolved link [[Ideas]] on line 8" in [str(i) for i in report.issues]
    assert not any(i.path == "projects/Ideas.md" for i in report.issues)

    ideas.write_text(text)
    report = collection_index(vault)
    assert report.reactivated == 1
    links = _links(vault)
    assert links[("Home.md", "Ideas")] == "projects/Ideas.md"
    assert links[("projects/Ideas.md", "Renamed Note")] == "Renamed Note.md"
    assert [str(i) for i in report.issues] == ["Home.md: unresolved link [[Missing Note]] on line 9"]


def test_cli_collection_add_prints_unresolved_links(db, vault_dir, run_cli):
    code, _, err = run_cli("collection", "add", str(vault_dir), "--name", "cli-vault")
    assert code == 0, err
    assert "Home.md: unresolved link [[Missing Note]] on line 9" in err
    (vault_dir / "Home.md").write_text((vault_dir / "Home.md").read_text().replace("[[Ideas]]", "[[bold]]"))
    code, _, err = run_cli("update", "-c", "cli-vault")
    assert code == 0, err
    assert "Home.md: unresolved link [[bold]] on line 8" in err  # text, not terminal markup


def test_a_scan_resolves_only_the_links_a_change_can_move_and_agrees_with_a_full_resolution(
    vault, vault_dir, monkeypatch
):
    """After each kind of change the scoped resolution leaves nothing a full one would change, and a
    body edit resolves its own note's links only."""
    from indexing.models import FileProblem
    from indexing.services import links as links_service
    from indexing.services.links import links_resolve
    from indexing.services.scanning import collection_index

    looked_at: list[int] = []
    real = links_service.NoteNames.resolve

    def counting(self, source_path, target, kind=""):
        looked_at.append(1)
        return real(self, source_path, target, kind)

    monkeypatch.setattr(links_service.NoteNames, "resolve", counting)

    def scan_then_check():
        looked_at.clear()
        report = collection_index(vault)
        report.resolved = len(looked_at)
        scoped = set(
            FileProblem.objects.filter(collection=vault, message__startswith="unresolved link ").values_list(
                "path", "message"
            )
        )
        before = _links(vault)
        full = links_resolve(vault)  # everything again: nothing left to change
        assert full.changed == 0, before
        assert set(full.problems) == scoped
        return report, before

    # a body edit: its own links only (the vault has dozens)
    ideas = vault_dir / "projects/Ideas.md"
    ideas.write_text(ideas.read_text() + "\nOne more thought, see [[beta]].\n")
    report, links = scan_then_check()
    own = len([key for key in links if key[0] == "projects/Ideas.md"])
    assert 0 < report.resolved <= 2 * own < len(links)
    assert links[("projects/Ideas.md", "beta")] == "projects/beta.md"

    # a new note by a missing name: the broken link resolves
    (vault_dir / "Missing Note.md").write_text("# Missing no more\n")
    _, links = scan_then_check()
    assert links[("Home.md", "Missing Note")] == "Missing Note.md"

    # a note by the same file name nearer the linking note takes its link
    assert links[("Home.md", "Ideas")] == "projects/Ideas.md"
    (vault_dir / "Ideas.md").write_text("# Root ideas\n")
    _, links = scan_then_check()
    assert links[("Home.md", "Ideas")] == "Ideas.md"

    # a new alias and a new title: links by them follow
    home = vault_dir / "Home.md"
    home.write_text(home.read_text().replace("title: Vault Home", "title: Vault Home\naliases: [Start Here]"))
    (vault_dir / "start.md").write_text("Go to [[Start Here]] and [[Welcome Page]].\n")
    scan_then_check()
    ideas.write_text("---\ntitle: Welcome Page\n---\n" + ideas.read_text())
    _, links = scan_then_check()
    assert links[("start.md", "Start Here")] == "Home.md"
    assert links[("start.md", "Welcome Page")] == "projects/Ideas.md"

    # a rename: backlinks by file name break, those by title or alias follow; then it comes back
    renamed = vault_dir / "Renamed Note.md"
    (vault_dir / "moved").mkdir()
    renamed.rename(vault_dir / "moved/New Name.md")
    _, links = scan_then_check()
    assert links[("Home.md", "Renamed Note")] is None
    assert links[("Home.md", "Old Alias")] == "moved/New Name.md"
    (vault_dir / "moved/New Name.md").rename(renamed)
    _, links = scan_then_check()
    assert links[("Home.md", "Renamed Note")] == "Renamed Note.md"
    assert links[("Home.md", "Old Alias")] == "Renamed Note.md"

    # removing it gives its links back to the other note of that name
    (vault_dir / "Ideas.md").unlink()
    _, links = scan_then_check()
    assert links[("Home.md", "Ideas")] == "projects/Ideas.md"


# --- bounded: a note is input anyone who can write a file controls -------

ALIAS_BOMB = (
    "---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
    + "---\n# Bomb\n"
)


def test_frontmatter_with_aliases_is_refused_not_expanded():
    assert len(ALIAS_BOMB) < 600  # 10**9 values once expanded
    assert parse_frontmatter(ALIAS_BOMB) == (
        {},
        ["frontmatter refused, it uses YAML aliases (*name), which pmd does not expand: ignored"],
    )
    small = "---\nbase: &b {x: 1}\nother: *b\n---\n"
    assert parse_frontmatter(small)[0] == {}


def test_frontmatter_too_long_or_too_deep_is_refused():
    long = "---\ntitle: " + "x" * FRONTMATTER_MAX_CHARS + "\n---\n"
    assert parse_frontmatter(long) == (
        {},
        [f"frontmatter is longer than {FRONTMATTER_MAX_CHARS:,} characters: ignored"],
    )
    deep_flow = "---\na: " + "[" * 5000 + "]" * 5000 + "\n---\n"  # the pure-Python composer recursed past the limit
    data, warnings = parse_frontmatter(deep_flow)
    assert data == {} and warnings and warnings[0].startswith("frontmatter")
    deep_block = "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(FRONTMATTER_MAX_DEPTH + 1)) + "---\n"
    assert parse_frontmatter(deep_block) == (
        {},
        [f"frontmatter refused, it nests deeper than {FRONTMATTER_MAX_DEPTH} levels: ignored"],
    )
    ok = "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(FRONTMATTER_MAX_DEPTH - 1)) + "---\n"
    assert parse_frontmatter(ok)[1] == []


def test_a_heading_of_spaces_gives_its_title():
    # Blanks in a title are collapsed, and only its first few thousand characters are read.
    assert extract_title("# a" + " " * 200_000 + "b ##\n", {}, "f.md") == "a"
    assert (
        extract_title("# a " + "b " * 200_000 + "##\n", {}, "f.md") == ("a " + "b " * 499)[:1000].rstrip()
    )  # titles keep 1000 characters
    assert extract_title("#  a" + " " * 200_000 + "##\n", {}, "f.md") == "a"
    assert extract_title("# C#\n", {}, "f.md") == "C#"  # CommonMark: a closing '#' follows a blank
    assert extract_title("# Title ##  \n", {}, "f.md") == "Title"
    assert extract_title("## Title ##  \n", {}, "f.md") == "f"  # level 2 is not a title


def test_a_line_of_100k_links_keeps_the_first_ones_each_with_its_sentence():
    text = "Start here. " + " ".join(f"[[n{i}]]" for i in range(100_000)) + " and the end.\n\nAfter [[last]].\n"
    structure = note_structure(text, {}, "map.md", None)
    assert len(structure.links) == LINKS_MAX
    assert [link.target for link in structure.links[:2]] == ["n0", "n1"]
    assert structure.links[-1].target == f"n{LINKS_MAX - 1}"
    assert {link.line for link in structure.links} == {1}
    first = structure.links[0].context
    assert first.startswith("[[n0]] [[n1]]") and first.endswith("…") and len(first) <= CONTEXT_CHARS + 2
    middle = structure.links[2500].context
    assert middle.startswith("…") and "[[n2500]]" in middle and len(middle) <= CONTEXT_CHARS + 2
    assert structure.warnings == [f"more than {LINKS_MAX:,} links: only the first {LINKS_MAX:,} are kept"]


def test_100k_markdown_and_wikilinks_side_by_side():
    text = "See " + " ".join(f"[[w{i}]] [m{i}](m{i}.md)" for i in range(50_000)) + ".\n"
    links = note_links(text)
    assert len(links) == 100_000
    assert [(link.kind, link.target) for link in links[:4]] == [
        (WIKILINK, "w0"),
        (MARKDOWN, "m0.md"),
        (WIKILINK, "w1"),
        (MARKDOWN, "m1.md"),
    ]
    assert links[-1].target == "m49999.md" and links[-1].context.endswith("[m49999](m49999.md).")


def test_masking_backtick_runs_and_unclosed_comments_of_a_long_paragraph():
    runs = "`open " + "``pair`` " * 100_000 + "\n"
    out = masked(runs)
    assert len(out) == len(runs)
    assert out.startswith("`open ") and "pair" not in out  # each ``pair`` is code; the lone ` is not
    comments = "<!-- never closed " * 50_000 + "#tag\n%% gone %% [[kept]]\n"
    out = masked(comments)
    assert out.count("<!-- never closed") == 50_000 and "gone" not in out and "[[kept]]" in out
    assert note_tags(comments, {}) == ["tag"]
