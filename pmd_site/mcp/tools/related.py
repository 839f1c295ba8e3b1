"""The pmd_related tool: the notes related to a note, by links, tags and meaning
(search.retrieval.related)."""

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from search import RelatedBrief, RelatedNoteBrief, related_notes, render


def register(server: MCPServer) -> None:
    """Add pmd_related to `server`."""

    @server.tool(name="pmd_related", title="Notes related to a note", annotations=READ_ONLY)
    @tool_call
    def pmd_related(
        ref: str = Field(
            min_length=1, max_length=4096, description="#docid, pmd://collection/path, collection/path or path"
        ),
        limit: int = Field(10, ge=1, le=100),
        collections: list[str] = Field(default_factory=list, description="look the note up in these collections"),
        ctx: Context = None,
    ) -> RelatedBrief:
        """The notes related to a note: those linking to it, those it links to, those sharing its tags and
        those nearest in meaning, each with its reasons, best first. Read one with pmd_get."""
        data = related_notes(ref, access=mcp_access(ctx), limit=limit, collections=collections or None).as_dict()
        result = RelatedBrief(
            docid=data["docid"],
            uri=data["uri"],
            title=data["title"],
            warnings=data["warnings"],
            copies=data["copies"],
            results=[
                RelatedNoteBrief(
                    docid=r["docid"],
                    uri=r["uri"],
                    title=r["title"],
                    score=r["score"],
                    similarity=r["similarity"],
                    reasons=r["reasons"],
                )
                for r in data["results"]
            ],
        )
        return tool_result(result, render("related", "mcp", result))
