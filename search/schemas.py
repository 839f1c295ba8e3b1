"""The answers' shapes, declared once for every face: the API answers with the full models (django-ninja
takes pydantic models as they are), the MCP tools with their briefs, which pick fields of the same
models (`brief`), so a field is described in one place.

The records the services build (search.results, search.retrieval.history, indexing.links,
search.retrieval.related, indexing.selectors) give these shapes with their `as_dict()`.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import PydanticCustomError


def brief(
    model: type[BaseModel],
    name: str,
    fields: tuple[str, ...],
    *,
    doc: str | None = None,
    types: dict[str, Any] | None = None,
    descriptions: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """A model holding `fields` of `model`, in that order: what an MCP tool returns where the API
    answers with all of `model`. `types` swaps a field's type (a list of another brief),
    `descriptions` says what an agent should do with a field, `defaults` makes one optional."""
    chosen = {}
    for field in fields:
        info = copy.copy(model.model_fields[field])
        if descriptions and field in descriptions:
            info.description = descriptions[field]
        if defaults and field in defaults:
            info.default = defaults[field]
        chosen[field] = ((types or {}).get(field, info.annotation), info)
    return create_model(name, __doc__=doc or model.__doc__, **chosen)


# --- inputs ---------------------------------------------------------------------------------------


def known_field_names(model: type[BaseModel]) -> list[str]:
    """The names a client may write for `model`'s fields: each field's name and its alias."""
    names = []
    for name, info in model.model_fields.items():
        names.append(name)
        for alias in (info.alias, info.validation_alias):
            choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
            names.extend(c for c in choices if isinstance(c, str) and c not in names)
    return names


def nearest_field_hint(field: str, known: list[str]) -> str:
    """` (did you mean 'collections'?)` for a misspelt field, or nothing when no known name is near."""
    nearest = difflib.get_close_matches(field, known, n=1, cutoff=0.6)
    return f" (did you mean '{nearest[0]}'?)" if nearest else ""


class StrictIn(BaseModel):
    """An input that refuses a field it does not know, naming it and the nearest known one: a
    misspelt option silently ignored would answer a different question than the one asked."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = known_field_names(cls)
            for field in data:
                if field not in known:
                    hint = nearest_field_hint(str(field), known)
                    raise PydanticCustomError(
                        "unknown_field", "unknown field '{field}'{hint}", {"field": field, "hint": hint}
                    )
        return data


FieldValue = str | int | float | bool
FilterValues = str | list[str]


class FiltersIn(StrictIn):
    """Filters over the notes' structure (the query text may hold them too: `tag:db after:2025-01`)."""

    tags: FilterValues | None = Field(None, description="notes with any of these tags")
    exclude_tags: FilterValues | None = Field(None, description="leave out notes with any of these tags")
    path: FilterValues | None = Field(None, description="path globs inside the collection (meetings/**): any")
    exclude_path: FilterValues | None = Field(None, description="leave out paths matching any of these globs")
    after: str | None = Field(
        None, max_length=100, description="dated on or after: 2025-01-01, 2025-06, 'last week', 3d"
    )
    before: str | None = Field(None, max_length=100, description="dated before")
    fields: dict[str, FieldValue | list[FieldValue] | dict[str, FieldValue]] | None = Field(
        None,
        description='frontmatter values: {"status": "draft", "author": ["ana", "bo"]} (lists: any of); '
        'ranges on numbers and dates: {"priority": {">=": 2}, "date": {">=": "2025-01", "<=": "2025-03"}}',
    )
    exclude_fields: dict[str, FieldValue | list[FieldValue] | dict[str, FieldValue]] | None = Field(
        None, description="leave out notes with these frontmatter values (or in these ranges)"
    )
    has: FilterValues | None = Field(None, description="notes whose frontmatter has these keys (any value)")
    exclude_has: FilterValues | None = Field(None, description="notes whose frontmatter has none of these keys")
    any_of: list[FiltersIn] | None = Field(
        None, description='alternatives, one of which must hold: [{"tags": "db"}, {"fields": {"status": "draft"}}]'
    )


