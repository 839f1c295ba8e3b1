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


class NoteChangeResult(BaseModel):
    action: str = Field(description="note.create, note.replace, note.edit, note.move, note.delete or note.restore")
    collection: str
    path: str
    uri: str
    docid: str = Field(description="the note's docid now (empty once deleted)")
    old_hash: str = Field(description="the hash of the version replaced")
    new_hash: str = Field(description="the hash to name in the next edit")
    old_path: str = ""
    trash_path: str = Field("", description="where a deleted note is kept: pmd_restore_note brings it back")
    commit: str = Field("", description="the git commit recording the change, in a collection under git")
    indexed: bool = Field(description="the note is in the keyword index now")
    warnings: list[str] = Field(default_factory=list)


class ActivityItem(BaseModel):
    at: str
    collection: str
    path: str
    uri: str
    action: str
    by: str
    via: str = Field(description="pmd (a write tool or the API), disk (an editor, a sync) or commit (git)")
    old_path: str = ""
    detail: str = ""


class ActivityResult(BaseModel):
    since: str
    changes: list[ActivityItem]
