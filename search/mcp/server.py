"""The MCP server for agents: search and read the index through the same services as the CLI.

Tools are thin: they build a SearchRequest (or a document reference), call one service or
selector, and return a typed model (clients get `structuredContent`) plus a compact text
rendering that costs an agent few tokens. The server's instructions describe the live index
(collections, document counts, contexts) so an agent knows what it can search.

Served over stdio by `pmd mcp` and over Streamable HTTP at /mcp by `pmd_site.asgi`.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Literal

import anyio

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from indexing.errors import PmdError
from search.request import Mode, mode_verb

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_INSTRUCTIONS_TTL = 30.0  # seconds a description of the index stays fresh


# --- ORM access from worker threads ------------------------------------------------------------


def _orm(fn):
    """Run a sync tool body with fresh DB connections (the SDK calls it in a reused worker thread);
    a service's PmdError becomes a tool error with its message and suggestions."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from django.db import close_old_connections

        close_old_connections()
        try:
            return fn(*args, **kwargs)
        except PmdError as exc:  # the one mapping of service errors for MCP clients
            raise ToolError(error_text(exc)) from None
        finally:
            close_old_connections()

    return wrapper


def error_text(exc: PmdError) -> str:
    """A service error as a tool (or resource) error: what went wrong, then what the caller may have meant."""
    hint = f". Did you mean: {', '.join(exc.suggestions)}?" if exc.suggestions else ""
    return f"{exc.detail}{hint}"


# --- live instructions ---------------------------------------------------------------------------

_instructions = {"text": "", "at": 0.0}
_instructions_lock = threading.Lock()

_BASE_INSTRUCTIONS = """\
pmd searches a markdown knowledge base. Start with pmd_search (fast keyword/BM25: exact terms,
names, identifiers); use pmd_vector_search for meaning when words differ; use pmd_deep_search
for hard questions (query expansion + keyword + vector + re-ranking; slower). Results give a
docid (#abc123), a pmd:// URI and a line: read the document with pmd_get (use from_line and
max_lines to read around the hit) or several at once with pmd_multi_get. Documents are also
resources at pmd://{collection}/{path} (optionally ?start=LINE&lines=N)."""


def build_instructions() -> str:
    """The base text plus what is in the index right now (collections, counts, contexts)."""
    from indexing.selectors import collections_overview, context_list

    lines = [_BASE_INSTRUCTIONS, "", "Collections:"]
    overview = sorted(collections_overview(), key=lambda r: r["name"])
    contexts = context_list()
    for row in overview:
        lines.append(f"- pmd://{row['name']}/ ({row['documents']} documents)")
        for c in contexts:
            if c.collection_id == row["collection"].id:
                lines.append(f"    {c.target}: {c.text}")
    if not overview:
        lines.append("- (none yet: the index is empty)")
    general = [c for c in contexts if c.collection_id is None]
    if general:
        lines += ["", "About this knowledge base:"] + [f"- {c.text}" for c in general]
    return "\n".join(lines)


def refresh_instructions(*, force: bool = False) -> str:
    """Rebuild the cached instructions when stale (sync; call it from a thread)."""
    with _instructions_lock:
        if force or time.monotonic() - _instructions["at"] > _INSTRUCTIONS_TTL or not _instructions["text"]:
            try:
                _instructions["text"] = _orm(build_instructions)()
            except Exception as exc:  # noqa: BLE001 - the server must still start without a database
                _instructions["text"] = f"{_BASE_INSTRUCTIONS}\n\n(index unavailable: {exc.__class__.__name__})"
            _instructions["at"] = time.monotonic()
        return _instructions["text"]


@contextlib.asynccontextmanager
async def _lifespan(app):
    """Entered when a connection (stdio) or a stateless HTTP request starts: keep the description fresh."""
    if time.monotonic() - _instructions["at"] > _INSTRUCTIONS_TTL:
        await anyio.to_thread.run_sync(refresh_instructions)
    yield None


# --- result models --------------------------------------------------------------------------------


