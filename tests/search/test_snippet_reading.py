"""Results as a person reads them: a snippet's words without markdown, under its heading path,
the match still highlighted; code only when the match is in code; never raw frontmatter. Read from
an Obsidian-help style vault (tests/fixtures/real_vaults/help) through every face that shows it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from indexing.access import Access
from indexing.snippets import snippet_reading
from search.request import Mode, SearchRequest
from search.retrieval.vector import chunk_snippet

pytest_plugins = ["tests.support.ollama_fixtures"]

HELP = Path(__file__).resolve().parents[1] / "fixtures" / "real_vaults" / "help"
APPEARANCE = (HELP / "Appearance.md").read_text()
MARKUP = re.compile(r"\[!|\*\*|\[\[|\]\]|^#+ |^> |\| |`", re.MULTILINE)


def _cut(first: int, count: int, word: str) -> tuple[str, list[tuple[int, int]]]:
    """Lines first…first+count-1 of Appearance.md as a retriever cuts them, `word` highlighted."""
    snippet = "\n".join(APPEARANCE.split("\n")[first - 1 : first - 1 + count])
    return snippet, [(m.start(), m.end()) for m in re.finditer(word, snippet, re.IGNORECASE)]


def _line(text: str) -> int:
    return APPEARANCE.split("\n").index(text) + 1


def _marked(reading) -> list[str]:
    return [reading.text[s:e] for s, e in reading.highlights]


def test_a_callout_reads_as_words_under_its_heading_path_with_the_match_marked():
    first = _line("#### Readable line length")
    snippet, highlights = _cut(first, 5, "readable")
    reading = snippet_reading(snippet, highlights, line=first, body=APPEARANCE, title="Appearance")
    assert reading.headings == ["Editor", "Readable line length"]  # the title's own heading is the title
    assert reading.text.startswith("Readable line length\nWhen Readable line length is on, a note's text")
    assert "See Properties for notes" in reading.text and "with cssclasses." in reading.text
    assert not MARKUP.search(reading.text), reading.text
    assert _marked(reading) == ["Readable", "Readable"] and not reading.code


def test_a_table_reads_as_its_cells_and_a_task_list_as_boxes():
    first = _line("| Setting | Default | Where |")
    snippet, highlights = _cut(first, 5, "line numbers")
    reading = snippet_reading(snippet, highlights, line=first, body=APPEARANCE, title="Appearance")
    assert reading.text.split("\n") == [
        "Setting · Default · Where",
        "Readable line length · on · Editor",
        "Show line numbers · off · Editor",
        "Fold headings · on · Editor",
    ]
    assert _marked(reading) == ["line numbers"]
    first = _line("- [ ] Choose a base colour scheme")
    snippet, highlights = _cut(first, 3, "readable")
    reading = snippet_reading(snippet, highlights, line=first, body=APPEARANCE, title="Appearance")
    assert reading.headings == ["Checklist for a new vault"]
    assert reading.text.split("\n") == [
        "☐ Choose a base colour scheme",
        "☑ Turn on readable line length",
        "☐ Install a monospace font for code",
    ]


def test_code_is_shown_as_code_only_when_the_match_is_in_it():
    first = _line("Put this in a snippet to widen the readable line length on a large screen:")
    snippet, _ = _cut(first, 7, "x")
    in_code = [(m.start(), m.end()) for m in re.finditer("max-width", snippet)]
    reading = snippet_reading(snippet, in_code, line=first, body=APPEARANCE, title="Appearance")
    assert reading.code and reading.headings == ["Custom CSS"]
    assert reading.text == ".markdown-source-view.mod-cm6.is-readable-line-width .cm-sizer {\n  max-width: 900px;\n}"
    assert _marked(reading) == ["max-width"]
    in_words = [(m.start(), m.end()) for m in re.finditer("widen", snippet)]
    reading = snippet_reading(snippet, in_words, line=first, body=APPEARANCE, title="Appearance")
    assert not reading.code and "{" not in reading.text and "```" not in reading.text
    assert reading.text == "Put this in a snippet to widen the readable line length on a large screen:"
    # a snippet starting inside a fence (its opening line above the snippet) is still code
    inside = _line("  max-width: 900px;")
    snippet, highlights = _cut(inside, 3, "max-width")
    reading = snippet_reading(snippet, highlights, line=inside, body=APPEARANCE, title="Appearance")
    assert reading.code and reading.text.startswith("  max-width")


def test_a_snippet_of_frontmatter_reads_from_the_first_words_after_it():
    snippet, highlights = _cut(1, 6, "look")
    reading = snippet_reading(snippet, highlights, line=1, body=APPEARANCE, title="Appearance")
    assert reading.text.startswith("Change the look of the app under Settings → Appearance.")
    assert "aliases" not in reading.text and "cssclasses" not in reading.text and reading.headings == []


def test_links_embeds_and_escapes_read_as_their_words_and_nothing_is_markup():
    reading = snippet_reading(
        "See [[Settings#Community themes|the theme browser]], [[Properties#Types]], ![[shot.png|300]], "
        "[the docs](https://help.obsidian.md) and <b>bold</b> \\*stars\\* ~~gone~~ ==kept== %%secret%% ^abc12",
        [],
    )
    assert reading.text == "See the theme browser, Properties › Types, , the docs and bold *stars* gone kept"
    assert (
        snippet_reading("refer to [[#Supported types]] or [[#^block1]]", []).text
        == "refer to Supported types or block1"
    )
    # a fence indented in a list item is code too
    listed = "- Add this:\n    ```js\n    formula()\n    ```\n- next"
    assert snippet_reading(listed, [], line=1, body=listed).text == "Add this:\nnext"
    # a fence in a callout is code too; a table cell's escaped bar still names a link's words
    quoted = "> [!example]\n> ```md\n> code here\n> ```\n\nAfter"
    assert snippet_reading(quoted, [], line=1, body=quoted).text == "Example\nAfter"
    cells = "| [[Basic formatting syntax\\|Markdown syntax]] | ![[Engelbart.jpg\\|200]] | x |"
    assert snippet_reading(cells, []).text == "Markdown syntax · · x"
    # what a code span holds is its words as written, markup-like or not
    assert snippet_reading("Type `[[` or `<br>` and ``a ` b``", []).text == "Type [[ or <br> and a ` b"
    # a cut through a pair leaves no half of it
    assert snippet_reading("…end of **bold", []).text == "…end of bold"


def test_note_text_is_kept_as_text_for_the_face_to_escape():
    source = "<script>alert(1)</script> 1 < 2 & <img src=x onerror=alert(2)>"
    reading = snippet_reading(source, [(source.index(" 1 ") + 1, source.index(" 1 ") + 2)])
    assert "<script>" not in reading.text and "onerror" not in reading.text
    assert reading.text == "alert(1) 1 < 2 &" and _marked(reading) == ["1"]


def test_a_long_reading_is_cut_at_words_around_the_match():
    words = " ".join(f"word{i}" for i in range(200)) + " needle " + " ".join(f"tail{i}" for i in range(200))
    start = words.index("needle")
    reading = snippet_reading(words, [(start, start + 6)])
    assert reading.text.startswith("…word") and reading.text.endswith("…") and len(reading.text) <= 330
    assert _marked(reading) == ["needle"]
    assert all(re.fullmatch(r"…?(word|tail)\d+…?|needle", w) for w in reading.text.split()), reading.text


def test_a_semantic_snippet_does_not_start_in_the_frontmatter():
    end = APPEARANCE.index("# Appearance")
    snippet, line, _ = chunk_snippet(APPEARANCE, 0, end + 200, {"look"})
    assert line == _line("# Appearance") and not snippet.startswith("---")


# --- through the faces --------------------------------------------------------------------------------


@pytest.fixture
def help_vault(db, tmp_path):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    folder = tmp_path / "help"
    shutil.copytree(HELP, folder)
    collection = collection_create(path=folder, name="help")
    collection_index(collection)
    return collection


@pytest.mark.django_db
def test_keyword_results_carry_the_reading_and_keep_the_source(help_vault):
    from search import search_run

    response = search_run(SearchRequest(query="readable", mode=Mode.KEYWORD, access=Access.local_user()))
    assert response.results
    for result in response.results:
        assert result.text and not MARKUP.search(result.text), result.text
        assert result.text_highlights, result.text
        assert all(result.text[s:e].lower().startswith("readable") for s, e in result.text_highlights)
    top = next(r for r in response.results if r.path == "Appearance.md")
    assert top.headings and top.headings[0] in {"Editor", "Checklist for a new vault", "Custom CSS", "Themes"}
    assert top.snippet != top.text  # the source stays for the faces that want it
    data = top.as_dict()
    assert data["text"] == top.text and data["headings"] == top.headings
    assert data["text_highlights"] == [list(h) for h in top.text_highlights]


@pytest.mark.django_db
def test_semantic_results_never_show_frontmatter(help_vault, ollama, settings):
    from indexing.services.embedding import embed_pending
    from search import search_run

    settings.PMD_CHUNK_TOKENS = 40
    embed_pending()
    response = search_run(
        SearchRequest(query="look and feel themes aliases", mode=Mode.VECTOR, access=Access.local_user(), limit=10)
    )
    assert response.results
    for result in response.results:
        assert result.text and not result.text.startswith(("---", "aliases:", "tags:")), result.text
        assert "cssclasses:" not in result.text and "aliases:" not in result.text and "- Themes" not in result.text


@pytest.mark.django_db
def test_the_cli_prints_the_reading_and_the_api_and_mcp_carry_it(help_vault, run_cli):
    code, out, _ = run_cli("search", "readable line length", "--collection", "help")
    assert code == 0
    assert "in: Editor › Readable line length" in out
    assert "[!note]" not in out and "**" not in out and "####" not in out and "| " not in out
    code, out, _ = run_cli("search", "readable line length", "--collection", "help", "--json")
    results = json.loads(out)["results"] if out.lstrip().startswith("{") else json.loads(out)
    assert results and all(r["text"] and "headings" in r and r["snippet"] for r in results)
    from search.schemas import ResultBrief, ResultOut

    assert {"text", "headings", "text_highlights", "code"} <= set(ResultOut.model_fields)
    assert {"text", "headings", "snippet"} <= set(ResultBrief.model_fields)


@pytest.mark.django_db
def test_the_web_results_escape_what_the_note_writes(tmp_path, member_client):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    folder = tmp_path / "tricky"
    folder.mkdir()
    (folder / "Tricks.md").write_text(
        "# Tricks\n\nThe zebrafish tag `<img src=x onerror=alert(1)>` and <b onclick=alert(2)>zebrafish</b> & more.\n"
    )
    collection_index(collection_create(path=folder, name="tricky"))
    html = member_client.get("/", {"q": "zebrafish"}).content.decode()
    card = re.search(r'<p class="snippet">(.*?)</p>', html, re.S)[1]
    assert "&lt;img src=x onerror=alert(1)&gt;" in card and "<img" not in card and "onclick" not in card
    assert card.count("<mark>zebrafish</mark>") == 2 and "&amp; more." in card


@pytest.mark.parametrize(
    ("sentence", "read"),
    [
        (
            "Das [Open-Source-Repository](https://github.com/x/y) hat [[Importprogramm|Importprogramm-Plugins]].",
            "Das Open-Source-Repository hat Importprogramm-Plugins.",
        ),
        (
            "…pository](https://github.com/x/y) und [[Import|Import-Plugins]] sind da.",
            "…pository und Import-Plugins sind da.",
        ),
        ("…programm|Importprogramm-Plugins]] sind da.", "…Importprogramm-Plugins sind da."),
        (
            "Siehe [[Import]] und das [Open-Source-Repository](https://github.com/x…",
            "Siehe Import und das Open-Source-Repository…",
        ),
        ("Siehe [[Importprogramm|Import…", "Siehe Import…"),
    ],
)
def test_a_link_sentence_reads_without_markup_even_where_its_cut_splits_a_link(sentence, read):
    from indexing.snippets import sentence_reading

    assert sentence_reading(sentence) == read
