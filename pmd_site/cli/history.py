"""`pmd history QUERY`: search the git history of collections that are repositories.

Calls search.pipeline.history.history_search, as /api/history, the MCP tool pmd_search_history and
the web UI's History page do; --json is that answer's shape. Formats: text (default), --json,
--csv, --md, --xml, --files (the changed notes that still exist, one per line).
"""

from __future__ import annotations

import io
import sys

from indexing.errors import CommandError
from pmd_site.cli.output import escape, local_access, print_json, stdout_console, warn, write_text

FORMATS = (("json", "JSON"), ("csv", "CSV"), ("md", "markdown"), ("xml", "XML"),
           ("files", "one line per changed note that still exists: #docid,pmd://path"))


def register(sub) -> None:
    parser = sub.add_parser("history", help="search the git history (commits) of collections that are repositories")
    parser.add_argument("query", nargs="*", help="words to search; filters alone list the newest matching commits")
    parser.add_argument("-n", type=int, dest="limit", default=10, metavar="N", help="number of commits (default 10)")
    parser.add_argument("-c", "--collection", action="append", dest="collections", default=[], metavar="NAME",
                        help="search only this collection (repeatable)")
    parser.add_argument("--path", action="append", dest="paths", default=[], metavar="GLOB",
                        help="commits that changed a file matching GLOB (meetings/**, *.md); repeated: any")
    parser.add_argument("--author", default="", metavar="A", help="part of the author's name or e-mail")
    parser.add_argument("--after", metavar="DATE", help="commits on or after DATE (2025-01-01, 'last week', 3d)")
    parser.add_argument("--before", metavar="DATE", help="commits before DATE")
    parser.add_argument("--diff", action="store_true", help="show each commit's diff excerpt")
    parser.add_argument("--mode", choices=("hybrid", "keyword", "vector"), default="hybrid",
                        help="keyword, vector, or both fused (default; keyword only until `pmd embed`)")
    fmt = parser.add_mutually_exclusive_group()
    for flag, text in FORMATS:
        fmt.add_argument(f"--{flag}", action="store_const", const=flag, dest="format", help=f"output {text}")
    parser.set_defaults(func=cmd_history, format="cli")


def cmd_history(args) -> int:
    from search.pipeline.history import history_search
    from search.retrieval.history import HistoryRequest

    if args.limit < 1:
        raise CommandError("-n must be at least 1")
    query = " ".join(args.query)
    if not query.strip() and not (args.paths or args.author or args.after or args.before):
        raise CommandError("empty query: give words or a filter (--path, --author, --after, --before)")
    response = history_search(HistoryRequest(
        query=query, access=local_access(), mode=args.mode, collections=args.collections, paths=args.paths,
        author=args.author, after=args.after, before=args.before, limit=args.limit, diff=args.diff))
    if args.format != "json":
        for message in response.warnings:
            warn(message)
    write_text(_FORMATTERS[args.format](response, diff=args.diff))  # cli and json print themselves
    if not response.results and args.format == "cli":
        print("no commits", file=sys.stderr)
    return 0


def _json(response, *, diff: bool) -> str:
    print_json(response.as_dict())
    return ""


def _files(response, *, diff: bool) -> str:
    seen, out = set(), []
    for hit in response.results:
        for f in hit.files:
            if f.docid and (hit.collection, f.path) not in seen:
                seen.add((hit.collection, f.path))
                out.append(f"#{f.docid},pmd://{hit.collection}/{f.path}\n")
    return "".join(out)


def _csv(response, *, diff: bool) -> str:
    from search.formatters import csv_writer

    buf = io.StringIO()
    writer = csv_writer(buf)
    writer.writerow(["collection", "sha", "date", "author", "email", "score", "title", "files"]
                    + (["diff"] if diff else []))
    for hit in response.results:
        writer.writerow([hit.collection, hit.sha, hit.date, hit.author, hit.email, f"{hit.score:.4f}", hit.title,
                         ";".join(f.path for f in hit.files)] + ([hit.diff or ""] if diff else []))
    return buf.getvalue()


def _change(f) -> str:
    return f"{f.status} {f.old_path} → {f.path}" if f.old_path else f"{f.status} {f.path}"


def _md(response, *, diff: bool) -> str:
    out = [f"# History: {response.query or '(filters)'}", ""]
    if not response.results:
        out.append("_No commits._")
    for hit in response.results:
        out += [f"## {hit.title or '(no message)'}", "",
                f"`{hit.short}` · {hit.collection} · {hit.author} <{hit.email}> · {hit.date[:10]} · "
                f"score {hit.score:.2f}", ""]
        body = hit.message.split("\n", 1)[1].strip() if "\n" in hit.message else ""
        if body:
            out += [body, ""]
        for f in hit.files:
            link = f" ([now](pmd://{hit.collection}/{f.path}) `#{f.docid}`)" if f.docid else ""
            out.append(f"- {_change(f)}{link}")
        if hit.files:
            out.append("")
        if diff and hit.diff:
            out += ["```diff", hit.diff, "```", ""]
    return "\n".join(out) + "\n"


def _xml(response, *, diff: bool) -> str:
    from xml.sax.saxutils import escape, quoteattr  # XML output only

    from search.formatters import xml_text

    def attr(value: str) -> str:
        return quoteattr(xml_text(value))

    def text(value: str) -> str:
        return escape(xml_text(value))

    out = [f"<history query={attr(response.query)} mode={attr(response.mode)}>"]
    for hit in response.results:
        out.append(f"  <commit collection={attr(hit.collection)} sha={attr(hit.sha)} "
                   f"date={attr(hit.date)} author={attr(hit.author)} email={attr(hit.email)} "
                   f"score=\"{hit.score:.4f}\">")
        out.append(f"    <title>{text(hit.title)}</title>")
        out.append(f"    <message>{text(hit.message)}</message>")
        for f in hit.files:
            attrs = f"status={attr(f.status)} path={attr(f.path)}"
            if f.old_path:
                attrs += f" old_path={attr(f.old_path)}"
            if f.docid:
                attrs += f" docid={attr('#' + f.docid)} uri={attr(f'pmd://{hit.collection}/{f.path}')}"
            out.append(f"    <file {attrs}/>")
        if diff and hit.diff is not None:
            out.append(f"    <diff truncated=\"{str(hit.diff_truncated).lower()}\">{text(hit.diff)}</diff>")
        out.append("  </commit>")
    out.append("</history>")
    return "\n".join(out) + "\n"


def _cli(response, *, diff: bool) -> str:
    console = stdout_console()
    for hit in response.results:
        console.print(f"[yellow]{hit.short}[/] [bold]{escape(hit.title)}[/]  [dim]{hit.date[:10]} "
                      f"{escape(hit.author)} · {escape(hit.collection)} · {hit.score:.0%}[/]", highlight=False)
        for line in hit.snippet.splitlines():
            console.print(f"    {line}", highlight=False, markup=False)  # the console shows control characters
        for f in hit.files:
            now = f"  [cyan]pmd://{escape(hit.collection)}/{escape(f.path)}[/] [dim]#{f.docid}[/]" if f.docid else ""
            console.print(f"    [dim]{escape(_change(f))}[/]{now}", highlight=False)
        if diff and hit.diff:
            for line in hit.diff.splitlines():
                style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                console.print(f"    [{style}]{escape(line)}[/]", highlight=False)
        console.print()
    return ""


_FORMATTERS = {"cli": _cli, "json": _json, "csv": _csv, "md": _md, "xml": _xml, "files": _files}
