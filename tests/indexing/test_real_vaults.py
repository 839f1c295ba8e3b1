"""Titles and tags on the markdown people write, on the fixture vault
tests/fixtures/real_vaults: a README with badges and a table of contents, an Obsidian vault
(.obsidian/, notes without an H1), notes titled by setext and HTML headings, a note whose only H1s
are examples inside a section, tags hidden in code,
math, URLs, link targets and comments."""

from __future__ import annotations

import re
import shutil

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.errors import InvalidCollection
from indexing.models import Collection, Document
from indexing.services.collections import collection_create
from indexing.services.scanning import collection_index
from indexing.structure import note_structure
from indexing.text import extract_title, parse_markdown, plain_title
from pmd_site.web.views.search import FACETS_FIRST
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "real_vaults"


def _read(rel: str, **kwargs):
    path = FIXTURE / rel
    parsed = parse_markdown(path.read_bytes(), rel, **kwargs)
    return parsed, note_structure(parsed.body, parsed.frontmatter, rel, None)


# --- titles -------------------------------------------------------------------------------------


def test_a_readme_title_has_no_badges():
    parsed, _ = _read("readme/README.md")
    assert parsed.title == "queue-microtask"


@pytest.mark.parametrize(
    "rel, title",
    [
        ("notes/setext.md", "Release notes for v2"),  # setext ===, emphasis and code marks removed
        ("notes/html-h1.md", "Tools & Tricks"),  # <h1> over lines: image dropped, tags removed, entity decoded
        ("notes/tags-everywhere.md", "Where tags hide"),  # frontmatter title first
        ("obsidian/Create a new base.md", "Create a new base"),  # no H1: a "## Global" is not the title
    ],
)
def test_titles_from_level_one_headings_or_the_file_name(rel, title):
    assert _read(rel)[0].title == title


def test_a_vault_titled_by_file_names_ignores_headings_and_frontmatter():
    assert _read("notes/setext.md", title_from="filename")[0].title == "setext"
    assert extract_title("# Heading\n", {"title": "T"}, "a/My note.md", title_from="filename") == "My note"


@pytest.mark.parametrize(
    "heading, plain",
    [
        ("[![ci][ci-image]][ci-url] Name [![npm](https://x/y.svg)](https://npm)", "Name"),
        ("**Bold** _it_ ~~gone~~ ==mark== `a_b`", "Bold it gone mark a_b"),
        (
            "[Link text](https://x.y/a(b)) and [ref][r] and [[Note|Shown]] and [[Other#Part]]",
            "Link text and ref and Shown and Other",
        ),
        ("Tom &amp; Jerry &#8212; &lt;3", "Tom & Jerry — <3"),
        ("Title {#custom-id}", "Title"),
        ("snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"),
        ("C#", "C#"),
    ],
)
def test_plain_titles(heading, plain):
    assert plain_title(heading) == plain


def test_headings_of_other_levels_or_in_code_are_not_titles():
    assert extract_title("## Global\n\n### Example\n", {}, "notes/Create a new base.md") == "Create a new base"
    assert extract_title("```\n# not this\n```\n# This\n", {}, "f.md") == "This"
    assert extract_title("# [![logo](logo.svg)](https://x)\n\n# Second\n", {}, "f.md") == "Second"
    assert extract_title("Some text\n\n---\n\nNot setext\n---\n", {}, "f.md") == "f"


def test_an_example_h1_deep_in_a_note_is_not_its_title():
    """A note about HTML shows `<h1>` in a sentence or in inline code: an example, not a heading."""
    body = "## Formatting\n\n" + "Some text.\n\n" * 58 + "Write `<h1>Example</h1>` or <h1>this</h1> for a heading.\n"
    assert extract_title(body, {}, "notes/HTML content.md") == "HTML content"
    assert extract_title("    <h1>Indented code</h1>\n", {}, "f.md") == "f"
    assert extract_title('<h1 align="center">Project</h1>\n\n## Usage\n', {}, "f.md") == "Project"


def test_a_note_about_headings_is_titled_by_its_file_name_not_by_its_example_h1():
    """Obsidian's help note on formatting (a faithful reproduction, German) shows `<h1>` and `# x`
    under its "## Überschriften" section: examples, not the title, which is the file name."""
    parsed, _ = _read("formatting/Grundlegende Formatierungssyntax.md")
    assert parsed.title == "Grundlegende Formatierungssyntax"


@pytest.mark.parametrize(
    "body",
    [
        "Intro.\n\n## Section\n\n# Example\n",
        "## Section\n\n<h1>Example</h1>\n",
        "<h2>Section</h2>\n\n# Example\n",
        "Section\n-------\n\n# Example\n",
    ],
)
def test_a_level_one_heading_after_a_section_heading_is_not_the_title(body):
    assert extract_title(body, {}, "notes/My note.md") == "My note"


def test_a_level_one_heading_before_the_first_section_is_the_title():
    assert extract_title("Intro text.\n\n# Title\n\n## Section\n\n# Example\n", {}, "f.md") == "Title"
    assert extract_title("```md\n## in code\n```\n# Title\n", {}, "f.md") == "Title"


# --- tags ---------------------------------------------------------------------------------------


def test_readme_tags_are_only_the_real_ones():
    _, structure = _read("readme/README.md")
    assert structure.tags == ["javascript", "microtask/shim"]


