"""/api/notes: write, edit, move, delete and restore notes, and what changed recently; each one call
of indexing.services.notes (the same as MCP's write tools), which decides who may write where."""

from typing import Any, Literal

from ninja import Field, Query, Router, Schema, Status

from indexing.noteedits import NoteEdit
from indexing.selectors import activity_since, notes_activity
from indexing.services.notes import note_delete, note_edit, note_move_to, note_restore, note_write
from pmd_site.api.schemas import BodyIn, ErrorOut

router = Router(tags=["notes"])

ERRORS = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 413: ErrorOut, 422: ErrorOut}


class NoteChangeOut(Schema):
    action: str
    collection: str
    path: str
    uri: str
    docid: str
    old_hash: str
    new_hash: str = Field(..., description="the hash to send as base_hash in the next edit")
    old_path: str = ""
    trash_path: str = Field("", description="where a deleted note is kept (POST /api/notes/restore)")
    commit: str = Field("", description="the git commit recording it, in a collection under git")
    indexed: bool
    warnings: list[str] = Field(default_factory=list)


class NoteIn(BodyIn):
    collection: str = Field(..., min_length=1, max_length=200)
    path: str = Field(..., min_length=1, max_length=4096)
    content: str
    replace: bool = Field(False, description="replace an existing note")
    base_hash: str | None = Field(None, max_length=64, description="with replace: the hash of the version read")
    message: str = Field("", max_length=2000, description="the commit message in a collection under git")


@router.post("", response={201: NoteChangeOut, **ERRORS}, summary="Write a note (write scope, a writable collection)")
def notes_write(request, body: NoteIn):
    change = note_write(
        access=request.auth,
        collection=body.collection,
        path=body.path,
        content=body.content,
        replace=body.replace,
        base_hash=body.base_hash,
        message=body.message,
    )
    return Status(201, change.as_dict())


class EditIn(BodyIn):
    note: str = Field(..., min_length=1, max_length=4300, description="pmd://collection/path or #docid")
    base_hash: str = Field(..., min_length=6, max_length=64, description="the hash of the version read")
    operation: Literal["replace_section", "append", "prepend", "set_field", "remove_field", "replace_text"]
    heading: str = Field("", max_length=1000)
    content: str = ""
    field: str = Field("", max_length=200)
    value: Any = None
    old_text: str = ""
    new_text: str = ""
    expected_count: int = Field(1, ge=1, le=10000)
    message: str = Field("", max_length=2000)


@router.post("/edit", response={200: NoteChangeOut, **ERRORS}, summary="Edit part of a note (409: it changed)")
def notes_edit(request, body: EditIn):
    edit = NoteEdit(
        operation=body.operation,
        heading=body.heading,
        content=body.content,
        field=body.field,
        value=body.value,
        old_text=body.old_text,
        new_text=body.new_text,
        expected_count=body.expected_count,
    )
    return note_edit(
        access=request.auth, note=body.note, base_hash=body.base_hash, edit=edit, message=body.message
    ).as_dict()


class MoveIn(BodyIn):
    collection: str = Field(..., min_length=1, max_length=200)
    path: str = Field(..., min_length=1, max_length=4096)
    new_path: str = Field(..., min_length=1, max_length=4096)
    base_hash: str | None = Field(None, max_length=64)
    message: str = Field("", max_length=2000)


@router.post("/move", response={200: NoteChangeOut, **ERRORS}, summary="Move or rename a note")
def notes_move(request, body: MoveIn):
    return note_move_to(
        access=request.auth,
        collection=body.collection,
        path=body.path,
        new_path=body.new_path,
        base_hash=body.base_hash,
        message=body.message,
    ).as_dict()


class DeleteIn(BodyIn):
    collection: str = Field(..., min_length=1, max_length=200)
    path: str = Field(..., min_length=1, max_length=4096)
    base_hash: str | None = Field(None, max_length=64)
    message: str = Field("", max_length=2000)


@router.post("/delete", response={200: NoteChangeOut, **ERRORS}, summary="Move a note to the collection's trash")
def notes_delete(request, body: DeleteIn):
    return note_delete(
        access=request.auth,
        collection=body.collection,
        path=body.path,
        base_hash=body.base_hash,
        message=body.message,
    ).as_dict()


class RestoreIn(BodyIn):
    collection: str = Field(..., min_length=1, max_length=200)
    trash_path: str = Field(..., min_length=1, max_length=4096, description="e.g. .trash/meetings/a.md")
    path: str | None = Field(None, max_length=4096, description="where to put it; default: where it was")
    message: str = Field("", max_length=2000)


@router.post("/restore", response={200: NoteChangeOut, **ERRORS}, summary="Bring a deleted note back")
def notes_restore(request, body: RestoreIn):
    return note_restore(
        access=request.auth,
        collection=body.collection,
        trash_path=body.trash_path,
        path=body.path,
        message=body.message,
    ).as_dict()


class ActivityOut(Schema):
    at: str
    collection: str
    path: str
    uri: str
    action: str
    by: str
    via: str = Field(..., description="pmd, disk or commit")
    old_path: str = ""
    detail: str = ""


class ActivityListOut(Schema):
    since: str
    changes: list[ActivityOut]


@router.get(
    "/activity", response={200: ActivityListOut, 400: ErrorOut}, summary="What changed in the notes since a time"
)
def notes_recent_activity(
    request,
    since: str = "1d",
    collection: list[str] = Query(default_factory=list),
    limit: int = Query(50, ge=1, le=200),
):
    start = activity_since(since)
    found = notes_activity(access=request.auth, since=start, limit=limit, collections=collection or None)
    return {"since": start.isoformat(), "changes": [a.as_dict() for a in found]}
