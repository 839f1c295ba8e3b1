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
from pmd_site.status import status_report
from search.filters import SearchFilters
from search.formatters import numbered_lines
from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.instructions import refresh_instructions
from pmd_site.mcp.models import (
    CollectionInfo,
    DocumentText,
    EmbeddingsInfo,
    Hit,
    LinkInfo,
    LinksResult,
    MultiGetResult,
    SearchFiltersIn,
    SearchResult,
    StatusResult,
    SubSearch,
)
from search.pipeline.dispatch import search_run
from search.request import Mode, SearchRequest, mode_verb

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content for programs, compact text for the model."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json"))


def _search(ctx: Context, *, filters: SearchFiltersIn | None = None, **fields) -> SearchResult:
    given = filters.model_dump(exclude_none=True) if filters is not None else None
    request = SearchRequest(**fields, filters=SearchFilters.from_dict(given), access=mcp_access(ctx))
    response = search_run(request)  # errors: PmdError, mapped by tool_call
    applied = response.filters.as_dict() if response.filters is not None and not response.filters.empty else None
    return SearchResult(
        query=response.query.split("\n", 1)[0], mode=mode_verb(response.mode), warnings=response.warnings,
        results=[Hit(docid=r.docid, uri=r.uri, line=r.line, score=round(r.score, 4), title=r.title,
                     snippet=r.snippet, context=r.context, date=r.date, date_source=r.date_source)
                 for r in response.results],
        filters=applied,
    )


def _search_text(result: SearchResult) -> str:
    if not result.results:
        return f"no results for {result.query!r}" + "".join(f"\nwarning: {w}" for w in result.warnings)
    out = []
    for hit in result.results:
        dated = f" [{hit.date[:10]}]" if result.filters and hit.date else ""
        out.append(f"#{hit.docid} {hit.uri}:{hit.line} ({hit.score:.2f}){dated} {hit.title}")
        snippet = " ".join(hit.snippet.split())
        if snippet:
            out.append(f"  {snippet[:300]}")
    out += [f"warning: {w}" for w in result.warnings]
    return "\n".join(out)


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
        filters: SearchFiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        ctx: Context = None,
    ) -> SearchResult:
        """Fast BM25 keyword search. Use first, and for exact terms, names, identifiers and error messages.
        Filters (tag:db, path:meetings/**, after:"last week", status:draft) narrow it; filters alone list notes."""
        result = _search(ctx, query=query, mode=Mode.KEYWORD, collections=collections, limit=limit, min_score=min_score,
                         filters=filters, sort=sort)
        return _result(result, _search_text(result))

    @server.tool(name="pmd_vector_search", title="Semantic search", annotations=READ_ONLY)
    @tool_call
    def pmd_vector_search(
        query: str = Field(min_length=1, max_length=2000, description="a natural-language question or description"),
        collections: list[str] = Field(default_factory=list),
        limit: int = Field(10, ge=1, le=100),
        min_score: float = Field(0.0, ge=0.0, le=1.0),
        filters: SearchFiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        ctx: Context = None,
    ) -> SearchResult:
        """Semantic (embedding) search: finds passages by meaning when the wording differs from the query."""
        result = _search(ctx, query=query, mode=Mode.VECTOR, collections=collections, limit=limit, min_score=min_score,
                         filters=filters, sort=sort)
        return _result(result, _search_text(result))

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
        filters: SearchFiltersIn | None = Field(None, description=FILTERS_HELP),
        sort: Literal["relevance", "date"] = Field("relevance", description="date: newest first"),
        link_boost: float | None = Field(None, ge=0.0, le=5.0,
                                         description="raise notes linked to or from better hits (0 off)"),
        recency_boost: float | None = Field(None, ge=0.0, le=5.0,
                                            description="raise notes dated this week / month (0 off)"),
        ctx: Context = None,
    ) -> SearchResult:
        """Best-quality search for hard questions: query expansion, keyword + vector retrieval, fusion, LLM re-ranking. Slower."""
        if searches:
            query = " ".join(query.split())
        typed = [(s.type, " ".join(s.query.split())) for s in searches or []]
        result = _search(ctx, query=query, mode=Mode.HYBRID, searches=typed, intent=intent, rerank=rerank,
                         candidate_limit=candidate_limit, collections=collections, limit=limit, min_score=min_score,
                         filters=filters, sort=sort, link_boost=link_boost, recency_boost=recency_boost)
        return _result(result, _search_text(result))

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
        header = f"#{doc.docid} {doc.uri} lines {doc.from_line}-{doc.to_line} of {doc.total_lines}"
        if doc.truncated:
            header += f" (more: from_line={doc.to_line + 1})"
        return _result(doc, f"{header}\n{doc.text}")

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
    ) -> MultiGetResult:
        """Read several documents at once; large ones are skipped (raise max_bytes to include them) and one
        answer holds at most about 1 MB: what is left out is listed or counted."""
        found = documents_multi_get(pattern, max_bytes=max_bytes, max_lines=max_lines,
                                    collections=collections or None, access=mcp_access(ctx))
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
        lines = [f"{result.documents} documents in {len(result.collections)} collections"]
        lines += [f"- {c.uri} {c.documents} documents" for c in result.collections]
        vectors = result.embeddings
        lines.append(f"embeddings ({vectors.model or 'unknown model'}): {vectors.embedded} texts embedded, "
                     f"{vectors.pending} pending" + (f"; {vectors.hint}" if vectors.hint else ""))
        return _result(result, "\n".join(lines))


