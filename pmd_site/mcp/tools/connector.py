"""`search` and `fetch`: the two tools ChatGPT's connectors and deep research call, in the shapes
OpenAI documents for them (one string argument each; the answer is one text item holding JSON).

They answer through the same search service and document selector as pmd's own tools, for the
same caller (`mcp_access`), so they see exactly what pmd_search and pmd_get see. A result's `id`
is the note's docid, which `fetch` takes back; `url` is the note's page in pmd's web UI.
"""

import json

from django.urls import reverse
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from indexing.selectors import document_page
from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import READ_ONLY
from search import Mode, SearchRequest, search_run

CONNECTOR_LIMIT = 10  # ChatGPT passes no limit; ten passages is one screen of a deep-research step


class ConnectorResult(BaseModel):
    id: str = Field(description="the note's docid: pass it to fetch")
    title: str
    url: str = Field(description="the note in pmd's web UI")
    text: str = Field(description="the passage that matched")


class ConnectorResults(BaseModel):
    results: list[ConnectorResult]


class ConnectorDocument(BaseModel):
    id: str
    title: str
    text: str = Field(description="the whole note")
    url: str
    metadata: dict | None = Field(None, description="collection, path, pmd URI, contexts and frontmatter")


def note_url(ctx: Context | None, collection: str, path: str) -> str:
    """The note's page in pmd's web UI: absolute over HTTP (the address the client called, as the
    /mcp router worked it out), the path alone on stdio, where no address is known."""
    page = reverse("search:document", args=[collection, path])
    request = ctx.request_context.request if ctx is not None else None
    base = getattr(request, "scope", {}).get("pmd_base_url", "") if request is not None else ""
    return f"{base}{page}"


def _json_result(model: BaseModel) -> CallToolResult:
    """The JSON as the one text item (what ChatGPT reads) and as structured content."""
    data = model.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))], structured_content=data
    )


def register(server: MCPServer) -> None:
    """Add search and fetch to `server`."""

    @server.tool(name="search", title="Search the notes (ChatGPT connectors)", annotations=READ_ONLY)
    @tool_call
    def search(
        query: str = Field(min_length=1, max_length=2000, description="what to look for, in words"),
        ctx: Context = None,
    ) -> ConnectorResults:
        """Search the team's notes by keywords and meaning; each result's id can be passed to fetch."""
        request = SearchRequest(
            query=query,
            mode=Mode.HYBRID,
            limit=CONNECTOR_LIMIT,
            expand=False,  # deep research asks many short questions: no LLM round trip per search
            rerank=False,
            access=mcp_access(ctx),
            face="mcp",
        )
        response = search_run(request)
        found = ConnectorResults(
            results=[
                ConnectorResult(id=r.docid, title=r.title, url=note_url(ctx, r.collection, r.path), text=r.snippet)
                for r in response.results
            ]
        )
        return _json_result(found)

    @server.tool(name="fetch", title="Read a whole note (ChatGPT connectors)", annotations=READ_ONLY)
    @tool_call
    def fetch(
        id: str = Field(min_length=1, max_length=4096, description="a result's id from search (a docid)"),  # noqa: A002 - the documented argument name
        ctx: Context = None,
    ) -> ConnectorDocument:
        """Read the whole note a search result names, with its metadata."""
        reference = id.strip()
        if reference and "/" not in reference and not reference.startswith("#"):
            reference = f"#{reference}"
        page = document_page(reference, access=mcp_access(ctx))
        doc = page.document
        details = page.as_dict()
        note = ConnectorDocument(
            id=doc.docid,
            title=doc.title,
            text=doc.content.body,
            url=note_url(ctx, doc.collection.name, doc.path),
            metadata={
                "collection": doc.collection.name,
                "path": doc.path,
                "uri": doc.uri,
                "context": details["context"],
                "frontmatter": details["frontmatter"] or {},
            },
        )
        return _json_result(note)