def test_tags_are_not_read_in_code_math_urls_links_html_or_comments():
    _, structure = _read("notes/tags-everywhere.md")
    assert structure.tags == ["after-url", "frontmatter-tag", "nested/deep/tag", "real-tag"]


def test_obsidian_tags_skip_numbers_comments_and_dollar_amounts_stay_text():
    assert _read("obsidian/Daily/Daily review.md")[1].tags == ["2024-q1", "budget", "review"]
    assert _read("obsidian/Create a new base.md")[1].tags == ["bases", "obsidian/howto"]


# --- collections ----------------------------------------------------------------------------------


@pytest.fixture
def vaults(tmp_path):
    folder = tmp_path / "real_vaults"
    shutil.copytree(FIXTURE, folder)
    return folder


@pytest.mark.django_db
def test_an_obsidian_vault_is_titled_by_file_names(vaults):
    vault = collection_create(path=vaults / "obsidian", name="vault")
    notes = collection_create(path=vaults / "notes", name="notes")
    assert (vault.title_from, notes.title_from) == ("filename", "heading")
    collection_index(vault)
    titles = dict(Document.objects.filter(collection=vault).values_list("path", "title"))
    assert titles == {"Create a new base.md": "Create a new base", "Daily/Daily review.md": "Daily review"}
    with pytest.raises(InvalidCollection, match="unknown title source"):
        collection_create(path=vaults / "readme", name="readme", title_from="h1")
    assert collection_create(path=vaults / "readme", name="readme", title_from="filename").title_from == "filename"


@pytest.mark.django_db
def test_existing_indexes_are_corrected_on_the_next_scan(vaults):
    notes = collection_create(path=vaults / "notes", name="notes")
    collection_index(notes)
    # As an older pmd stored them: wrong titles and tags, read with another reading.
    Document.objects.filter(collection=notes).update(title="Overview", tags=["2024", "section-anchor"])
    Collection.objects.filter(pk=notes.pk).update(reading="1:heading")
    report = collection_index(Collection.objects.get(pk=notes.pk))
    assert report.updated == 3
    docs = {d.path: d for d in Document.objects.filter(collection=notes)}
    assert docs["html-h1.md"].title == "Tools & Tricks"
    assert docs["tags-everywhere.md"].tags == ["after-url", "frontmatter-tag", "nested/deep/tag", "real-tag"]
    again = collection_index(Collection.objects.get(pk=notes.pk))  # read as this pmd reads: nothing to redo
    assert again.updated == 0 and again.unchanged == 3
    # Choosing file names for titles reads the notes again too.
    Collection.objects.filter(pk=notes.pk).update(title_from="filename")
    collection_index(Collection.objects.get(pk=notes.pk))
    assert Document.objects.get(collection=notes, path="setext.md").title == "setext"


# --- the web results page's facets --------------------------------------------------------------------


@pytest.mark.django_db
def test_tag_facets_are_short_with_a_more_control_and_a_filter_box(vaults):
    readme = vaults / "readme"
    toc = "\n".join(f"- [Section {i}](#section-{i}) and [api {i}][]\n\n[api {i}]: #api-{i}-options" for i in range(200))
    tags = " ".join(f"#topic-{i}" for i in range(40))
    for n in range(5):
        (readme / f"package-{n}.md").write_text(f"# package-{n} [![ci][ci]][url]\n\n{toc}\n\nmicrotask {tags}\n")
    collection_index(collection_create(path=readme, name="readmes"))
    assert not Document.objects.filter(tags__overlap=["section-1", "api-1-options"]).exists()
    client = Client()
    client.force_login(get_user_model().objects.create_user("member", password="correct horse battery"))
    page = client.get("/?q=microtask").content.decode()
    nav = re.search(r'<nav class="facets.*?</nav>', page, re.S).group(0)
    in_view, _, behind = nav.partition('<details class="more-tags">')
    assert len(re.findall(r'data-tag="', in_view)) == FACETS_FIRST
    assert "<summary>" in behind and re.search(
        r'<input type="search" class="tag-filter" data-filter-tags="#more-tags"', behind
    )
    assert len(re.findall(r'data-tag="', behind)) == 42 - FACETS_FIRST  # 40 topics, javascript, microtask/shim
    assert "section-" not in nav and "api-" not in nav
    titles = re.findall(r'<a class="title"[^>]*>([^<]*)</a>', page)
    assert titles and all(re.fullmatch(r"package-\d|queue-microtask", t) for t in titles)


@pytest.mark.django_db
def test_a_snippet_never_starts_in_the_frontmatter(vaults):
    from indexing.access import Access
    from search.request import SearchRequest
    from search.retrieval.common import complete_snippets
    from search.retrieval.keyword import keyword_search

    collection_index(collection_create(path=vaults / "notes", name="notes"))
    for snippets in (True, False):  # shown at once, or filled in later (hybrid's deferred snippets)
        response = keyword_search(SearchRequest(query="draft setext", access=Access.local_user()), snippets=snippets)
        [hit] = [r for r in response.results if r.path == "setext.md"]
        complete_snippets([hit])
        assert hit.line >= 5, (hit.snippet, hit.line)
        assert "status:" not in hit.snippet and "aliases" not in hit.snippet
