"""The tools: pmd_search, pmd_vector_search, pmd_deep_search, pmd_get, pmd_multi_get, pmd_status, pmd_links.

Tools are thin: they build a SearchRequest (or a document reference), call one service or
selector, and return a typed model (pmd_site.mcp.models; clients get `structuredContent`) plus a
compact text rendering that costs an agent few tokens.
"""

from typing import Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from indexing.access import Access
from indexing.links import document_links
from indexing.selectors import document_page, documents_multi_get
from pmd_site.reports.status import status_report
from search.filters import SearchFilters
from search.formatters import numbered_lines, render
from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.instructions import refresh_instructions
from pmd_site.mcp.models import CollectionInfo, DocumentText, EmbeddingsInfo, StatusResult
from search.pipeline.dispatch import search_run
from search.request import Mode, SearchRequest, mode_verb
from search.schemas import (
    ChangedFileBrief,
    CommitBrief,
    FiltersIn,
    HistoryBrief,
    LinkBrief,
    LinksBrief,
    MultiGetBrief,
    RelatedBrief,
    RelatedNoteBrief,
    FieldsOut,
    ResultBrief,
    SearchBrief,
    SubSearch,
)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content for programs, compact text for the model."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json"))


def _search(ctx: Context, *, filters: FiltersIn | None = None, **fields) -> SearchBrief:
    given = filters.model_dump(exclude_none=True) if filters is not None else None
    request = SearchRequest(**fields, filters=SearchFilters.from_dict(given), access=mcp_access(ctx), face="mcp")
    response = search_run(request)  # errors: PmdError, mapped by tool_call
    applied = response.filters.as_dict() if response.filters is not None and not response.filters.empty else None
    return SearchBrief(
        query=response.query.split("\n", 1)[0], mode=mode_verb(response.mode), warnings=response.warnings,
        results=[ResultBrief(docid=r.docid, uri=r.uri, line=r.line, score=round(r.score, 4), title=r.title,
                     snippet=r.snippet, context=r.context, date=r.date, date_source=r.date_source)
                 for r in response.results],
        filters=applied, corrected_query=response.corrected_query, time_words=response.time_words,
    )


def _document_text(*, ref: str, from_line: int | None, max_lines: int | None, line_numbers: bool,
                   access: Access, collections: list[str] | None = None) -> DocumentText:
    page = document_page(ref, access=access, from_line=from_line, max_lines=max_lines, collections=collections)
    payload = page.as_dict()
    lines = numbered_lines(page.lines, page.first) if line_numbers else page.lines
    return DocumentText(docid=payload["docid"], uri=payload["uri"], title=payload["title"], from_line=page.first,
                        to_line=page.last, total_lines=page.total_lines, truncated=page.last < page.total_lines,
                        context=payload["context"], text="\n".join(lines))


FILTERS_HELP = ("tags, exclude_tags, path, after, before, fields: {key: value}; the query may also hold them: "
                "tag:db after:2025-01-01 status:draft")


