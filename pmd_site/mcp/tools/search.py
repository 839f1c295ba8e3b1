"""The search tools: pmd_search (keywords), pmd_vector_search (meaning) and pmd_deep_search (both,
with query expansion and re-ranking), each one SearchRequest to the search pipeline."""

from typing import Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from search import (
    FiltersIn,
    Mode,
    ResultBrief,
    SearchBrief,
    SearchFilters,
    SearchRequest,
    SubSearch,
    mode_verb,
    render,
    search_run,
)

FILTERS_HELP = (
    "tags, exclude_tags, path, after, before, fields: {key: value}; the query may also hold them: "
    "tag:db after:2025-01-01 status:draft"
)


def _search(ctx: Context, *, filters: FiltersIn | None = None, **fields) -> SearchBrief:
    given = filters.model_dump(exclude_none=True) if filters is not None else None
    request = SearchRequest(**fields, filters=SearchFilters.from_dict(given), access=mcp_access(ctx), face="mcp")
    response = search_run(request)  # errors: PmdError, mapped by tool_call
    applied = response.filters.as_dict() if response.filters is not None and not response.filters.empty else None
    return SearchBrief(
        query=response.query.split("\n", 1)[0],
        mode=mode_verb(response.mode),
        warnings=response.warnings,
        results=[
            ResultBrief(
                docid=r.docid,
                uri=r.uri,
                line=r.line,
                score=round(r.score, 4),
                title=r.title,
                headings=r.headings,
                text=r.text,
                snippet=r.snippet,
                context=r.context,
                date=r.date,
                date_source=r.date_source,
            )
            for r in response.results
        ],
        filters=applied,
        corrected_query=response.corrected_query,
        time_words=response.time_words,
    )


def register(server: MCPServer) -> None:
    """Add pmd_search, pmd_vector_search and pmd_deep_search to `server`."""

    @server.tool(name="pmd_search", title="Keyword search", annotations=READ_ONLY)
    @tool_call
    def pmd_search(
        query: str = Field(min_length=1, max_length=2000, description="keywords; quotes and exact names work best"),
        collections: list[str] = Field(default_factory=list, description="restrict to these collections"),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
        filters: FiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        exact: bool = Field(False, description="search the words as written: no typo correction"),
        ctx: Context = None,
    ) -> SearchBrief:
        """Fast BM25 keyword search. Use first, and for exact terms, names, identifiers and error messages.
        Filters (tag:db, path:meetings/**, after:"last week", status:draft) narrow it; filters alone list notes."""
        result = _search(
            ctx,
            query=query,
            mode=Mode.KEYWORD,
            collections=collections,
            limit=limit,
            min_score=min_score,
            filters=filters,
            sort=sort,
            correct=not exact,
        )
        return tool_result(result, render("search", "mcp", result))

    @server.tool(name="pmd_vector_search", title="Semantic search", annotations=READ_ONLY)
    @tool_call
    def pmd_vector_search(
        query: str = Field(min_length=1, max_length=2000, description="a natural-language question or description"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
        filters: FiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        exact: bool = Field(False, description="search the words as written: no typo correction"),
        ctx: Context = None,
    ) -> SearchBrief:
        """Semantic (embedding) search: finds passages by meaning when the wording differs from the query."""
        result = _search(
            ctx,
            query=query,
            mode=Mode.VECTOR,
            collections=collections,
            limit=limit,
            min_score=min_score,
            filters=filters,
            sort=sort,
            correct=not exact,
        )
        return tool_result(result, render("search", "mcp", result))

    @server.tool(name="pmd_deep_search", title="Deep hybrid search", annotations=READ_ONLY)
    @tool_call
    def pmd_deep_search(
        query: str = Field(min_length=1, max_length=2000, description="the question"),
        searches: list[SubSearch] | None = Field(
            None, description="optional typed searches (lex/vec/hyde) to run instead of automatic expansion"
        ),
        intent: str | None = Field(
            None, max_length=2000, description="what you are trying to find out; steers expansion and re-ranking"
        ),
        rerank: bool = Field(True, description="re-rank candidates with the LLM (better, slower)"),
        candidate_limit: int = Field(40, ge=1, le=200, description="candidates passed to re-ranking"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
        filters: FiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        exact: bool = Field(False, description="search the words as written: no typo correction"),
        link_boost: float | None = Field(
            None, ge=0.0, le=5.0, description="raise notes linked to or from better hits (0 off)"
        ),
        recency_boost: float | None = Field(
            None, ge=0.0, le=5.0, description="raise notes dated this week / month (0 off)"
        ),
        ctx: Context = None,
    ) -> SearchBrief:
        """Best-quality search for hard questions: query expansion, keyword + vector retrieval, fusion, LLM re-ranking. Slower."""  # noqa: E501 - the tool's description, as clients get it
        if searches:
            query = " ".join(query.split())
        typed = [(s.type, " ".join(s.query.split())) for s in searches or []]
        result = _search(
            ctx,
            query=query,
            mode=Mode.HYBRID,
            searches=typed,
            intent=intent,
            rerank=rerank,
            candidate_limit=candidate_limit,
            collections=collections,
            limit=limit,
            min_score=min_score,
            filters=filters,
            sort=sort,
            link_boost=link_boost,
            recency_boost=recency_boost,
            correct=not exact,
        )
        return tool_result(result, render("search", "mcp", result))