class SubSearch(StrictIn):
    """One typed search of a deep search: you write the expansions instead of the LLM."""

    type: Literal["lex", "vec", "hyde"] = Field(
        description="lex: keyword query; vec: a natural-language query for vectors; "
        "hyde: a short hypothetical passage that would answer the question"
    )
    query: str = Field(min_length=1, max_length=2000)


# --- search (search.results) ----------------------------------------------------------------------


class ResultOut(BaseModel):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    score: float
    line: int
    snippet: str = Field(..., description="the matching lines as written in the note (markdown)")
    highlights: list[list[int]] = []
    text: str = Field("", description="the snippet as read: its words without markup or frontmatter")
    text_highlights: list[list[int]] = Field([], description="[start, end) offsets of the matches into `text`")
    headings: list[str] = Field([], description="the headings the snippet sits under, outermost first")
    code: bool = Field(False, description="`text` is code: a match is in a code block")
    context: list[str] = []
    body: str | None = None
    scores: dict[str, Any] = {}
    explain: dict[str, Any] | None = None
    date: str | None = Field(None, description="the note's date (ISO 8601, UTC), used by date filters and sort")
    date_source: str = Field(
        "", description="where the date came from: frontmatter:date, frontmatter:created, filename or mtime"
    )
    type: str = Field("markdown", description="the file's format: markdown, pdf, docx, pptx, xlsx, html, epub, text")
    location: str = Field(
        "", description="where in the original the match is: page 12, slide 3, sheet Budget (converted files)"
    )
    location_uri: str = Field("", description="the uri with the location: pmd://c/report.pdf#page=12")


class SearchOut(BaseModel):
    query: str
    mode: str
    results: list[ResultOut]
    warnings: list[str] = []
    timings_ms: dict[str, float] = {}
    filters: dict[str, Any] | None = Field(None, description="the filters applied (the query's and the body's)")
    sort: str = Field("relevance", description="the order of the results: relevance or date")
    corrected_query: str | None = Field(
        None,
        description="typos corrected: the query searched instead of `query` "
        "(search `query` as written with correct=false)",
    )
    time_words: str | None = Field(
        None,
        description='words of the query read as a date filter ("last week"); time_words=false searches them as words',
    )
    search_id: int | None = Field(
        None, description="this search in the search log: POST /api/searches/{id}/opened with the result opened"
    )


ResultBrief = brief(
    ResultOut,
    "ResultBrief",
    (
        "docid",
        "uri",
        "line",
        "score",
        "title",
        "headings",
        "text",
        "snippet",
        "context",
        "date",
        "date_source",
        "type",
        "location",
    ),
    descriptions={
        "docid": "#docid: pass to pmd_get",
        "uri": "pmd://collection/path",
        "line": "line of the best match (1-based)",
        "score": "0..1, comparable within one result list",
        "context": "descriptions of the folder, general → specific",
        "location": "page, slide or sheet of a converted file: pass `uri:p12` to pmd_get for that page",
    },
)
SearchBrief = brief(
    SearchOut,
    "SearchBrief",
    ("query", "mode", "results", "warnings", "filters", "corrected_query", "time_words"),
    types={"results": list[ResultBrief]},
    descriptions={"filters": "the filters applied (the query's and the `filters` argument's)"},
)


# --- ask (search.pipeline.answer) ------------------------------------------------------------------


class PassageOut(BaseModel):
    number: int = Field(..., description="what [n] in the answer stands for")
    collection: str
    path: str
    title: str
    line: int = Field(..., description="the line the passage was found at (1-based)")
    score: float
    uri: str
    source: str = Field(..., description="pmd://collection/path:line")
    tokens: int
    text: str | None = Field(None, description="the passage as the model read it")