def register_tools(server: MCPServer) -> None:
    """Add pmd's tools to `server`."""

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
        result = _search(ctx, query=query, mode=Mode.KEYWORD, collections=collections, limit=limit, min_score=min_score,
                         filters=filters, sort=sort, correct=not exact)
        return _result(result, render("search", "mcp", result))

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
        result = _search(ctx, query=query, mode=Mode.VECTOR, collections=collections, limit=limit, min_score=min_score,
                         filters=filters, sort=sort, correct=not exact)
        return _result(result, render("search", "mcp", result))

    @server.tool(name="pmd_deep_search", title="Deep hybrid search", annotations=READ_ONLY)
    @tool_call
    def pmd_deep_search(
        query: str = Field(min_length=1, max_length=2000, description="the question"),
        searches: list[SubSearch] | None = Field(
            None, description="optional typed searches (lex/vec/hyde) to run instead of automatic expansion"),
        intent: str | None = Field(None, max_length=2000,
                                   description="what you are trying to find out; steers expansion and re-ranking"),
        rerank: bool = Field(True, description="re-rank candidates with the LLM (better, slower)"),
        candidate_limit: int = Field(40, ge=1, le=200, description="candidates passed to re-ranking"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
        filters: FiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        exact: bool = Field(False, description="search the words as written: no typo correction"),
        link_boost: float | None = Field(None, ge=0.0, le=5.0,
                                         description="raise notes linked to or from better hits (0 off)"),
        recency_boost: float | None = Field(None, ge=0.0, le=5.0,
                                            description="raise notes dated this week / month (0 off)"),
        ctx: Context = None,
    ) -> SearchBrief:
        """Best-quality search for hard questions: query expansion, keyword + vector retrieval, fusion, LLM re-ranking. Slower."""
        if searches:
            query = " ".join(query.split())
        typed = [(s.type, " ".join(s.query.split())) for s in searches or []]
        result = _search(ctx, query=query, mode=Mode.HYBRID, searches=typed, intent=intent, rerank=rerank,
                         candidate_limit=candidate_limit, collections=collections, limit=limit, min_score=min_score,
                         filters=filters, sort=sort, link_boost=link_boost, recency_boost=recency_boost,
                         correct=not exact)
        return _result(result, render("search", "mcp", result))

    @server.tool(name="pmd_get", title="Read a document", annotations=READ_ONLY)
    @tool_call
    def pmd_get(
        ref: str = Field(min_length=1, max_length=4096,
                         description="#docid, pmd://collection/path, collection/path or path (optionally :LINE)"),
        from_line: int | None = Field(None, ge=1, description="first line to return"),
        max_lines: int | None = Field(200, ge=1, description="at most this many lines (default 200)"),
        line_numbers: bool = Field(False, description="prefix each line with its number"),
        ctx: Context = None,
    ) -> DocumentText:
        """Read one document (or a window of it) found by a search."""
        doc = _document_text(ref=ref, from_line=from_line, max_lines=max_lines, line_numbers=line_numbers,
                             access=mcp_access(ctx))
        return _result(doc, render("document", "mcp", doc))

    @server.tool(name="pmd_multi_get", title="Read several documents", annotations=READ_ONLY)
    @tool_call
    def pmd_multi_get(
        pattern: str = Field(min_length=1, max_length=10000,
                             description="a glob over collection/path (notes/**/*.md) or a comma list of paths/#docids"),
        max_lines: int | None = Field(None, ge=1, description="at most this many lines per document"),
        max_bytes: int | None = Field(None, ge=1, description="skip documents larger than this (default 10240; "
                                      "at most the total limit of one answer, about 1 MB)"),
        collections: list[str] = Field(default_factory=list),
        ctx: Context = None,
    ) -> MultiGetBrief:
        """Read several documents at once; large ones are skipped (raise max_bytes to include them) and one
        answer holds at most about 1 MB: what is left out is listed or counted."""
        found = documents_multi_get(pattern, max_bytes=max_bytes, max_lines=max_lines,
                                    collections=collections or None, access=mcp_access(ctx))
        result = MultiGetBrief(**found.as_dict())
        return _result(result, render("documents", "mcp", result))

    @server.tool(name="pmd_status", title="Index status", annotations=READ_ONLY)
    @tool_call
    def pmd_status(ctx: Context) -> StatusResult:
        """What is indexed: collections, document counts, contexts, and how much is embedded for semantic search."""
        access = mcp_access(ctx)
        internals = access.is_staff  # staff over HTTP, or the local OS user on stdio
        report = status_report(["database", "index", "embeddings"] + (["broker"] if internals else []),
                               internals=internals, access=access)
        index, embedded = report.get("index", {}), report.get("embeddings", {})
        result = StatusResult(
            documents=index.get("documents", 0), contexts=index.get("contexts", 0), problems=index.get("problems", 0),
            collections=[CollectionInfo(name=c["name"], uri=f"pmd://{c['name']}/", documents=c["documents"],
                                        last_indexed_at=c["last_indexed_at"]) for c in index.get("by_collection", [])],
            embeddings=EmbeddingsInfo(
                model=embedded.get("model", ""), embedded=embedded.get("embedded", 0),
                pending=embedded.get("pending", 0), hint=embedded.get("hint") or embedded.get("error"),
            ),
            database_ok=bool(report.get("database", {}).get("ok")),
            server={"database": report.get("database", {}), "broker": report.get("broker", {})} if internals else None,
        )
        refresh_instructions(force=True, access=access)
        return _result(result, render("status", "mcp", result))


# --- links (indexing.links): a separate block, registered by pmd_site.mcp.server --------------------

def register_link_tools(server: MCPServer) -> None:
    """Add pmd_links and pmd_fields to `server`."""

    @server.tool(name="pmd_fields", title="Frontmatter keys to filter by", annotations=READ_ONLY)
    @tool_call
    def pmd_fields(
        collections: list[str] = Field(default_factory=list),
        ctx: Context = None,
    ) -> FieldsOut:
        """The frontmatter keys of the notes, with their types and most frequent values: what the search tools'
        query can filter by (status:draft, priority:>=2, date:2025-01..2025-03, has:due, tag:a OR status:b)."""
        from search.retrieval.filters import frontmatter_fields

        result = FieldsOut(fields=frontmatter_fields(access=mcp_access(ctx), collections=collections or None))
        return _result(result, render("fields", "mcp", result))

    @server.tool(name="pmd_links", title="Links and backlinks of a note", annotations=READ_ONLY)
    @tool_call
    def pmd_links(
        ref: str = Field(min_length=1, max_length=4096,
                         description="#docid, pmd://collection/path, collection/path or path"),
        direction: Literal["both", "out", "in"] = Field(
            "both", description="out: the links the note writes; in: the notes linking to it (backlinks)"),
        limit: int = Field(50, ge=1, le=1000, description="at most this many links, and as many backlinks"),
        collections: list[str] = Field(default_factory=list),
        ctx: Context = None,
    ) -> LinksBrief:
        """The notes a note links to ([[wikilinks]], embeds, links to .md files; unresolved ones too) and the
        notes that link to it, each with its line and the sentence around the link. Read one with pmd_get."""
        found = document_links(ref, access=mcp_access(ctx), collections=collections or None, limit=limit)
        data = found.as_dict()

        def info(row: dict) -> LinkBrief:
            return LinkBrief(kind=row["kind"], link=row["link"], line=row["line"], context=row["context"],
                            heading=row["heading"], resolved=row["resolved"], docid=row["docid"], uri=row["uri"],
                            title=row["title"])

        result = LinksBrief(
            docid=data["docid"], uri=data["uri"], title=data["title"],
            links=[info(r) for r in data["links"]] if direction in ("both", "out") else [],
            backlinks=[info(r) for r in data["backlinks"]] if direction in ("both", "in") else [],
            links_total=data["links_total"], backlinks_total=data["backlinks_total"],
        )
        return _result(result, render("links", "mcp", result, direction=direction))


# --- related notes (search.retrieval.related): a separate block, registered by pmd_site.mcp.server ------

from search.retrieval.related import related_notes


def register_related_tools(server: MCPServer) -> None:
    """Add pmd_related to `server`."""

    @server.tool(name="pmd_related", title="Notes related to a note", annotations=READ_ONLY)
    @tool_call
    def pmd_related(
        ref: str = Field(min_length=1, max_length=4096,
                         description="#docid, pmd://collection/path, collection/path or path"),
        limit: int = Field(10, ge=1, le=100),
        collections: list[str] = Field(default_factory=list, description="look the note up in these collections"),
        ctx: Context = None,
    ) -> RelatedBrief:
        """The notes related to a note: those linking to it, those it links to, those sharing its tags and
        those nearest in meaning, each with its reasons, best first. Read one with pmd_get."""
        data = related_notes(ref, access=mcp_access(ctx), limit=limit, collections=collections or None).as_dict()
        result = RelatedBrief(
            docid=data["docid"], uri=data["uri"], title=data["title"], warnings=data["warnings"], copies=data["copies"],
            results=[RelatedNoteBrief(docid=r["docid"], uri=r["uri"], title=r["title"], score=r["score"],
                                 similarity=r["similarity"], reasons=r["reasons"]) for r in data["results"]],
        )
        return _result(result, render("related", "mcp", result))


# --- history (search.pipeline.history): a separate block, registered by pmd_site.mcp.server ------------

from search.pipeline.history import history_search
from search.retrieval.history import HistoryRequest


def register_history_tools(server: MCPServer) -> None:
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
        response = history_search(HistoryRequest(
            query=query, access=mcp_access(ctx), mode=mode, collections=collections, paths=[path] if path else [],
            author=author or "", after=after, before=before, limit=limit, diff=diff))
        result = HistoryBrief(query=response.query, mode=response.mode, warnings=response.warnings, results=[
            CommitBrief(collection=h.collection, sha=h.sha, title=h.title, message=h.message, author=h.author,
                      email=h.email, date=h.date, score=round(h.score, 4), diff=h.diff,
                      files=[ChangedFileBrief(status=f.status, path=f.path, old_path=f.old_path, docid=f.docid)
                             for f in h.files])
            for h in response.results])
        return _result(result, render("history", "mcp", result))


# --- ask (search.pipeline.answer): a separate block, registered by pmd_site.mcp.server ------------

from search.pipeline.answer import AskRequest, ask_run
from search.schemas import AskBrief

ASKS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False)


def register_ask_tools(server: MCPServer) -> None:
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
        answer = ask_run(AskRequest(question=question, access=mcp_access(ctx), collections=collections,
                                    filters=SearchFilters.from_dict(given), conversation=conversation))
        data = answer.as_dict()
        for passage in data["passages"]:
            passage.pop("text", None)
        result = AskBrief(**{name: data[name] for name in AskBrief.model_fields})
        return _result(result, render("ask", "mcp", answer))