class Hit(BaseModel):
    docid: str = Field(description="#docid: pass to pmd_get")
    uri: str = Field(description="pmd://collection/path")
    line: int = Field(description="line of the best match (1-based)")
    score: float = Field(description="0..1, comparable within one result list")
    title: str
    snippet: str
    context: list[str] = Field(default_factory=list, description="descriptions of the folder, general → specific")


class SearchResult(BaseModel):
    query: str
    mode: str
    results: list[Hit]
    warnings: list[str] = Field(default_factory=list)


class SubSearch(BaseModel):
    """One typed search of a deep search: you write the expansions instead of the LLM."""

    type: Literal["lex", "vec", "hyde"] = Field(
        description="lex: keyword query; vec: a natural-language query for vectors; "
        "hyde: a short hypothetical passage that would answer the question")
    query: str = Field(min_length=1, max_length=2000)


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


class MultiDocument(BaseModel):
    docid: str
    uri: str
    title: str
    text: str | None = Field(description="None when skipped")
    skipped: str | None = None
    truncated: bool = False


class MultiGetResult(BaseModel):
    documents: list[MultiDocument]
    missing: list[str] = Field(default_factory=list)
    omitted: int = Field(0, description="matching documents not listed: the total response limit was used up")
    total_bytes: int = 0
    max_bytes: int = 0
    max_total_bytes: int = Field(0, description="the most text one answer holds (PMD_MULTI_GET_MAX_TOTAL_BYTES)")
    notice: str | None = Field(None, description="what the limits left out")


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
    server: dict | None = Field(None, description="staff only: where the database and broker run "
                                                  "(host, PMD_HOME, broker URL); null for other users")


def _result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content for programs, compact text for the model."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json"))


# --- the server -----------------------------------------------------------------------------------


def _sees_internals(ctx: Context | None) -> bool:
    """Staff over HTTP (the bearer token's user), or the local OS user on stdio (`pmd mcp`)."""
    request = ctx.request_context.request if ctx is not None else None
    if request is None:
        return True  # stdio: whoever runs `pmd mcp` can read the server's settings anyway
    user_pk = getattr(request, "scope", {}).get("pmd_user")
    if user_pk is None:
        return False
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(pk=user_pk, is_active=True, is_staff=True).exists()


def _search(**fields) -> SearchResult:
    from search.pipeline.dispatch import search_run
    from search.request import SearchRequest

    request = SearchRequest(**fields)
    response = search_run(request)  # errors: PmdError, mapped by _orm
    return SearchResult(
        query=response.query.split("\n", 1)[0], mode=mode_verb(response.mode), warnings=response.warnings,
        results=[Hit(docid=r.docid, uri=r.uri, line=r.line, score=round(r.score, 4), title=r.title,
                     snippet=r.snippet, context=r.context) for r in response.results],
    )


def _search_text(result: SearchResult) -> str:
    if not result.results:
        return f"no results for {result.query!r}" + "".join(f"\nwarning: {w}" for w in result.warnings)
    out = []
    for hit in result.results:
        out.append(f"#{hit.docid} {hit.uri}:{hit.line} ({hit.score:.2f}) {hit.title}")
        snippet = " ".join(hit.snippet.split())
        if snippet:
            out.append(f"  {snippet[:300]}")
    out += [f"warning: {w}" for w in result.warnings]
    return "\n".join(out)


def _document_text(*, ref: str, from_line: int | None, max_lines: int | None, line_numbers: bool,
                   collections: list[str] | None = None) -> DocumentText:
    from indexing.selectors import document_page
    from search.formatters import numbered_lines

    page = document_page(ref, from_line=from_line, max_lines=max_lines, collections=collections)
    payload = page.as_dict()
    lines = numbered_lines(page.lines, page.first) if line_numbers else page.lines
    return DocumentText(docid=payload["docid"], uri=payload["uri"], title=payload["title"], from_line=page.first,
                        to_line=page.last, total_lines=page.total_lines, truncated=page.last < page.total_lines,
                        context=payload["context"], text="\n".join(lines))


