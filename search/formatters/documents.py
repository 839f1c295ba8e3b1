"""The compact text of the MCP tools that read documents and the index's status: the tools' own
models (pmd_site.mcp.models, search.schemas) in few tokens."""

from __future__ import annotations

from search.formatters.registry import renders


@renders("document", "mcp")
def _document(doc, **_) -> str:
    """`doc`: pmd_get's DocumentText."""
    header = f"#{doc.docid} {doc.uri} lines {doc.from_line}-{doc.to_line} of {doc.total_lines}"
    if doc.truncated:
        header += f" (more: from_line={doc.to_line + 1})"
    return f"{header}\n{doc.text}"


@renders("documents", "mcp")
def _documents(result, **_) -> str:
    """`result`: pmd_multi_get's MultiGetBrief."""
    parts = []
    for d in result.documents:
        note = f" [skipped: {d.skipped}]" if d.skipped else (" [truncated]" if d.truncated else "")
        parts.append(f"=== #{d.docid} {d.uri}{note}" + (f"\n{d.text}" if d.text is not None else ""))
    if result.missing:
        parts.append("not found: " + ", ".join(result.missing))
    if result.notice:
        parts.append(f"note: {result.notice}")
    return "\n\n".join(parts) or "no documents"


@renders("status", "mcp")
def _status(result, **_) -> str:
    """`result`: pmd_status's StatusResult."""
    lines = [f"{result.documents} documents in {len(result.collections)} collections"]
    lines += [f"- {c.uri} {c.documents} documents" for c in result.collections]
    vectors = result.embeddings
    lines.append(
        f"embeddings ({vectors.model or 'unknown model'}): {vectors.embedded} texts embedded, "
        f"{vectors.pending} pending" + (f"; {vectors.hint}" if vectors.hint else "")
    )
    return "\n".join(lines)
