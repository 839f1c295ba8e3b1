"""`pmd links REF` (the links a note writes) and `pmd backlinks REF` (the notes that link to it).

Both read indexing.links.document_links, as /api/links and the MCP tool pmd_links do; the JSON
of both commands is that shape. Formats: text (default), --json, --csv, --md, --files.
"""

from __future__ import annotations

import io

from pmd_site.cli.output import escape, local_access, print_json, stdout_console, write_text

FORMATS = (("json", "JSON: the note, its links and its backlinks"), ("csv", "CSV"), ("md", "markdown"),
           ("files", "one line per linked note: #docid,pmd://path (resolved links only)"))


def register(sub) -> None:
    for name, help_text, func in (
        ("links", "the links a note writes: [[wikilinks]], embeds and links to .md files, and where they lead",
         cmd_links),
        ("backlinks", "the notes that link to a note, with the sentence around each link", cmd_backlinks),
    ):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("reference", help="PATH, pmd://collection/path or #docid")
        parser.add_argument("-c", "--collection", action="append", dest="collections", metavar="NAME")
        parser.add_argument("-n", type=int, dest="limit", metavar="N", help="at most N links")
        fmt = parser.add_mutually_exclusive_group()
        for flag, text in FORMATS:
            fmt.add_argument(f"--{flag}", action="store_const", const=flag, dest="format", help=f"output {text}")
        parser.set_defaults(func=func, format="cli")


def _read(args):
    from indexing.links import document_links
    from indexing.errors import CommandError

    if args.limit is not None and args.limit < 1:
        raise CommandError("-n must be at least 1")
    return document_links(args.reference, access=local_access(), collections=args.collections, limit=args.limit)


def cmd_links(args) -> int:
    result = _read(args)
    _print(result, result.links, args.format, backlinks=False)
    return 0


def cmd_backlinks(args) -> int:
    result = _read(args)
    _print(result, result.backlinks, args.format, backlinks=True)
    return 0


def _print(result, rows, fmt: str, *, backlinks: bool) -> None:
    doc = result.document
    total = result.backlinks_total if backlinks else result.links_total
    if fmt == "json":
        print_json(result.as_dict())
        return
    if fmt == "files":
        seen = []
        for link in rows:
            if link.other is not None and link.other.pk not in seen:
                seen.append(link.other.pk)
                write_text(f"#{link.other.docid},{link.other.uri}\n")
        return
    if fmt == "csv":
        from search.formatters import csv_writer

        buf = io.StringIO()
        writer = csv_writer(buf)
        if backlinks:
            writer.writerow(["docid", "uri", "line", "title", "link", "context"])
            for link in rows:
                writer.writerow([f"#{link.other.docid}", link.other.uri, link.line, link.other.title, link.written,
                                 link.context])
        else:
            writer.writerow(["line", "kind", "link", "resolved", "docid", "uri", "title", "context"])
            for link in rows:
                other = link.other
                writer.writerow([link.line, link.kind, link.written, "yes" if other else "no",
                                 f"#{other.docid}" if other else "", other.uri if other else "",
                                 other.title if other else "", link.context])
        write_text(buf.getvalue())
        return
    if fmt == "md":
        heading = "Backlinks of" if backlinks else "Links in"
        out = [f"# {heading} {doc.title or doc.path}", "", f"`{doc.uri}` `#{doc.docid}`", ""]
        if not rows:
            out.append("_None._")
        for link in rows:
            if backlinks:
                out.append(f"- [{link.other.title or link.other.path}]({link.other.uri}) line {link.line} "
                           f"(`#{link.other.docid}`)")
                if link.context:
                    out.append(f"  > {link.context}")
            elif link.other:
                out.append(f"- line {link.line}: `{link.written}` → [{link.other.title or link.other.path}]"
                           f"({link.other.uri}) (`#{link.other.docid}`)")
            else:
                out.append(f"- line {link.line}: `{link.written}` → _unresolved_")
        if len(rows) < total:
            out += ["", f"_{total - len(rows)} more not shown._"]
        write_text("\n".join(out) + "\n")
        return
    console = stdout_console()
    what = "backlinks" if backlinks else "links"
    console.print(f"[cyan]{escape(doc.uri)}[/] [dim]#{doc.docid}[/]  {escape(doc.title)}", highlight=False)
    if not rows:
        console.print(f"[dim]no {what}[/]")
        return
    for link in rows:
        other = link.other
        if backlinks:
            console.print(f"  [cyan]{escape(other.uri)}:{link.line}[/] [dim]#{other.docid}[/]  {escape(other.title)}",
                          highlight=False)
            if link.context:
                console.print(f"      {link.context}", highlight=False, markup=False)
        elif other is not None:
            console.print(f"  {link.line:>4}  {escape(link.written)}  →  [cyan]{escape(other.uri)}[/] "
                          f"[dim]#{other.docid}[/]", highlight=False)
        else:
            console.print(f"  {link.line:>4}  {escape(link.written)}  →  [yellow]unresolved[/]", highlight=False)
    if len(rows) < total:
        console.print(f"[dim]… and {total - len(rows)} more (-n)[/]")
