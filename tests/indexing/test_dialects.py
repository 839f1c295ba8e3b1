"""The markdown dialects of real vaults and docs (tests/fixtures/dialects): what is indexed of them
and how the document view renders them, read by one markdown reading (indexing.markdown)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.access import Access
from indexing.links import document_links
from indexing.markdown import comment_spans, searchable_text
from indexing.models import Collection, Document
from indexing.text import parse_frontmatter, strip_frontmatter
from search.request import SearchRequest
from search.retrieval.keyword import keyword_search
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "dialects"


# --- pure functions ---------------------------------------------------------------------------------


def test_searchable_text_keeps_offsets_and_drops_the_marks_and_comments():
    text = "> [!warning]- Title\n> body ==hot== %%gone%%\n\n:::tip Tip title\nx ^abc1\n:::\n`a %% b %%`\n"
    out = searchable_text(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert "[!warning]" not in out and "-" not in out.split("\n")[0]
    assert "Title" in out and "body" in out and "hot" in out and "==" not in out.split("`")[0]
    assert "gone" not in out and ":::" not in out and "tip" not in out.split("\n")[3].split("Tip")[0]
    assert "^abc1" not in out
    assert "`a %% b %%`" in out  # code is not a comment


def test_comments_in_code_are_not_comments():
    text = "```\n%% kept %%\n```\nreal %%hidden%% end\n"
    spans = comment_spans(text)
    assert [text[s:e].strip() for s, e in spans] == ["%%hidden%%"]


def test_toml_frontmatter_is_read_like_yaml_and_bounded():
    text = '+++\ntitle = "T"\ntags = ["a", "b"]\ndate = 2024-05-01\n+++\n# Body\n'
    data, warnings = parse_frontmatter(text)
    assert data == {"title": "T", "tags": ["a", "b"], "date": "2024-05-01"} and warnings == []
    assert strip_frontmatter(text) == "# Body\n"
    deep = "+++\nx = " + "[" * 100 + "]" * 100 + "\n+++\n"
    data, warnings = parse_frontmatter(deep)
    assert data == {} and "nests deeper" in warnings[0]
    data, warnings = parse_frontmatter('+++\nx = "unclosed\n+++\n')
    assert data == {} and "not valid TOML" in warnings[0]


# --- indexed ------------------------------------------------------------------------------------------


@pytest.fixture
def dialects(db, tmp_path):
    from indexing.services.refresh import collection_add

    target = tmp_path / "dialects"
    shutil.copytree(FIXTURE, target)
    # The fixture holds `.obsidian/`, where file names are titles; frontmatter titles are read here.
    collection_add(path=target, name="dialects", access=Access.local_user(), title_from="heading")
    return Collection.objects.get(name="dialects")


def _found(query: str) -> list[str]:
    response = keyword_search(SearchRequest(query=query, access=Access.local_user()))
    return [r.path for r in response.results]


@pytest.mark.django_db
def test_callout_titles_and_bodies_are_searchable_but_not_their_marker(dialects):
    assert _found("quokka") == ["Callouts.md"]  # title "Mind the quokka" and body
    assert _found("marmalade") == ["Callouts.md"]
    assert _found("zeppelin") == ["Callouts.md"]  # a GitHub alert's body
    assert _found("lighthouse") == ["Callouts.md"]  # a folded callout's body
    assert _found("pelicans") == ["docs/admonitions.md"]  # an admonition's title and body
    assert _found("kettle") == ["docs/admonitions.md"]
    assert _found("warning") == []  # [!warning] is a marker, not a word of the note
    assert _found("danger") == []  # :::danger[Careful] likewise


@pytest.mark.django_db
def test_comments_are_not_searchable_and_highlights_are(dialects):
    assert _found("xylophone") == []
    assert _found("narwhal") == []
    assert _found("saffron") == ["Callouts.md"]
    assert "Callouts.md" not in _found("budget42")  # a block id is an anchor, not text (a link to it is)
    assert _found("tangerine") == ["Callouts.md"]


@pytest.mark.django_db
def test_embeds_are_links_and_block_id_links_resolve(dialects):
    callouts = document_links("pmd://dialects/Callouts.md", access=Access.local_user())
    embeds = [(row.kind, row.target_text, row.heading, row.other.path if row.other else None) for row in callouts.links]
    assert embeds == [("embed", "Glossary", "Terms", "Glossary.md")]  # the image is an attachment, not a note
    glossary = document_links("pmd://dialects/Glossary.md", access=Access.local_user())
    assert [(r.kind, r.other.path) for r in glossary.backlinks] == [("embed", "Callouts.md")]
    block = [r for r in glossary.links if r.heading == "^budget42"]
    assert len(block) == 1 and block[0].other is not None and block[0].other.path == "Callouts.md"
    assert glossary.unresolved == 0


@pytest.mark.django_db
def test_toml_frontmatter_gives_title_tags_and_date(dialects):
    doc = Document.objects.get(collection=dialects, path="book/chapter.md")
    assert doc.title == "The TOML chapter"
    assert doc.tags == ["mdbook", "toml"]
    assert doc.date_source == "frontmatter:date" and doc.note_date.date().isoformat() == "2024-05-01"
    assert _found("capybaras") == ["book/chapter.md"]  # an HTML heading's words
    assert _found("candlestick") == ["book/chapter.md"]  # inside <details>


# --- rendered -----------------------------------------------------------------------------------------


@pytest.fixture
def member_client(db):
    user = get_user_model().objects.create_user("member", password="correct horse battery")
    client = Client()
    client.force_login(user)
    return client


def _rendered(client, path: str) -> str:
    response = client.get(f"/doc/dialects/{path}")
    assert response.status_code == 200
    html = response.content.decode()
    return re.search(r'<div class="doc-body markdown">(.*?)<aside class="doc-meta', html, re.S)[1]


@pytest.mark.django_db
def test_the_document_view_renders_callouts_highlights_and_embeds(member_client, dialects):
    html = _rendered(member_client, "Callouts.md")
    assert re.search(
        r'<div class="pmd-callout pmd-callout-warning"[^>]*>\s*<div class="pmd-callout-title">'
        r"Mind the quokka</div>",
        html,
    )
    assert re.search(
        r'<details class="pmd-callout pmd-callout-note"[^>]*>\s*<summary class="pmd-callout-title">'
        r"Folded lighthouse</summary>",
        html,
    )
    assert re.search(r'<div class="pmd-callout-title">Note</div>\s*<p[^>]*>GitHub alerts', html)
    assert "[!warning]" not in html and "[!NOTE]" not in html
    assert "<mark>highlighted saffron</mark>" in html
    assert "xylophone" not in html and "narwhal" not in html and "%%" not in html
    assert '<span class="pmd-block" id="block-budget42"></span>' in html and "costs. ^budget42" not in html
    assert re.search(r'<a class="pmd-embed" href="/doc/dialects/Glossary.md#h-terms"[^>]*>Glossary › Terms</a>', html)
    # the embedded section is shown in place, under its link, without the other note's anchors
    embedded = re.search(r'<div class="pmd-embed-note">(.*?)</div>', html, re.S)[1]
    assert "A wombat is a burrowing marsupial." in embedded and 'id="' not in embedded
    img = re.search(r'<img class="pmd-embed" src="([^"]+)" alt="diagram.png" width="300">', html)
    assert img and img[1] == "/file/dialects/attachments/diagram.png"
    image = member_client.get(img[1])
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image.content == (FIXTURE / "attachments" / "diagram.png").read_bytes()
    assert "sandbox" in image["Content-Security-Policy"]


@pytest.mark.django_db
def test_a_block_link_leads_to_the_block(member_client, dialects):
    html = _rendered(member_client, "Glossary.md")
    assert re.search(r'<a class="pmd-wikilink" href="/doc/dialects/Callouts.md#block-budget42"', html)
    assert re.search(r'<a class="pmd-wikilink" href="/doc/dialects/Callouts.md"[^>]*>Callouts</a>', html)


@pytest.mark.django_db
def test_a_section_link_or_embed_leads_to_the_heading(member_client, dialects):
    callouts = _rendered(member_client, "Callouts.md")
    assert re.search(r'<a class="pmd-embed" href="/doc/dialects/Glossary.md#h-terms"', callouts)
    glossary = _rendered(member_client, "Glossary.md")
    assert '<span class="pmd-anchor" id="h-terms"></span>Terms' in glossary


@pytest.mark.django_db
def test_a_note_is_found_by_what_it_embeds_only_with_transclusion_on(dialects):
    from indexing.services.collections import collection_configure

    assert "Callouts.md" not in _found("wombat")
    collection_configure(name="dialects", access=Access.local_user(), transclude=True)
    assert {"Glossary.md", "Callouts.md"} <= set(_found("wombat"))


@pytest.mark.django_db
def test_admonitions_details_html_headings_and_includes_render(member_client, dialects):
    html = _rendered(member_client, "docs/admonitions.md")
    assert re.search(
        r'<div class="pmd-callout pmd-callout-tip"[^>]*>\s*<div class="pmd-callout-title">'
        r"Pro tip about pelicans</div>",
        html,
    )
    assert re.search(
        r'<div class="pmd-callout pmd-callout-danger"[^>]*>\s*<div class="pmd-callout-title">'
        r"Careful</div>",
        html,
    )
    assert ":::" not in html
    html = _rendered(member_client, "book/chapter.md")
    assert '<span class="pmd-include">include <code>../src/main.rs</code></span>' in html
    assert "<h2>An HTML heading about capybaras</h2>" in html
    assert "<details>" in html and "<summary>Spoiler</summary>" in html
    assert "+++" not in html


@pytest.mark.django_db
def test_images_are_served_only_within_the_collection_and_its_access(member_client, dialects, tmp_path):
    from indexing.services.refresh import collection_add

    assert member_client.get("/file/dialects/attachments/missing.png").status_code == 404
    assert member_client.get("/file/dialects/../outside.png").status_code == 404
    assert member_client.get("/file/dialects/.obsidian/app.json").status_code == 404
    assert member_client.get("/file/dialects/Callouts.md").status_code == 404  # images only
    outside = tmp_path / "outside.png"
    outside.write_bytes((FIXTURE / "attachments" / "diagram.png").read_bytes())
    os.symlink(outside, Path(dialects.root_path) / "attachments" / "link.png")
    assert member_client.get("/file/dialects/attachments/link.png").status_code == 404  # a link is refused

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "note.md").write_text("# Secret\n\n![[pic.png]]\n")
    shutil.copy(FIXTURE / "attachments" / "diagram.png", secret / "pic.png")
    owner = get_user_model().objects.create_user("owner", password="x", is_staff=True)
    collection_add(path=secret, name="secret", access=Access.for_user(owner), visibility=Collection.Visibility.PRIVATE)
    owner_client = Client()
    owner_client.force_login(owner)
    assert owner_client.get("/file/secret/pic.png").status_code == 200  # the test can fail
    assert member_client.get("/file/secret/pic.png").status_code == 404
    assert member_client.get("/file/dialects/attachments/diagram.png").status_code == 200


def test_a_vector_hit_never_shows_a_comment():
    from search.retrieval.vector import chunk_snippet

    body = "The lighthouse log.\n%%the secret narwhal%%\nKeeper notes on the narwhal watch.\n"
    snippet, line, _ = chunk_snippet(body, 0, len(body), {"narwhal"})
    assert "secret" not in snippet and "%%" not in snippet
    assert "Keeper notes on the narwhal watch." in snippet


@pytest.mark.django_db
def test_embeds_that_embed_each_other_are_shown_once_each_and_bounded(member_client, dialects, tmp_path):
    from indexing.links import EMBED_SHOWN_CHARS
    from indexing.services.scanning import collection_index

    folder = tmp_path / "dialects"
    (folder / "Ping.md").write_text("# Ping\n\n## Serve\n\nThe ping side serves.\n\n![[Pong#Return]]\n")
    (folder / "Pong.md").write_text("# Pong\n\n## Return\n\nThe pong side returns.\n\n![[Ping#Serve]]\n")
    long_words = "\n".join(f"Line {i} of a very long section about otters." for i in range(600))
    (folder / "Long.md").write_text(f"# Long\n\n## Otters\n\n{long_words}\n\n## After\n\nnot shown\n")
    (folder / "Embeds long.md").write_text("# Embeds long\n\n![[Long#Otters]]\n")
    collection_index(dialects)
    ping = _rendered(member_client, "Ping.md")
    assert ping.count('class="pmd-embed-note"') == 1  # Pong's section, whose embed of Ping stays a link
    assert "The pong side returns." in ping
    assert re.search(r'<a class="pmd-embed" href="/doc/dialects/Ping.md#h-serve"[^>]*>Ping › Serve</a>', ping)
    shown = _rendered(member_client, "Embeds%20long.md")
    embedded = re.search(r'<div class="pmd-embed-note">(.*?)</div>', shown, re.S)[1]
    assert "Line 0 of" in embedded and "Line 599 of" not in embedded and "not shown" not in embedded
    assert len(embedded) < EMBED_SHOWN_CHARS * 2 and "…" in embedded


@pytest.mark.django_db
def test_task_lists_are_disabled_checkboxes_and_code_blocks_can_be_focused(member_client, dialects, tmp_path):
    folder = tmp_path / "dialects"
    (folder / "Tasks.md").write_text(
        "# Tasks\n\n- [ ] buy *flour*\n- [x] feed the starter\n- plain item\n\n```sh\nmake bread\n```\n"
    )
    from indexing.services.scanning import collection_index

    collection_index(dialects)
    html = _rendered(member_client, "Tasks.md")
    boxes = re.findall(r'<label class="pmd-task"><input type="checkbox" disabled=""( checked="")?> (.*?)</label>', html)
    assert boxes == [("", "buy <em>flour</em>"), (' checked=""', "feed the starter")]
    assert "[ ]" not in html and "[x]" not in html and "<li" in html and "plain item" in html
    assert re.search(r'<pre tabindex="0"><code[^>]* class="language-sh">make bread', html)
