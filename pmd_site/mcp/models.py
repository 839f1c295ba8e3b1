"""What the tools return that no other face answers with: a page of a document and the index's
status (the answers shared with the API are in search.schemas)."""

from pydantic import BaseModel, Field


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
    server: dict | None = Field(
        None,
        description="staff only: where the database and broker run (host, PMD_HOME, broker URL); null for other users",
    )
