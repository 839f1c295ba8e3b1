"""What every search mode returns, and every formatter/adapter consumes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from indexing.convert import format_of
from search.request import mode_verb

if TYPE_CHECKING:
    from search.filters import SearchFilters


@dataclass
class SearchResult:
    docid: str
    collection: str
    path: str
    title: str
    score: float  # 0..1, comparable within one result list
    line: int = 1  # 1-based line of the best match in the document
    snippet: str = ""
    highlights: list[tuple[int, int]] = field(default_factory=list)  # [start, end) offsets into snippet
    # The snippet as a person reads it (indexing.snippets): words without markup, the match offsets
    # moved with them, the headings it sits under, and whether it is code (a match in a code block).
    text: str = ""
    text_highlights: list[tuple[int, int]] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    code: bool = False
    context: list[str] = field(default_factory=list)  # path contexts, general → specific
    body: str | None = None  # the full document with --full
    scores: dict = field(default_factory=dict)  # component scores (raw bm25, cosine, rrf, rerank...)
    explain: dict | None = None
    # The note's date (ISO 8601, UTC) and where it came from (frontmatter:date, frontmatter:created,
    # filename, mtime): the date that date filters and --sort date used.
    date: str | None = None
    date_source: str = ""
    type: str = ""  # the file's format (indexing.convert.format_of): markdown, pdf, docx, …
    # Where in a converted file the match is ("page 12") and its URI fragment ("page=12"): `where_found`.
    location: str = ""
    anchor: str = ""

    def __post_init__(self) -> None:
        self.type = self.type or format_of(self.path)

    @property
    def uri(self) -> str:
        return f"pmd://{self.collection}/{self.path}"

    @property
    def location_uri(self) -> str:
        """`pmd://c/report.pdf#page=12` for a match on a page (slide, sheet); else "" ."""
        return f"{self.uri}#{self.anchor}" if self.anchor else ""

    def as_dict(self) -> dict:
        data = asdict(self)
        data["uri"] = self.uri
        data["location_uri"] = self.location_uri
        data.pop("anchor")
        data["highlights"] = [list(h) for h in self.highlights]
        data["text_highlights"] = [list(h) for h in self.text_highlights]
        if data["explain"] is None:
            data.pop("explain")
        if data["body"] is None:
            data.pop("body")
        return data


@dataclass
class SearchResponse:
    query: str
    mode: str  # a search.request.Mode; answers call it by its CLI verb (`mode_verb`)
    results: list[SearchResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # stage → milliseconds
    filters: SearchFilters | None = None  # what was applied (the query's and the caller's)
    sort: str = "relevance"
    corrected_query: str | None = None  # typos corrected: the query searched instead of `query`
    # Its entry in the search log, for the faces that note the result opened (API, web): not part of
    # the answer's own JSON, which is the same bytes in-process and through the server.
    search_id: int | None = None
    time_words: str | None = None  # the words read as a date filter ("last week"): removable
    # Vector search: the cosine of two unrelated passages in this index (fusion measures a list's
    # commitment above it); not part of the answer.
    chance_score: float | None = None

    def as_dict(self) -> dict:
        return {
            "query": self.query,
            "mode": mode_verb(self.mode),
            "results": [r.as_dict() for r in self.results],
            "warnings": list(self.warnings),
            "timings_ms": {k: round(v, 2) for k, v in self.timings.items()},
            "filters": self.filters.as_dict() if self.filters is not None and not self.filters.empty else None,
            "sort": self.sort,
            "corrected_query": self.corrected_query,
            "time_words": self.time_words,
        }
