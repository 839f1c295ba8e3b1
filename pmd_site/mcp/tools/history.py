"""The pmd_search_history tool: the commits of the collections that are git repositories
(search.pipeline.history)."""

from typing import Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from search import ChangedFileBrief, CommitBrief, HistoryBrief, HistoryRequest, history_search, render


def register(server: MCPServer) -> None:
    """Add pmd_search_history to `server`."""

    @server.tool(name="pmd_search_history", title="Search the git history", annotations=READ_ONLY)
    @tool_call
    def pmd_search_history(
        query: str = Field("", max_length=2000, description="words; empty lists the newest commits matching"),
        path: str | None = Field(None, description="only commits that changed a file matching this glob"),
        author: str | None = Field(None, description="part of the author's name or e-mail"),
        after: str | None = Field(None, description="on or after: 2025-01-01, 2025-06, 'last week', 3d"),
        before: str | None = Field(None, description="before this date"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(10, ge=1, le=100),
        diff: bool = Field(False, description="include each commit's diff excerpt"),
        mode: Literal["hybrid", "keyword", "vector"] = "hybrid",
        ctx: Context = None,
    ) -> HistoryBrief:
        """Commits of the collections that are git repositories (when and why something changed): title,
        message, author, date, changed files (with the #docid of the note as it is now) and, with diff,
        the diff excerpt. Read a changed note with pmd_get."""
        response = history_search(
            HistoryRequest(
                query=query,
                access=mcp_access(ctx),
                mode=mode,
                collections=collections,
                paths=[path] if path else [],
                author=author or "",
                after=after,
                before=before,
                limit=limit,
                diff=diff,
            )
        )
        result = HistoryBrief(
            query=response.query,
            mode=response.mode,
            warnings=response.warnings,
            results=[
                CommitBrief(
                    collection=h.collection,
                    sha=h.sha,
                    title=h.title,
                    message=h.message,
                    author=h.author,
                    email=h.email,
                    date=h.date,
                    score=round(h.score, 4),
                    diff=h.diff,
                    files=[
                        ChangedFileBrief(status=f.status, path=f.path, old_path=f.old_path, docid=f.docid)
                        for f in h.files
                    ],
                )
                for h in response.results
            ],
        )
        return tool_result(result, render("history", "mcp", result))
