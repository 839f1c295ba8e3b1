"""The one rendering registry (search.formatters): every (result type, format) pair renders a sample,
and the XML of search and history comes from the same writer."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from indexing.errors import UnknownFormat
from search import formatters
from search.formatters import RENDERERS, render
from search.results import SearchResponse, SearchResult
from search.retrieval.history import ChangedFile, CommitHit, HistoryResponse
from search.schemas import (
    ChangedFileBrief,
    CommitBrief,
    HistoryBrief,
    LinkBrief,
    LinksBrief,
    MultiGetBrief,
    RelatedBrief,
    RelatedNoteBrief,
    ResultBrief,
    SearchBrief,
)


def _doc(n: int):
    return SimpleNamespace(pk=n, docid=f"abc{n}", uri=f"pmd://notes/n{n}.md", title=f"Note [{n}]", path=f"n{n}.md")


def _links():
    row = SimpleNamespace(kind="wikilink", written="[[N2]]", line=3, context="see [[N2]]", text="see N2", other=_doc(2))
    gone = SimpleNamespace(kind="wikilink", written="[[Gone]]", line=4, context="", text="", other=None)
    return SimpleNamespace(
        document=_doc(1),
        links=[row, gone],
        backlinks=[row],
        links_total=3,
        backlinks_total=1,
        as_dict=lambda: {"docid": "abc1"},
    )


def _related():
    note = SimpleNamespace(document=_doc(2), score=0.81, reasons=["links to it", "similar text (0.81)"])
    return SimpleNamespace(
        document=_doc(1), results=[note], warnings=["not embedded"], as_dict=lambda: {"docid": "abc1"}
    )


def _search():
    hit = SearchResult(
        docid="abc123",
        collection="notes",
        path="a.md",
        title="Alpha",
        score=0.8,
        line=2,
        snippet="alpha beta",
        highlights=[(0, 5)],
        context=["Team"],
        explain={
            "rank": 1,
            "final": 0.8,
            "lists": {"keyword": {"rank": 1, "score": 2.0, "z": 1.0}},
            "fusion": {"w_keyword": 0.5, "w_vector": 0.5},
            "z": {"keyword": 1.0},
            "fused": 0.5,
            "fusion_rank": 1,
            "retrieval": 0.8,
            "rerank": None,
            "plan": {"source": "model", "variants": []},
        },
    )
    return SearchResponse(query="alpha", mode="keyword", results=[hit], timings={"keyword": 1.5})


def _history():
    hit = CommitHit(
        collection="notes",
        sha="a" * 40,
        title="Fix <it>",
        message="Fix <it>\n\nbody",
        author="Ana",
        email="ana@x",
        date="2025-01-02T03:04:05+00:00",
        score=0.5,
        snippet="fix it",
        files=[ChangedFile("M", "a.md", docid="abc123"), ChangedFile("R", "b.md", old_path="c.md")],
        diff="+x\n-y",
        diff_truncated=False,
    )
    return HistoryResponse(query="fix", mode="keyword", results=[hit])


def _answer():
    passage = SimpleNamespace(number=1, source="pmd://notes/a.md:2", title="Alpha")
    return SimpleNamespace(
        text="Alpha says beta [1].",
        nearest=[],
        passages=[passage],
        cited={1},
        flags=[],
        timings={"first_token": 120.0, "total": 900.0},
        model="qwen3:1.7b",
        tokens_in=300,
        tokens_out=20,
        state="answered",
        as_dict=lambda: {"text": "Alpha says beta [1]."},
    )


def _fields():
    value = SimpleNamespace(value="draft", notes=2)
    return SimpleNamespace(fields=[SimpleNamespace(key="status", notes=3, types=["text"], values=[value])])


SAMPLES = {
    "search": _search,
    "explain": _search,
    "history": _history,
    "links": _links,
    "backlinks": _links,
    "related": _related,
    "ask": _answer,
}
MCP_SAMPLES = {
    "search": lambda: SearchBrief(
        query="alpha",
        mode="search",
        results=[
            ResultBrief(docid="abc123", uri="pmd://notes/a.md", line=2, score=0.8, title="Alpha", snippet="alpha beta")
        ],
    ),
    "history": lambda: HistoryBrief(
        query="fix",
        mode="keyword",
        results=[
            CommitBrief(
                collection="notes",
                sha="a" * 40,
                title="Fix",
                message="Fix",
                author="Ana",
                email="ana@x",
                date="2025-01-02",
                score=0.5,
                files=[ChangedFileBrief(status="M", path="a.md", docid="abc123")],
            )
        ],
    ),
    "links": lambda: LinksBrief(
        docid="abc1",
        uri="pmd://notes/n1.md",
        title="N1",
        links_total=1,
        links=[
            LinkBrief(
                kind="wikilink",
                link="[[N2]]",
                line=3,
                context="see",
                resolved=True,
                docid="abc2",
                uri="pmd://notes/n2.md",
            )
        ],
    ),
    "related": lambda: RelatedBrief(
        docid="abc1",
        uri="pmd://notes/n1.md",
        title="N1",
        results=[
            RelatedNoteBrief(docid="abc2", uri="pmd://notes/n2.md", title="N2", score=0.8, reasons=["links to it"])
        ],
    ),
    "documents": lambda: MultiGetBrief(documents=[], missing=["x.md"]),
    "document": lambda: SimpleNamespace(
        docid="abc1", uri="pmd://notes/n1.md", from_line=1, to_line=1, total_lines=2, truncated=True, text="hello"
    ),
    "ask": _answer,
    "fields": _fields,
    "status": lambda: SimpleNamespace(
        documents=1,
        collections=[SimpleNamespace(uri="pmd://notes/", documents=1)],
        embeddings=SimpleNamespace(model="m", embedded=1, pending=0, hint=None),
    ),
}


@pytest.mark.parametrize(("kind", "fmt"), sorted(RENDERERS))
def test_every_registered_pair_renders_a_sample(kind, fmt):
    sample = (MCP_SAMPLES if fmt == "mcp" else SAMPLES)[kind]()
    text = render(kind, fmt, sample)
    assert isinstance(text, str) and text.strip()
    if fmt == "xml":
        ET.fromstring(text.encode())


def test_the_registry_covers_each_face_type():
    kinds = {kind for kind, _ in RENDERERS}
    assert {"search", "history", "links", "backlinks", "related", "explain"} <= kinds
    for kind in ("search", "history"):
        assert {(kind, fmt) for fmt in formatters.FORMATS + ("mcp",)} <= set(RENDERERS)


def test_unknown_format_is_a_typed_error():
    with pytest.raises(UnknownFormat, match="choose from"):
        render("history", "yaml", _history())


def test_search_and_history_xml_come_from_the_one_writer(monkeypatch):
    made = []
    real = formatters.XmlWriter

    class Counting(real):
        def __init__(self, **options):
            made.append(options)
            super().__init__(**options)

    monkeypatch.setattr(formatters, "XmlWriter", Counting)
    import search.formatters.history as history_module
    import search.formatters.search as search_module

    monkeypatch.setattr(history_module, "XmlWriter", Counting)
    monkeypatch.setattr(search_module, "XmlWriter", Counting)
    render("search", "xml", _search())
    render("history", "xml", _history())
    assert made == [{"declaration": True}, {}]


def test_history_xml_drops_forbidden_controls_like_search_xml():
    response = _history()
    response.results[0].title = "bad\x01title"
    root = ET.fromstring(render("history", "xml", response, diff=True).encode())
    assert root.find("commit/title").text == "badtitle"
    assert root.find("commit/diff").get("truncated") == "false"


def test_console_markup_prints_values_as_written():
    """`[draft]` in a title, and a control character, reach the console as text (not style, not obeyed)."""
    from rich.console import Console

    links = _links()
    links.document.title = "[bold]x\x1b[2J"
    buf = io.StringIO()
    Console(file=buf, no_color=True, emoji=False, soft_wrap=True).print(render("links", "cli", links), end="")
    assert "[bold]x" in buf.getvalue()


def test_a_line_ending_in_a_backslash_prints_one_backslash():
    """A snippet or link-context line is printed as written, as rich prints text that is not markup."""
    from rich.console import Console

    history = _history()
    history.results[0].snippet = r"C:\notes\ [draft]" + "\\"
    buf = io.StringIO()
    Console(file=buf, no_color=True, emoji=False, soft_wrap=True).print(render("history", "cli", history), end="")
    assert "    C:\\notes\\ [draft]\\\n" in buf.getvalue()