class AskOut(BaseModel):
    id: int | None = None
    conversation: str = Field(..., description="send it back as `conversation` to ask a follow-up")
    question: str
    answer: str = Field(..., description="the answer, only valid [n] citations left in it")
    state: str = Field(
        ..., description="answered, refused (the notes do not cover it), cancelled, cut_short (the deadline) or failed"
    )
    passages: list[PassageOut]
    cited: list[int]
    flags: list[dict[str, Any]] = Field(
        [], description="what the citation check found: invented_citation, uncited; deadline, model_failed"
    )
    nearest: list[dict[str, Any]] = Field([], description="when refused: the nearest notes")
    model: str
    tokens_in: int
    tokens_out: int
    timings_ms: dict[str, float] = {}


AskBrief = brief(AskOut, "AskBrief", ("conversation", "answer", "state", "passages", "flags", "nearest"))


# --- history (search.retrieval.history) -----------------------------------------------------------


class ChangedFileOut(BaseModel):
    status: str = Field(..., description="A added, M changed, D deleted, R renamed, C copied, T type changed")
    path: str
    old_path: str = Field(..., description="the name before a rename or copy")
    docid: str | None = Field(None, description="the note at that path as it is now, if it still exists")
    uri: str | None = None
    title: str = ""


class CommitOut(BaseModel):
    collection: str
    sha: str
    short: str
    title: str
    message: str
    author: str
    email: str
    date: str
    score: float
    snippet: str
    files: list[ChangedFileOut]
    scores: dict
    diff: str | None = Field(None, description="the diff's first PMD_HISTORY_DIFF_LINES lines (with diff=true)")
    diff_truncated: bool | None = None


class HistoryOut(BaseModel):
    query: str
    mode: str
    results: list[CommitOut]
    warnings: list[str]
    timings_ms: dict[str, float]


ChangedFileBrief = brief(
    ChangedFileOut,
    "ChangedFileBrief",
    ("status", "path", "old_path", "docid"),
    defaults={"old_path": ""},
    descriptions={"docid": "the note at that path now (pass to pmd_get); None if gone"},
)
CommitBrief = brief(
    CommitOut,
    "CommitBrief",
    ("collection", "sha", "title", "message", "author", "email", "date", "score", "files", "diff"),
    types={"files": list[ChangedFileBrief]},
    descriptions={"score": "0..1", "diff": "the diff excerpt (with diff=true)"},
)
HistoryBrief = brief(
    HistoryOut,
    "HistoryBrief",
    ("query", "mode", "results", "warnings"),
    types={"results": list[CommitBrief]},
    defaults={"warnings": []},
)


# --- links (indexing.links) -----------------------------------------------------------------------


class LinkOut(BaseModel):
    kind: str = Field(..., description="wikilink, embed or markdown")
    link: str = Field(..., description="the link as written: [[Note#Heading]], ![[Embed]], (path.md)")
    target: str = Field(..., description="what the link names")
    heading: str
    shown: str = Field(..., description="the text shown instead of the target ([[Note|shown]])")
    line: int = Field(..., description="line of the link in the note that writes it")
    context: str = Field(..., description="the sentence around the link, as written (markdown)")
    text: str = Field("", description="the sentence around the link as read: its words without markup")
    resolved: bool
    docid: str | None = Field(
        None, description="the note at the other end: the target of an outgoing link, the linking note of a backlink"
    )
    uri: str | None = None
    title: str | None = None
    path: str | None = None


class FieldValueOut(BaseModel):
    value: str
    notes: int


class FieldOut(BaseModel):
    key: str = Field(description="the frontmatter key, as the notes spell it: filter with key:value, key:>=2, has:key")
    notes: int = Field(description="notes that have the key")
    types: dict[str, int] = Field(description="number, date, text, boolean, list, object: how many notes each")
    values: list[FieldValueOut] = Field(description="the most frequent values (a list's items one by one)")


