"""A note's links and backlinks (indexing.links.DocumentLinks) in every format: type `links` shows
the links the note writes, `backlinks` the notes that link to it; JSON holds both."""

from __future__ import annotations

from search.formatters.registry import as_json, csv_text, markup_line, markup_text, renders

renders("links", "json")(as_json)
renders("backlinks", "json")(as_json)


def _rows(result, backlinks: bool):
    return (result.backlinks, result.backlinks_total) if backlinks else (result.links, result.links_total)


def _files(result, *, backlinks: bool) -> str:
    rows, _ = _rows(result, backlinks)
    seen, out = [], []
    for link in rows:
        if link.other is not None and link.other.pk not in seen:
            seen.append(link.other.pk)
            out.append(f"#{link.other.docid},{link.other.uri}\n")
    return "".join(out)


def _csv(result, *, backlinks: bool) -> str:
    rows, _ = _rows(result, backlinks)
    if backlinks:
        return csv_text(
            [["docid", "uri", "line", "title", "link", "context"]]
            + [
                [f"#{link.other.docid}", link.other.uri, link.line, link.other.title, link.written, link.context]
                for link in rows
            ]
        )
    return csv_text(
        [["line", "kind", "link", "resolved", "docid", "uri", "title", "context"]]
        + [
            [
                link.line,
                link.kind,
                link.written,
                "yes" if link.other else "no",
                f"#{link.other.docid}" if link.other else "",
                link.other.uri if link.other else "",
                link.other.title if link.other else "",
                link.context,
            ]
            for link in rows
        ]
    )


def _md(result, *, backlinks: bool) -> str:
    rows, total = _rows(result, backlinks)
    doc = result.document
    out = [
        f"# {'Backlinks of' if backlinks else 'Links in'} {doc.title or doc.path}",
        "",
        f"`{doc.uri}` `#{doc.docid}`",
        "",
    ]
    if not rows:
        out.append("_None._")
    for link in rows:
        if backlinks:
            out.append(
                f"- [{link.other.title or link.other.path}]({link.other.uri}) line {link.line} (`#{link.other.docid}`)"
            )
            if link.context:
                out.append(f"  > {link.context}")
        elif link.other:
            out.append(
                f"- line {link.line}: `{link.written}` → [{link.other.title or link.other.path}]"
                f"({link.other.uri}) (`#{link.other.docid}`)"
            )
        else:
            out.append(f"- line {link.line}: `{link.written}` → _unresolved_")
    if len(rows) < total:
        out += ["", f"_{total - len(rows)} more not shown._"]
    return "\n".join(out) + "\n"


def _cli(result, *, backlinks: bool) -> str:
    """Console markup: the note, then a line per link."""
    rows, total = _rows(result, backlinks)
    doc = result.document
    out = [f"[cyan]{markup_text(doc.uri)}[/] [dim]#{doc.docid}[/]  {markup_text(doc.title)}"]
    if not rows:
        out.append(f"[dim]no {'backlinks' if backlinks else 'links'}[/]")
        return "".join(line + "\n" for line in out)
    for link in rows:
        other = link.other
        if backlinks:
            out.append(
                f"  [cyan]{markup_text(other.uri)}:{link.line}[/] [dim]#{other.docid}[/]  {markup_text(other.title)}"
            )
            if link.text:
                out.append(f"      {markup_line(link.text)}")
        elif other is not None:
            out.append(
                f"  {link.line:>4}  {markup_text(link.written)}  →  [cyan]{markup_text(other.uri)}[/] "
                f"[dim]#{other.docid}[/]"
            )
        else:
            out.append(f"  {link.line:>4}  {markup_text(link.written)}  →  [yellow]unresolved[/]")
    if len(rows) < total:
        out.append(f"[dim]… and {total - len(rows)} more (-n)[/]")
    return "".join(line + "\n" for line in out)


for _fmt, _renderer in (("files", _files), ("csv", _csv), ("md", _md), ("cli", _cli)):
    renders("links", _fmt)(lambda result, _r=_renderer, **_: _r(result, backlinks=False))
    renders("backlinks", _fmt)(lambda result, _r=_renderer, **_: _r(result, backlinks=True))


@renders("links", "mcp")
def _mcp(result, *, direction: str = "both", **_) -> str:
    """`result`: pmd_links' LinksBrief; `direction` out, in or both."""
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
            lines.append(f"  #{link.docid} {link.uri}:{link.line} {link.title}: {link.text[:200]}")
        if len(result.backlinks) < result.backlinks_total:
            lines.append(f"  … {result.backlinks_total - len(result.backlinks)} more (raise limit)")
    return "\n".join(lines)
