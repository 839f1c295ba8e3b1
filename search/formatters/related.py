"""The notes related to a note (search.retrieval.related) for the CLI, JSON and MCP."""

from __future__ import annotations

from search.formatters.registry import as_json, markup_text, renders

renders("related", "json")(as_json)


@renders("related", "cli")
def _cli(found, **_) -> str:
    """Console markup: the note, then each related note with its reasons."""
    doc = found.document
    out = [f"[cyan]{markup_text(doc.uri)}[/] [dim]#{doc.docid}[/]  {markup_text(doc.title)}"]
    for note in found.results:
        other = note.document
        out.append(
            f"  {note.score:5.2f}  [cyan]{markup_text(other.uri)}[/] [dim]#{other.docid}[/]  {markup_text(other.title)}"
        )
        out.append(f"         [dim]{markup_text('; '.join(note.reasons))}[/]")
    if not found.results:
        out.append("[dim]no related notes[/]")
    out += [f"[yellow]warning:[/] {markup_text(warning)}" for warning in found.warnings]
    return "".join(line + "\n" for line in out)


@renders("related", "mcp")
def _mcp(result, **_) -> str:
    """`result`: pmd_related's RelatedBrief."""
    lines = [f"#{result.docid} {result.uri} {result.title}"]
    for note in result.results:
        lines.append(f"  #{note.docid} {note.uri} ({note.score:.2f}) {note.title}: {'; '.join(note.reasons)}")
    if not result.results:
        lines.append("  no related notes")
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)
