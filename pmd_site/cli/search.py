"""`pmd search` (BM25 keyword search), `pmd vsearch` (vector search) and the option/output helpers
every search command reuses.

`query` builds on the two helpers:

    from pmd_site.cli.search import add_search_options, run_search_command
    add_search_options(parser)
    parser.set_defaults(func=lambda args: run_search_command(args, mode=Mode.HYBRID))

Every search goes through `search.pipeline.dispatch.search_run`, as in the other faces.
"""

from __future__ import annotations

import sys

from indexing.errors import CommandError


def add_search_options(parser) -> None:
    """QUERY plus the shared options: -n, --all, --min-score, -c, --full, --line-numbers,
    --hits-per-file and one output format flag."""
    parser.add_argument(
        "query", nargs="*", help="search text (quote it or not); filters alone list the notes they match"
    )
    parser.add_argument(
        "-n", type=int, dest="limit", metavar="N", help="number of results (default 5; 20 with --json/--files)"
    )
    parser.add_argument("--all", action="store_true", help="return every match")
    parser.add_argument("--min-score", type=float, default=0.0, metavar="S", help="drop results scoring below S (0..1)")
    parser.add_argument(
        "-c",
        "--collection",
        action="append",
        dest="collections",
        default=[],
        metavar="NAME",
        help="search only this collection (repeatable)",
    )
    parser.add_argument("--full", action="store_true", help="show whole documents instead of snippets")
    parser.add_argument("--line-numbers", action="store_true", help="prefix snippet lines with line numbers")
    parser.add_argument(
        "--hits-per-file",
        type=int,
        default=1,
        dest="hits_per_document",
        metavar="K",
        help="up to K matching passages per document (default 1)",
    )
    filters = parser.add_argument_group(
        "filters",
        "also written in QUERY: tag:db, -tag:x, path:meetings/**, after:2025-01-01, "
        'before:"last week", status:draft, -status:done',
    )
    filters.add_argument(
        "--tag",
        action="append",
        dest="tags",
        default=[],
        metavar="TAG",
        help="notes with this tag (frontmatter or #inline); repeated or a,b: any of them",
    )
    filters.add_argument(
        "--exclude-tag",
        action="append",
        dest="exclude_tags",
        default=[],
        metavar="TAG",
        help="leave out notes with this tag (repeatable)",
    )
    filters.add_argument(
        "--path",
        action="append",
        dest="paths",
        default=[],
        metavar="GLOB",
        help="notes whose path in the collection matches (meetings/**, *.md); repeated: any",
    )
    filters.add_argument(
        "--after", metavar="DATE", help="notes dated on or after DATE (2025-01-01, 2025-06, 'last week', 3d, yesterday)"
    )
    filters.add_argument("--before", metavar="DATE", help="notes dated before DATE")
    filters.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="frontmatter KEY is VALUE (or its list holds it; v1,v2: any); KEY!=VALUE excludes; repeatable",
    )
    parser.add_argument(
        "--sort",
        choices=("relevance", "date"),
        default="relevance",
        help="order of the results: relevance (default) or date, newest first",
    )
    parser.add_argument(
        "--exact", action="store_false", dest="correct", help="search the words as written: no typo correction"
    )
    parser.add_argument(
        "--no-time-words",
        action="store_false",
        dest="time_words",
        help="'last week', 'yesterday', 'recent' are words, not a date filter",
    )
    fmt = parser.add_mutually_exclusive_group()
    for name, text in (
        ("json", "JSON"),
        ("csv", "CSV"),
        ("md", "markdown"),
        ("xml", "XML"),
        ("files", "one line per file: #docid,score,pmd://path,context"),
    ):
        fmt.add_argument(f"--{name}", action="store_const", const=name, dest="format", help=f"output {text}")
    parser.set_defaults(format="cli")


def search_request_from_args(args, *, mode: str, **overrides):
    """The SearchRequest an adapter's parsed arguments describe."""
    from pmd_site.cli.output import local_access
    from search import MACHINE_FORMATS, SearchRequest, filters_from_options

    if args.limit is not None and args.limit < 1:
        raise CommandError("-n must be at least 1")
    if not 0.0 <= args.min_score <= 1.0:
        raise CommandError("--min-score must be between 0 and 1")
    if args.hits_per_document < 1:
        raise CommandError("--hits-per-file must be at least 1")
    request = SearchRequest(
        query=" ".join(args.query),
        mode=mode,
        limit=args.limit,
        all=args.all,
        min_score=args.min_score,
        collections=list(args.collections or []),
        full=args.full,
        line_numbers=args.line_numbers,
        hits_per_document=args.hits_per_document,
        access=local_access(),
        sort=args.sort,
        correct=getattr(args, "correct", True),
        time_words=getattr(args, "time_words", True),
        face="cli",
        filters=filters_from_options(
            tags=args.tags,
            exclude_tags=args.exclude_tags,
            paths=args.paths,
            after=args.after,
            before=args.before,
            where=args.where,
        ),
        **overrides,
    )
    if request.limit is None and not request.all:
        request.limit = request.effective_limit(machine_format=args.format in MACHINE_FORMATS)
    return request


def run_search_command(args, *, mode: str, **overrides) -> int:
    """Build the request, run it once through the dispatcher, print it in the chosen format."""
    search_and_print(args, mode=mode, **overrides)
    return 0


def search_and_print(args, *, mode: str, **overrides):
    """`run_search_command` for a command that shows more afterwards: returns the SearchResponse."""
    from pmd_site.cli.output import color_enabled, warn, write_text
    from search import format_response, search_run

    request = search_request_from_args(args, mode=mode, **overrides)
    response = search_run(request)
    if response.corrected_query:
        from pmd_site.cli.output import escape, stderr_console

        stderr_console().print(
            f"showing results for [bold]{escape(response.corrected_query)}[/]; search instead for "
            f"{escape(response.query)!r} with --exact",
            markup=True,
            highlight=False,
        )
    if response.time_words:
        from pmd_site.cli.output import escape, stderr_console

        stderr_console().print(
            f"read {escape(response.time_words)!r} as a date filter ({escape(response.filters.describe())}); "
            "--no-time-words searches the words",
            markup=True,
            highlight=False,
        )
    for message in response.warnings:
        warn(message)
    text = format_response(
        response,
        args.format,
        color=args.format == "cli" and color_enabled(sys.stdout),
        line_numbers=request.line_numbers,
        full=request.full,
    )
    # cli cleans the notes' text itself (its colours are pmd's); json escapes it; the others are the notes' text
    (sys.stdout.write if args.format in ("cli", "json") else write_text)(text)
    if not response.results and args.format == "cli":
        print("no results", file=sys.stderr)
    return response


def register(sub) -> None:
    parser = sub.add_parser("search", help="keyword search (BM25): fast, exact words, no models needed")
    add_search_options(parser)
    parser.set_defaults(func=cmd_search)


def register_vsearch(sub) -> None:
    """Called by `pmd_site.cli.embed.register`, so `pmd --help` keeps listing vsearch after embed."""
    parser = sub.add_parser("vsearch", help="vector search: meaning, not exact words (needs `pmd embed`)")
    add_search_options(parser)
    parser.set_defaults(func=cmd_vsearch)


def cmd_search(args) -> int:
    from search import Mode

    return run_search_command(args, mode=Mode.KEYWORD)


def cmd_vsearch(args) -> int:
    from search import Mode

    return run_search_command(args, mode=Mode.VECTOR)