# --- links (indexing.links): a separate block, registered by pmd_site.mcp.server --------------------

def register_link_tools(server: MCPServer) -> None:
    """Add pmd_links to `server`."""

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
    ) -> LinksResult:
        """The notes a note links to ([[wikilinks]], embeds, links to .md files; unresolved ones too) and the
        notes that link to it, each with its line and the sentence around the link. Read one with pmd_get."""
        found = document_links(ref, access=mcp_access(ctx), collections=collections or None, limit=limit)
        data = found.as_dict()

        def info(row: dict) -> LinkInfo:
            return LinkInfo(kind=row["kind"], link=row["link"], line=row["line"], context=row["context"],
                            heading=row["heading"], resolved=row["resolved"], docid=row["docid"], uri=row["uri"],
                            title=row["title"])

        result = LinksResult(
            docid=data["docid"], uri=data["uri"], title=data["title"],
            links=[info(r) for r in data["links"]] if direction in ("both", "out") else [],
            backlinks=[info(r) for r in data["backlinks"]] if direction in ("both", "in") else [],
            links_total=data["links_total"], backlinks_total=data["backlinks_total"],
        )
        lines = [f"#{result.docid} {result.uri} {result.title}"]
        if direction in ("both", "out"):
            lines.append(f"links ({result.links_total}):")
            for link in result.links:
                where = f"#{link.docid} {link.uri}" if link.resolved else "unresolved"
                lines.append(f"  line {link.line} {link.link} -> {where}")
            if len(result.links) < result.links_total:
                lines.append(f"  … {result.links_total - len(result.links)} more (raise limit)")
        if direction in ("both", "in"):
            lines.append(f"backlinks ({result.backlinks_total}):")
            for link in result.backlinks:
                lines.append(f"  #{link.docid} {link.uri}:{link.line} {link.title}: {link.context[:200]}")
            if len(result.backlinks) < result.backlinks_total:
                lines.append(f"  … {result.backlinks_total - len(result.backlinks)} more (raise limit)")
        return _result(result, "\n".join(lines))


# --- related notes (search.retrieval.related): a separate block, registered by pmd_site.mcp.server ------

from search.retrieval.related import related_notes


class RelatedInfo(BaseModel):
    """One note related to the note asked about, with why."""

    docid: str = Field(description="pass to pmd_get")
    uri: str
    title: str
    score: float = Field(description="similarity + 0.5 per link direction + 0.1 per shared tag (at most 0.3)")
    similarity: float | None = Field(None, description="cosine similarity of meaning; None if not among the nearest")
    reasons: list[str] = Field(description='"links to it", "linked from it", "shares tags: a, b", "similar text (0.83)"')


