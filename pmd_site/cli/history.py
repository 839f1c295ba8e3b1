"""`pmd history QUERY`: search the git history of collections that are repositories.

Calls search.pipeline.history.history_search, as /api/history, the MCP tool pmd_search_history and
the web UI's History page do; --json is that answer's shape. Formats: text (default), --json,
--csv, --md, --xml, --files (the changed notes that still exist, one per line).
"""

from __future__ import annotations

import sys

from indexing.errors import CommandError
from pmd_site.cli.output import local_access, print_markup, warn, write_text

FORMATS = (
    ("json", "JSON"),
    ("csv", "CSV"),
    ("md", "markdown"),
    ("xml", "XML"),
    ("files", "one line per changed note that still exists: #docid,pmd://path"),
)


def register(sub) -> None:
    parser = sub.add_parser("history", help="search the git history (commits) of collections that are repositories")
    parser.add_argument("query", nargs="*", help="words to search; filters alone list the newest matching commits")
    parser.add_argument("-n", type=int, dest="limit", default=10, metavar="N", help="number of commits (default 10)")
    parser.add_argument(
        "-c",
        "--collection",
        action="append",
        dest="collections",
        default=[],
        metavar="NAME",
        help="search only this collection (repeatable)",
    )
    parser.add_argument(
        "--path",
        action="append",
        dest="paths",
        default=[],
        metavar="GLOB",
        help="commits that changed a file matching GLOB (meetings/**, *.md); repeated: any",
    )
    parser.add_argument("--author", default="", metavar="A", help="part of the author's name or e-mail")
    parser.add_argument("--after", metavar="DATE", help="commits on or after DATE (2025-01-01, 'last week', 3d)")
    parser.add_argument("--before", metavar="DATE", help="commits before DATE")
    parser.add_argument("--diff", action="store_true", help="show each commit's diff excerpt")
    parser.add_argument(
        "--mode",
        choices=("hybrid", "keyword", "vector"),
        default="hybrid",
        help="keyword, vector, or both fused (default; keyword only until `pmd embed`)",
    )
    fmt = parser.add_mutually_exclusive_group()
    for flag, text in FORMATS:
        fmt.add_argument(f"--{flag}", action="store_const", const=flag, dest="format", help=f"output {text}")
    parser.set_defaults(func=cmd_history, format="cli")


def cmd_history(args) -> int:
    from search import HistoryRequest, history_search, render

    if args.limit < 1:
        raise CommandError("-n must be at least 1")
    query = " ".join(args.query)
    if not query.strip() and not (args.paths or args.author or args.after or args.before):
        raise CommandError("empty query: give words or a filter (--path, --author, --after, --before)")
    response = history_search(
        HistoryRequest(
            query=query,
            access=local_access(),
            mode=args.mode,
            collections=args.collections,
            paths=args.paths,
            author=args.author,
            after=args.after,
            before=args.before,
            limit=args.limit,
            diff=args.diff,
        )
    )
    if args.format != "json":
        for message in response.warnings:
            warn(message)
    text = render("history", args.format, response, diff=args.diff)
    if args.format == "cli":
        print_markup(text)
    else:
        write_text(text)
    if not response.results and args.format == "cli":
        print("no commits", file=sys.stderr)
    return 0


def _csv(response, *, diff: bool) -> str:
    """The CSV of `pmd history --csv` (tests read it directly)."""
    from search import render

    return render("history", "csv", response, diff=diff)
