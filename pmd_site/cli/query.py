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
    parser.add_argument("-C", "--candidate-limit", type=int, default=40, metavar="N",
                        help="documents kept after fusion and re-ranked (default 40)")
    parser.add_argument("--intent", metavar="TEXT", help="what you mean, to disambiguate expansion and re-ranking")
    parser.add_argument("--link-boost", type=float, metavar="W",
                        help="raise notes linked to or from better hits by W × their place (0 off; default PMD_LINK_BOOST)")
    parser.add_argument("--recency-boost", type=float, metavar="W",
                        help="raise notes dated this week by W, this month by W/2 (0 off; default PMD_RECENCY_BOOST)")
    parser.add_argument("--explain", action="store_true",
                        help="show each result's rank and score per list, RRF, re-rank score, blend and stage timings")
    parser.set_defaults(func=cmd_query)


def cmd_query(args) -> int:
    from pmd_site.cli.search import search_and_print
    from search.request import Mode

    if args.candidate_limit < 1:
        raise CommandError("-C/--candidate-limit must be at least 1")
    if any(w is not None and not 0 <= w <= 5 for w in (args.link_boost, args.recency_boost)):
        raise CommandError("--link-boost/--recency-boost: a weight from 0 to 5")
    response = search_and_print(
        args, mode=Mode.HYBRID, expand=args.expand, rerank=args.rerank,
        candidate_limit=args.candidate_limit, intent=(args.intent or None), explain=args.explain,
        link_boost=args.link_boost, recency_boost=args.recency_boost,
    )
    if args.explain and args.format == "cli":
        from pmd_site.cli.output import write_text

        write_text(format_explain(response))
    return 0


def format_explain(response) -> str:
    """A plain-text breakdown of how each result got its score."""
    lines = ["", "explain:"]
    for result in response.results:
        e = result.explain or {}
        if not e:
            continue
        lines.append(f"  #{e['rank']} {result.uri}  final {e['final']:.4f}")
        for name, hit in e.get("lists", {}).items():
            score = "" if hit.get("score") is None else f" score {hit['score']:.4f}"
            lines.append(f"      {name:<22} rank {hit['rank']:>3}{score}  z {hit['z']:+.3f}")
        f = e.get("fusion") or {}
        z = e.get("z") or {}
        terms = " + ".join(f"{f.get('w_' + kind, 0):.2f} × z_{kind} {z[kind]:+.3f}" for kind in ("keyword", "vector")
                           if kind in z)
        lines.append(f"      fused {terms} = {e['fused']:+.4f} (fusion rank {e['fusion_rank']}); "
                     f"retrieval {e['retrieval']:.4f}")
        if e.get("beyond_candidate_limit"):
            lines.append("      beyond the candidate limit: not re-ranked, kept in fusion order")
        elif e.get("rerank") is not None:
            w = e["blend_weight"]
            lines.append(f"      blend {w:.2f} × retrieval {e['retrieval']:.4f} + {1 - w:.2f} × rerank "
                         f"{e['rerank']:.4f} = {e['final']:.4f}")
        else:
            lines.append(f"      not re-ranked: final = retrieval {e['retrieval']:.4f}")
    first = next((r.explain for r in response.results if r.explain), None)
    if first:
        plan = first.get("plan") or {}
        variants = ", ".join(f"{v['type']}: {v['text']}" for v in plan.get("variants", [])) or "none"
        f = first.get("fusion") or {}
        nqc = ", ".join(f"{k} {v:.3f}" for k, v in (f.get("nqc") or {}).items() if v is not None)
        lines.append(f"  fusion: w_keyword {f.get('w_keyword', 0):.2f}, w_vector {f.get('w_vector', 0):.2f} "
                     f"(NQC {nqc or 'none'}); #1's evidence w_k·keyword + w_v·vector = "
                     f"{f.get('top_evidence', 0):.4f}")
        lines.append(f"  plan: {plan.get('source')}{' (strong keyword signal)' if plan.get('strong_signal') else ''}"
                     f"; variants: {variants}")
        if plan.get("intent"):
            lines.append(f"  intent: {plan['intent']}")
        reranker = first.get("reranker") or {}
        if reranker.get("model"):
            lines.append(f"  reranker: {reranker['model']} ({reranker.get('method') or 'not used'}; "
                         f"{reranker.get('judged', 0)} judged, {reranker.get('cached', 0)} cached, "
                         f"{reranker.get('unjudged', 0)} left out)")
    if response.timings:
        lines.append("  timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in response.timings.items()))
    return "\n".join(lines) + "\n"