def create_server() -> MCPServer:
    """A fresh MCPServer with pmd's tools, resources and prompt (one per process is enough)."""
    server = MCPServer(
        name="pmd",
        title="pmd knowledge-base search",
        version="0.1.0",
        instructions=_BASE_INSTRUCTIONS,
        log_level="WARNING",
        lifespan=_lifespan,
    )

    @server.tool(name="pmd_search", title="Keyword search", annotations=READ_ONLY)
    @_orm
    def pmd_search(
        query: str = Field(min_length=1, max_length=2000, description="keywords; quotes and exact names work best"),
        collections: list[str] = Field(default_factory=list, description="restrict to these collections"),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
    ) -> SearchResult:
        """Fast BM25 keyword search. Use first, and for exact terms, names, identifiers and error messages."""
        result = _search(query=query, mode=Mode.KEYWORD, collections=collections, limit=limit, min_score=min_score)
        return _result(result, _search_text(result))

    @server.tool(name="pmd_vector_search", title="Semantic search", annotations=READ_ONLY)
    @_orm
    def pmd_vector_search(
        query: str = Field(min_length=1, max_length=2000, description="a natural-language question or description"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
    ) -> SearchResult:
        """Semantic (embedding) search: finds passages by meaning when the wording differs from the query."""
        result = _search(query=query, mode=Mode.VECTOR, collections=collections, limit=limit, min_score=min_score)
        return _result(result, _search_text(result))

    @server.tool(name="pmd_deep_search", title="Deep hybrid search", annotations=READ_ONLY)
    @_orm
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
    ) -> SearchResult:
        """Best-quality search for hard questions: query expansion, keyword + vector retrieval, fusion, LLM re-ranking. Slower."""
        if searches:
            query = " ".join(query.split())
        typed = [(s.type, " ".join(s.query.split())) for s in searches or []]
        result = _search(query=query, mode=Mode.HYBRID, searches=typed, intent=intent, rerank=rerank,
                         candidate_limit=candidate_limit, collections=collections, limit=limit, min_score=min_score)
        return _result(result, _search_text(result))

    @server.tool(name="pmd_get", title="Read a document", annotations=READ_ONLY)
    @_orm
    def pmd_get(
        ref: str = Field(min_length=1, max_length=4096,
                         description="#docid, pmd://collection/path, collection/path or path (optionally :LINE)"),
        from_line: int | None = Field(None, ge=1, description="first line to return"),
        max_lines: int | None = Field(200, ge=1, description="at most this many lines (default 200)"),
        line_numbers: bool = Field(False, description="prefix each line with its number"),
    ) -> DocumentText:
        """Read one document (or a window of it) found by a search."""
        doc = _document_text(ref=ref, from_line=from_line, max_lines=max_lines, line_numbers=line_numbers)
        header = f"#{doc.docid} {doc.uri} lines {doc.from_line}-{doc.to_line} of {doc.total_lines}"
        if doc.truncated:
            header += f" (more: from_line={doc.to_line + 1})"
        return _result(doc, f"{header}\n{doc.text}")

    @server.tool(name="pmd_multi_get", title="Read several documents", annotations=READ_ONLY)
    @_orm
    def pmd_multi_get(
        pattern: str = Field(min_length=1, max_length=10000,
                             description="a glob over collection/path (notes/**/*.md) or a comma list of paths/#docids"),
        max_lines: int | None = Field(None, ge=1, description="at most this many lines per document"),
        max_bytes: int | None = Field(None, ge=1, description="skip documents larger than this (default 10240; "
                                      "at most the total limit of one answer, about 1 MB)"),
        collections: list[str] = Field(default_factory=list),
    ) -> MultiGetResult:
        """Read several documents at once; large ones are skipped (raise max_bytes to include them) and one
        answer holds at most about 1 MB: what is left out is listed or counted."""
        from indexing.selectors import documents_multi_get

        found = documents_multi_get(pattern, max_bytes=max_bytes, max_lines=max_lines,
                                    collections=collections or None)
        result = MultiGetResult(**found.as_dict())
        parts = []
        for d in result.documents:
            note = f" [skipped: {d.skipped}]" if d.skipped else (" [truncated]" if d.truncated else "")
            parts.append(f"=== #{d.docid} {d.uri}{note}" + (f"\n{d.text}" if d.text is not None else ""))
        if result.missing:
            parts.append("not found: " + ", ".join(result.missing))
        if result.notice:
            parts.append(f"note: {result.notice}")
        return _result(result, "\n\n".join(parts) or "no documents")

    @server.tool(name="pmd_status", title="Index status", annotations=READ_ONLY)
    @_orm
    def pmd_status(ctx: Context) -> StatusResult:
        """What is indexed: collections, document counts, contexts, and how much is embedded for semantic search."""
        from pmd_site.status import status_report

        internals = _sees_internals(ctx)
        report = status_report(["database", "index", "embeddings"] + (["broker"] if internals else []),
                               internals=internals)
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
        refresh_instructions(force=True)
        lines = [f"{result.documents} documents in {len(result.collections)} collections"]
        lines += [f"- {c.uri} {c.documents} documents" for c in result.collections]
        vectors = result.embeddings
        lines.append(f"embeddings ({vectors.model or 'unknown model'}): {vectors.embedded} texts embedded, "
                     f"{vectors.pending} pending" + (f"; {vectors.hint}" if vectors.hint else ""))
        return _result(result, "\n".join(lines))

    @server.resource("pmd://{collection}/{+path}{?start,lines}", name="document", mime_type="text/markdown",
                     description="A document's markdown; add ?start=LINE&lines=N for a line range")
    def document_resource(collection: str, path: str, start: int | None = None, lines: int | None = None) -> str:
        return _resource_text(collection, path, start, lines)

    @server.prompt(name="research", title="Research a question in the knowledge base")
    def research(question: str) -> str:
        """How to answer a question from the knowledge base with pmd's tools, citing sources."""
        return (
            f"Answer this question from the knowledge base: {question}\n\n"
            "1. Call pmd_status if you do not yet know which collections exist.\n"
            "2. Call pmd_search with the most specific keywords (names, identifiers, exact phrases).\n"
            "3. If the hits are weak, call pmd_vector_search with the question in plain words, or "
            "pmd_deep_search with an `intent` (and lex/vec/hyde `searches` if you can phrase them).\n"
            "4. Read the best hits with pmd_get (from_line near the hit's line, max_lines about 80) "
            "before relying on them; use pmd_multi_get for several short documents.\n"
            "5. Answer only from what you read, and cite each claim with its pmd:// URI and line.\n"
            "If nothing relevant is found, say so instead of guessing."
        )

    return server


