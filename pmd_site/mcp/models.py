"""What the tools return: typed models (clients get them as `structuredContent`)."""

from typing import Literal

from pydantic import BaseModel, Field


class Hit(BaseModel):
    docid: str = Field(description="#docid: pass to pmd_get")
    uri: str = Field(description="pmd://collection/path")
    line: int = Field(description="line of the best match (1-based)")
    score: float = Field(description="0..1, comparable within one result list")
    title: str
    snippet: str
    context: list[str] = Field(default_factory=list, description="descriptions of the folder, general → specific")
    date: str | None = Field(None, description="the note's date (ISO 8601): what date filters and sort use")
    date_source: str = Field("", description="where the date came from: frontmatter:date, frontmatter:created, "
                                             "filename or mtime")


class SearchResult(BaseModel):
    query: str
    mode: str
    results: list[Hit]
    warnings: list[str] = Field(default_factory=list)
    filters: dict | None = Field(None, description="the filters applied (the query's and the `filters` argument's)")


FieldValue = str | int | float | bool


class SearchFiltersIn(BaseModel):
    """Filters over the notes' own structure; the query may hold them too (tag:db after:2025-01-01
    status:draft -tag:old path:meetings/**). Lists are "any of"; different filters must all hold."""

    tags: str | list[str] | None = Field(None, description="notes with any of these tags (frontmatter or #inline)")
    exclude_tags: str | list[str] | None = Field(None, description="leave out notes with any of these tags")
    path: str | list[str] | None = Field(None, description="path globs inside the collection, e.g. meetings/**")
    exclude_path: str | list[str] | None = None
    after: str | None = Field(None, max_length=100,
                              description="the note's date on or after: 2025-01-01, 2025-06, 'last week', 3d")
    before: str | None = Field(None, max_length=100, description="the note's date before this")
    fields: dict[str, FieldValue | list[FieldValue]] | None = Field(
        None, description='frontmatter values, e.g. {"status": "draft", "author": ["ana", "bo"]}')
    exclude_fields: dict[str, FieldValue | list[FieldValue]] | None = None


class SubSearch(BaseModel):
    """One typed search of a deep search: you write the expansions instead of the LLM."""

    type: Literal["lex", "vec", "hyde"] = Field(
        description="lex: keyword query; vec: a natural-language query for vectors; "
        "hyde: a short hypothetical passage that would answer the question")
    query: str = Field(min_length=1, max_length=2000)


class DocumentText(BaseModel):
    docid: str
    uri: str
    title: str
    from_line: int
    to_line: int
    total_lines: int
    truncated: bool = Field(description="more lines follow: call again with from_line=to_line+1")
    context: list[str] = Field(default_factory=list)
    text: str


class MultiDocument(BaseModel):
    docid: str
    uri: str
    title: str
    text: str | None = Field(description="None when skipped")
    skipped: str | None = None
    truncated: bool = False


class MultiGetResult(BaseModel):
    documents: list[MultiDocument]
    missing: list[str] = Field(default_factory=list)
    omitted: int = Field(0, description="matching documents not listed: the total response limit was used up")
    total_bytes: int = 0
    max_bytes: int = 0
    max_total_bytes: int = Field(0, description="the most text one answer holds (PMD_MULTI_GET_MAX_TOTAL_BYTES)")
    notice: str | None = Field(None, description="what the limits left out")


class CollectionInfo(BaseModel):
    name: str
    uri: str
    documents: int
    last_indexed_at: str | None = None


class EmbeddingsInfo(BaseModel):
    model: str = Field(description="the configured embedding model")
    embedded: int = Field(description="indexed texts with vectors of that model")
    pending: int = Field(description="indexed texts without them (semantic and deep search cannot find these)")
    hint: str | None = Field(default=None, description="what to run, when the vectors are missing or mixed")


class StatusResult(BaseModel):
    documents: int
    collections: list[CollectionInfo]
    contexts: int
    embeddings: EmbeddingsInfo
    database_ok: bool
    problems: int = 0
    server: dict | None = Field(None, description="staff only: where the database and broker run "
                                                  "(host, PMD_HOME, broker URL); null for other users")


class LinkInfo(BaseModel):
    """One link of pmd_links: from the note asked about (links) or to it (backlinks)."""

    kind: str = Field(description="wikilink, embed or markdown")
    link: str = Field(description="as written: [[Note#Heading]], ![[Embed]], (path.md)")
    line: int = Field(description="line of the link in the note that writes it")
    context: str = Field(description="the sentence around the link")
    heading: str = ""
    resolved: bool
    docid: str | None = Field(None, description="the note at the other end (pass to pmd_get); None if unresolved")
    uri: str | None = None
    title: str | None = None


class LinksResult(BaseModel):
    docid: str
    uri: str
    title: str
    links: list[LinkInfo] = Field(default_factory=list, description="links this note writes, in order")
    backlinks: list[LinkInfo] = Field(default_factory=list, description="notes that link to this one")
    links_total: int = 0
    backlinks_total: int = 0
