"""`pmd search` (BM25 keyword search) and the option/output helpers every search command reuses.

`vsearch` and `query` build on the two helpers:

    from pmd_site.cli.search import add_search_options, run_search_command
    add_search_options(parser)
    parser.set_defaults(func=lambda args: run_search_command(args, vector_search, mode=Mode.VECTOR))

`service_fn(request: SearchRequest) -> SearchResponse` is the mode's one service call.
"""

from __future__ import annotations

import sys
from typing import Callable

from pmd_site.cli import CommandError


def add_search_options(parser) -> None:
    """QUERY plus the shared options: -n, --all, --min-score, -c, --full, --line-numbers,
    --hits-per-file and one output format flag."""
    parser.add_argument("query", nargs="+", help="search text (quote it or not)")
    parser.add_argument("-n", type=int, dest="limit", metavar="N",
                        help="number of results (default 5; 20 with --json/--files)")
    parser.add_argument("--all", action="store_true", help="return every match")
    parser.add_argument("--min-score", type=float, default=0.0, metavar="S", help="drop results scoring below S (0..1)")
    parser.add_argument("-c", "--collection", action="append", dest="collections", default=[], metavar="NAME",
                        help="search only this collection (repeatable)")
    parser.add_argument("--full", action="store_true", help="show whole documents instead of snippets")
    parser.add_argument("--line-numbers", action="store_true", help="prefix snippet lines with line numbers")
    parser.add_argument("--hits-per-file", type=int, default=1, dest="hits_per_document", metavar="K",
                        help="up to K matching passages per document (default 1)")
    fmt = parser.add_mutually_exclusive_group()
    for name, text in (("json", "JSON"), ("csv", "CSV"), ("md", "markdown"), ("xml", "XML"),
                       ("files", "one line per file: #docid,score,pmd://path,context")):
        fmt.add_argument(f"--{name}", action="store_const", const=name, dest="format", help=f"output {text}")
    parser.set_defaults(format="cli")


def search_request_from_args(args, *, mode: str, **overrides):
    """The SearchRequest an adapter's parsed arguments describe."""
    from search.formatters import MACHINE_FORMATS
    from search.request import SearchRequest

    if args.limit is not None and args.limit < 1:
        raise CommandError("-n must be at least 1")
    if not 0.0 <= args.min_score <= 1.0:
        raise CommandError("--min-score must be between 0 and 1")
    if args.hits_per_document < 1:
        raise CommandError("--hits-per-file must be at least 1")
    request = SearchRequest(
        query=" ".join(args.query), mode=mode, limit=args.limit, all=args.all, min_score=args.min_score,
        collections=list(args.collections or []), full=args.full, line_numbers=args.line_numbers,
        hits_per_document=args.hits_per_document, **overrides,
    )
    if request.limit is None and not request.all:
        request.limit = request.effective_limit(machine_format=args.format in MACHINE_FORMATS)
    return request


def run_search_command(args, service_fn: Callable, *, mode: str | None = None, **overrides) -> int:
    """Build the request, call the service once, print it in the chosen format."""
    from pmd_site.cli.output import color_enabled, warn
    from search.formatters import format_response
    from search.request import Mode

    request = search_request_from_args(args, mode=mode or Mode.KEYWORD, **overrides)
    if not request.query.strip():
        raise CommandError("empty query")
    response = service_fn(request)
    for message in response.warnings:
        warn(message)
    text = format_response(response, args.format, color=args.format == "cli" and color_enabled(sys.stdout),
                           line_numbers=request.line_numbers, full=request.full)
    sys.stdout.write(text)
    if not response.results and args.format == "cli":
        print("no results", file=sys.stderr)
    return 0


def register(sub) -> None:
    parser = sub.add_parser("search", help="keyword search (BM25): fast, exact words, no models needed")
    add_search_options(parser)
    parser.set_defaults(func=cmd_search)


def cmd_search(args) -> int:
    from search.retrieval.keyword import keyword_search
    from search.request import Mode

    return run_search_command(args, keyword_search, mode=Mode.KEYWORD)
