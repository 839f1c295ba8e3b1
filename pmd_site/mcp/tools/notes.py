"""The tools that write notes (pmd_write_note, pmd_edit_note, pmd_move_note, pmd_delete_note,
pmd_restore_note) and pmd_recent_activity: each one call of indexing.services.notes (or the
activity selector), which decides who may write where."""

from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations
from pydantic import Field

from indexing.noteedits import NoteEdit
from indexing.selectors import activity_since, notes_activity
from indexing.services.notes import NoteChange, note_delete, note_edit, note_move_to, note_restore, note_write
from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.models import ActivityItem, ActivityResult, NoteChangeResult
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result

# Writes change the notes (not the world outside pmd); none is idempotent: a second call is refused
# (the note exists, the hash is stale) or changes again.
REPLACES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

COLLECTION = Field(min_length=1, max_length=200, description="a collection you may write in")
PATH = Field(
    min_length=1, max_length=4096, description="the note's path in the collection, e.g. meetings/2026-01-05.md"
)
MESSAGE = Field("", max_length=2000, description="why: the commit message in a collection under git")


def _changed(change: NoteChange) -> Any:
    result = NoteChangeResult(**change.as_dict())
    verb = change.action.removeprefix("note.")
    parts = [f"{verb}: {change.uri}"]
    if change.new_hash:
        parts.append(f"hash {change.new_hash}")
    if change.trash_path:
        parts.append(f"kept in {change.trash_path}")
    if change.commit:
        parts.append(f"commit {change.commit[:12]}")
    return tool_result(result, "; ".join(parts) + "".join(f"\nwarning: {w}" for w in change.warnings))


def register(server: MCPServer) -> None:
    """Add the note-writing tools and pmd_recent_activity to `server`."""

    @server.tool(name="pmd_write_note", title="Write a note", annotations=REPLACES)
    @tool_call
    def pmd_write_note(
        collection: str = COLLECTION,
        path: str = PATH,
        content: str = Field(description="the whole note, markdown"),
        replace: bool = Field(False, description="replace an existing note (give base_hash: the version you read)"),
        base_hash: str | None = Field(None, max_length=64, description="with replace: the hash of the version read"),
        message: str = MESSAGE,
        ctx: Context = None,
    ) -> NoteChangeResult:
        """Create a note in a collection you may write in; an existing note is refused unless replace is
        true. The note is searchable when this returns."""
        change = note_write(
            access=mcp_access(ctx),
            collection=collection,
            path=path,
            content=content,
            replace=replace,
            base_hash=base_hash,
            message=message,
        )
        return _changed(change)

    @server.tool(name="pmd_edit_note", title="Edit part of a note", annotations=REPLACES)
    @tool_call
    def pmd_edit_note(
        note: str = Field(min_length=1, max_length=4300, description="pmd://collection/path or #docid"),
        base_hash: str = Field(
            min_length=6,
            max_length=64,
            description="the hash (or docid) of the version you read: a note "
            "changed since is refused with its current hash",
        ),
        operation: Literal["replace_section", "append", "prepend", "set_field", "remove_field", "replace_text"] = Field(
            description="replace_section (under heading), append/prepend (optionally under heading), "
            "set_field/remove_field (frontmatter), replace_text (old_text found expected_count times)"
        ),
        heading: str = Field("", max_length=1000, description="a heading's text, without the #"),
        content: str = Field("", description="the text to put in"),
        field: str = Field("", max_length=200, description="a frontmatter field"),
        value: Any = Field(None, description="set_field: the field's value (text, number, list …)"),
        old_text: str = Field("", description="replace_text: the exact text to replace"),
        new_text: str = Field("", description="replace_text: what replaces it"),
        expected_count: int = Field(1, ge=1, le=10000, description="replace_text: how often old_text occurs"),
        message: str = MESSAGE,
        ctx: Context = None,
    ) -> NoteChangeResult:
        """Change part of a note without sending it all back, based on the version you read."""
        edit = NoteEdit(
            operation=operation,
            heading=heading,
            content=content,
            field=field,
            value=value,
            old_text=old_text,
            new_text=new_text,
            expected_count=expected_count,
        )
        change = note_edit(access=mcp_access(ctx), note=note, base_hash=base_hash, edit=edit, message=message)
        return _changed(change)

    @server.tool(name="pmd_move_note", title="Move or rename a note", annotations=ADDS)
    @tool_call
    def pmd_move_note(
        collection: str = COLLECTION,
        path: str = PATH,
        new_path: str = Field(min_length=1, max_length=4096, description="where to move it; never over another note"),
        base_hash: str | None = Field(None, max_length=64, description="the hash of the version you read"),
        message: str = MESSAGE,
        ctx: Context = None,
    ) -> NoteChangeResult:
        """Move or rename a note inside its collection."""
        change = note_move_to(
            access=mcp_access(ctx),
            collection=collection,
            path=path,
            new_path=new_path,
            base_hash=base_hash,
            message=message,
        )
        return _changed(change)

    @server.tool(name="pmd_delete_note", title="Delete a note (to the trash)", annotations=REPLACES)
    @tool_call
    def pmd_delete_note(
        collection: str = COLLECTION,
        path: str = PATH,
        base_hash: str | None = Field(None, max_length=64, description="the hash of the version you read"),
        message: str = MESSAGE,
        ctx: Context = None,
    ) -> NoteChangeResult:
        """Move a note to the collection's .trash/ folder (Obsidian's trash, which no search reads);
        pmd_restore_note brings it back."""
        change = note_delete(
            access=mcp_access(ctx), collection=collection, path=path, base_hash=base_hash, message=message
        )
        return _changed(change)

    @server.tool(name="pmd_restore_note", title="Restore a deleted note", annotations=ADDS)
    @tool_call
    def pmd_restore_note(
        collection: str = COLLECTION,
        trash_path: str = Field(min_length=1, max_length=4096, description="the note in the trash, e.g. .trash/a.md"),
        path: str | None = Field(None, max_length=4096, description="where to put it; default: where it was"),
        message: str = MESSAGE,
        ctx: Context = None,
    ) -> NoteChangeResult:
        """Bring a deleted note back from the collection's trash."""
        change = note_restore(
            access=mcp_access(ctx), collection=collection, trash_path=trash_path, path=path, message=message
        )
        return _changed(change)

    @server.tool(name="pmd_recent_activity", title="What changed in the notes", annotations=READ_ONLY)
    @tool_call
    def pmd_recent_activity(
        since: str = Field("1d", max_length=40, description="an ISO time (2026-01-05T09:00Z) or a span: 30m, 6h, 2d"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(50, ge=1, le=200),
        ctx: Context = None,
    ) -> ActivityResult:
        """What changed since a time, and by whom: through pmd, on disk (an editor, a sync) or by a commit."""
        start = activity_since(since)
        found = notes_activity(access=mcp_access(ctx), since=start, limit=limit, collections=collections or None)
        result = ActivityResult(since=start.isoformat(), changes=[ActivityItem(**a.as_dict()) for a in found])
        lines = [f"{a.at} {a.via} {a.action} {a.uri}" + (f" by {a.by}" if a.by else "") for a in result.changes]
        return tool_result(result, "\n".join(lines) or f"no changes since {result.since}")
