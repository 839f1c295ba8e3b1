"""The pmd_status tool: what is indexed, and how much of it is embedded."""

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.instructions import refresh_instructions
from pmd_site.mcp.models import CollectionInfo, EmbeddingsInfo, StatusResult
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from pmd_site.reports.status import status_report
from search import render


def register(server: MCPServer) -> None:
    """Add pmd_status to `server`."""

    @server.tool(name="pmd_status", title="Index status", annotations=READ_ONLY)
    @tool_call
    def pmd_status(ctx: Context) -> StatusResult:
        """What is indexed: collections, document counts, contexts, and how much is embedded for semantic search."""
        access = mcp_access(ctx)
        internals = access.is_staff  # staff over HTTP, or the local OS user on stdio
        report = status_report(
            ["database", "index", "embeddings"] + (["broker"] if internals else []), internals=internals, access=access
        )
        index, embedded = report.get("index", {}), report.get("embeddings", {})
        result = StatusResult(
            documents=index.get("documents", 0),
            contexts=index.get("contexts", 0),
            problems=index.get("problems", 0),
            collections=[
                CollectionInfo(
                    name=c["name"],
                    uri=f"pmd://{c['name']}/",
                    documents=c["documents"],
                    last_indexed_at=c["last_indexed_at"],
                )
                for c in index.get("by_collection", [])
            ],
            embeddings=EmbeddingsInfo(
                model=embedded.get("model", ""),
                embedded=embedded.get("embedded", 0),
                pending=embedded.get("pending", 0),
                hint=embedded.get("hint") or embedded.get("error"),
            ),
            database_ok=bool(report.get("database", {}).get("ok")),
            server={"database": report.get("database", {}), "broker": report.get("broker", {})} if internals else None,
        )
        refresh_instructions(force=True, access=access)
        return tool_result(result, render("status", "mcp", result))