class RelatedResult(BaseModel):
    docid: str
    uri: str
    title: str
    results: list[RelatedInfo] = Field(default_factory=list, description="best first")
    warnings: list[str] = Field(default_factory=list)
    copies: int = Field(0, description="other documents with the same content (never listed)")


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
    ) -> RelatedResult:
        """The notes related to a note: those linking to it, those it links to, those sharing its tags and
        those nearest in meaning, each with its reasons, best first. Read one with pmd_get."""
        data = related_notes(ref, access=mcp_access(ctx), limit=limit, collections=collections or None).as_dict()
        result = RelatedResult(
            docid=data["docid"], uri=data["uri"], title=data["title"], warnings=data["warnings"], copies=data["copies"],
            results=[RelatedInfo(docid=r["docid"], uri=r["uri"], title=r["title"], score=r["score"],
                                 similarity=r["similarity"], reasons=r["reasons"]) for r in data["results"]],
        )
        lines = [f"#{result.docid} {result.uri} {result.title}"]
        for note in result.results:
            lines.append(f"  #{note.docid} {note.uri} ({note.score:.2f}) {note.title}: {'; '.join(note.reasons)}")
        if not result.results:
            lines.append("  no related notes")
        lines += [f"warning: {w}" for w in result.warnings]
        return _result(result, "\n".join(lines))


# --- history (search.pipeline.history): a separate block, registered by pmd_site.mcp.server ------------

from search.pipeline.history import history_search
from search.retrieval.history import HistoryRequest


class CommitFile(BaseModel):
    status: str = Field(description="A added, M changed, D deleted, R renamed, C copied, T type changed")
    path: str
    old_path: str = ""
    docid: str | None = Field(None, description="the note at that path now (pass to pmd_get); None if gone")


class CommitHit(BaseModel):
    collection: str
    sha: str
    title: str
    message: str
    author: str
    email: str
    date: str
    score: float = Field(description="0..1")
    files: list[CommitFile]
    diff: str | None = Field(None, description="the diff excerpt (with diff=true)")


class HistoryResult(BaseModel):
    query: str
    mode: str
    results: list[CommitHit]
    warnings: list[str] = Field(default_factory=list)


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
    ) -> HistoryResult:
        """Commits of the collections that are git repositories (when and why something changed): title,
        message, author, date, changed files (with the #docid of the note as it is now) and, with diff,
        the diff excerpt. Read a changed note with pmd_get."""
        response = history_search(HistoryRequest(
            query=query, access=mcp_access(ctx), mode=mode, collections=collections, paths=[path] if path else [],
            author=author or "", after=after, before=before, limit=limit, diff=diff))
        result = HistoryResult(query=response.query, mode=response.mode, warnings=response.warnings, results=[
            CommitHit(collection=h.collection, sha=h.sha, title=h.title, message=h.message, author=h.author,
                      email=h.email, date=h.date, score=round(h.score, 4), diff=h.diff,
                      files=[CommitFile(status=f.status, path=f.path, old_path=f.old_path, docid=f.docid)
                             for f in h.files])
            for h in response.results])
        lines = []
        for hit in result.results:
            lines.append(f"{hit.sha[:10]} {hit.date[:10]} {hit.author} ({hit.score:.2f}) [{hit.collection}] {hit.title}")
            for f in hit.files:
                now = f" (now #{f.docid})" if f.docid else ""
                lines.append(f"  {f.status} {f.old_path + ' -> ' if f.old_path else ''}{f.path}{now}")
            if hit.diff:
                lines.append("  " + hit.diff[:2000].replace("\n", "\n  "))
        if not lines:
            lines.append(f"no commits for {result.query!r}")
        lines += [f"warning: {w}" for w in result.warnings]
        return _result(result, "\n".join(lines))