@_orm
def _resource_text(collection: str, path: str, start, lines) -> str:
    from mcp.server.mcpserver.exceptions import ResourceError

    from indexing.selectors import DocumentNotFound, document_lines, document_resolve

    try:
        start = int(start) if start not in (None, "") else None
        lines = int(lines) if lines not in (None, "") else None
    except ValueError:
        raise ResourceError("start and lines must be whole numbers") from None
    try:
        resolved = document_resolve(f"pmd://{collection}/{path}")
    except DocumentNotFound as exc:
        raise ResourceError(error_text(exc)) from None
    if start is None and lines is None:
        return resolved.document.content.body
    chosen, _ = document_lines(resolved.document, from_line=start, max_lines=lines)
    return "\n".join(chosen)


_server: MCPServer | None = None
_server_lock = threading.Lock()


def get_server() -> MCPServer:
    global _server
    with _server_lock:
        if _server is None:
            _server = create_server()
            _install_live_instructions(_server)
        return _server


def _install_live_instructions(server: MCPServer) -> None:
    """Make the low-level server read the cached, periodically rebuilt description of the index."""
    low = server._lowlevel_server  # noqa: SLF001 - the SDK reads `instructions` at initialize time
    base = type(low)
    low.__class__ = type("PmdLowLevelServer", (base,), {
        "instructions": property(lambda self: _instructions["text"] or _BASE_INSTRUCTIONS, lambda self, value: None),
    })