class FieldsOut(BaseModel):
    fields: list[FieldOut]


class LinksOut(BaseModel):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    links: list[LinkOut]
    backlinks: list[LinkOut]
    links_total: int
    backlinks_total: int


LinkBrief = brief(
    LinkOut,
    "LinkBrief",
    ("kind", "link", "line", "context", "text", "heading", "resolved", "docid", "uri", "title"),
    doc="One link of pmd_links: from the note asked about (links) or to it (backlinks).",
    defaults={"heading": ""},
    descriptions={"docid": "the note at the other end (pass to pmd_get); None if unresolved"},
)
LinksBrief = brief(
    LinksOut,
    "LinksBrief",
    ("docid", "uri", "title", "links", "backlinks", "links_total", "backlinks_total"),
    types={"links": list[LinkBrief], "backlinks": list[LinkBrief]},
    defaults={"links": [], "backlinks": [], "links_total": 0, "backlinks_total": 0},
    descriptions={"links": "links this note writes, in order", "backlinks": "notes that link to this one"},
)


# --- related notes (search.retrieval.related) -----------------------------------------------------


class RelatedNoteOut(BaseModel):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    score: float = Field(..., description="similarity + 0.5 per link direction + 0.1 per shared tag (at most 0.3)")
    similarity: float | None = Field(
        None, description="cosine similarity to the note's mean vector; None when not among its nearest"
    )
    reasons: list[str] = Field(
        ..., description='"links to it", "linked from it", "shares tags: a, b", "similar text (0.83)"'
    )
    links_to_it: bool
    linked_from_it: bool
    shared_tags: list[str]


class RelatedOut(BaseModel):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    results: list[RelatedNoteOut]
    warnings: list[str]
    copies: int = Field(..., description="other documents with the same content (never listed as related)")


RelatedNoteBrief = brief(
    RelatedNoteOut,
    "RelatedNoteBrief",
    ("docid", "uri", "title", "score", "similarity", "reasons"),
    doc="One note related to the note asked about, with why.",
    descriptions={"docid": "pass to pmd_get"},
)
RelatedBrief = brief(
    RelatedOut,
    "RelatedBrief",
    ("docid", "uri", "title", "results", "warnings", "copies"),
    types={"results": list[RelatedNoteBrief]},
    defaults={"results": [], "warnings": [], "copies": 0},
    descriptions={"results": "best first"},
)


# --- several documents (indexing.selectors.documents_multi_get) -----------------------------------


class MultiGetDocOut(BaseModel):
    docid: str
    uri: str
    title: str
    skipped: str | None
    truncated: bool
    text: str | None


class MultiGetOut(BaseModel):
    documents: list[MultiGetDocOut]
    missing: list[str]
    omitted: int = Field(0, description="matching documents not listed: the total response limit was used up")
    total_bytes: int = Field(0, description="bytes of this answer counted against max_total_bytes")
    max_bytes: int
    max_total_bytes: int = Field(..., description="PMD_MULTI_GET_MAX_TOTAL_BYTES")
    notice: str | None = Field(None, description="what the limits left out, in one line")


MultiGetDocBrief = brief(
    MultiGetDocOut,
    "MultiGetDocBrief",
    ("docid", "uri", "title", "text", "skipped", "truncated"),
    defaults={"skipped": None, "truncated": False},
    descriptions={"text": "None when skipped"},
)
MultiGetBrief = brief(
    MultiGetOut,
    "MultiGetBrief",
    ("documents", "missing", "omitted", "total_bytes", "max_bytes", "max_total_bytes", "notice"),
    types={"documents": list[MultiGetDocBrief]},
    defaults={"missing": [], "max_bytes": 0, "max_total_bytes": 0},
    descriptions={"max_total_bytes": "the most text one answer holds (PMD_MULTI_GET_MAX_TOTAL_BYTES)"},
)
