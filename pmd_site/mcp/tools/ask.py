"""The pmd_ask tool: a cited answer from the notes, written by pmd's chat model
(search.pipeline.answer)."""

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations
from pydantic import Field

from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import tool_result
from search import AskBrief, AskRequest, FiltersIn, SearchFilters, ask_run, render

ASKS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False)


def register(server: MCPServer) -> None:
    """Add pmd_ask to `server`."""

    @server.tool(name="pmd_ask", title="Ask the notes", annotations=ASKS)
    @tool_call
    def pmd_ask(
        question: str = Field(min_length=1, max_length=2000, description="the question; filters such as tag:db too"),
        collections: list[str] = Field(default_factory=list, description="ask only these collections"),
        filters: FiltersIn | None = None,
        conversation: str | None = Field(None, description="a follow-up: the previous answer's conversation"),
        ctx: Context = None,
    ) -> AskBrief:
        """A cited answer written by pmd's chat model from the notes you may read, instead of hits: every
        claim ends in [n], a passage listed in `passages` (pmd://collection/path:line; read it with
        pmd_get). state `refused`: the notes do not cover the question; `nearest` lists the closest notes."""
        given = filters.model_dump(exclude_none=True) if filters is not None else None
        answer = ask_run(
            AskRequest(
                question=question,
                access=mcp_access(ctx),
                collections=collections,
                filters=SearchFilters.from_dict(given),
                conversation=conversation,
            )
        )
        data = answer.as_dict()
        for passage in data["passages"]:
            passage.pop("text", None)
        result = AskBrief(**{name: data[name] for name in AskBrief.model_fields})
        return tool_result(result, render("ask", "mcp", answer))
