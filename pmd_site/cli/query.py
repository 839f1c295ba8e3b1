"""`pmd query`: hybrid search (expansion, fusion, re-ranking) from the command line.

A thin adapter: the shared search options and formats from `pmd_site.cli.search`, the
pipeline options below, one call to `search.pipeline.dispatch.search_run`. `--explain` adds
the per-result score breakdown and stage timings (in JSON they are always carried
in `scores`; `explain` and `timings_ms` hold the rest).
"""

from __future__ import annotations

from indexing.errors import CommandError


def register(sub) -> None:
    from pmd_site.cli.search import add_search_options

    parser = sub.add_parser(
        "query",
        help="hybrid search: keyword + vector + LLM query expansion and re-ranking (best quality)",
        description=(
            "Hybrid search. QUERY may also be a structured query document with lines "
            "'lex: …' (keyword variant), 'vec: …' (semantic variant), 'hyde: …' (hypothetical "
            "answer passage) and 'intent: …', which skips model expansion."
        ),
    )
    add_search_options(parser)
    parser.add_argument("--no-expand", dest="expand", action="store_false", help="skip LLM query expansion")
    parser.add_argument("--no-rerank", dest="rerank", action="store_false", help="skip LLM re-ranking (fusion order)")
    parser.add_argument(
        "-C",
        "--candidate-limit",
        type=int,
        default=40,
        metavar="N",
        help="documents kept after fusion and re-ranked (default 40)",
    )
    parser.add_argument("--intent", metavar="TEXT", help="what you mean, to disambiguate expansion and re-ranking")
    parser.add_argument(
        "--link-boost",
        type=float,
        metavar="W",
        help="raise notes linked to or from better hits by W × their place (0 off; default PMD_LINK_BOOST)",
    )
    parser.add_argument(
        "--recency-boost",
        type=float,
        metavar="W",
        help="raise notes dated this week by W, this month by W/2 (0 off; default PMD_RECENCY_BOOST)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="show each result's rank and score per list, RRF, re-rank score, blend and stage timings",
    )
    parser.set_defaults(func=cmd_query)


def cmd_query(args) -> int:
    from pmd_site.cli.search import search_and_print
    from search import Mode

    if args.candidate_limit < 1:
        raise CommandError("-C/--candidate-limit must be at least 1")
    if any(w is not None and not 0 <= w <= 5 for w in (args.link_boost, args.recency_boost)):
        raise CommandError("--link-boost/--recency-boost: a weight from 0 to 5")
    response = search_and_print(
        args,
        mode=Mode.HYBRID,
        expand=args.expand,
        rerank=args.rerank,
        candidate_limit=args.candidate_limit,
        intent=(args.intent or None),
        explain=args.explain,
        link_boost=args.link_boost,
        recency_boost=args.recency_boost,
    )
    if args.explain and args.format == "cli":
        from pmd_site.cli.output import write_text
        from search import render

        write_text(render("explain", "cli", response))
    return 0
