"""`pmd searches [--days N]`: the search log (top, zero-result, weak and slow queries), as staff see it
on Status → Searches and /api/searches return it (indexing.selectors.search_log_report)."""

from __future__ import annotations

from pmd_site.cli.output import local_access, print_json, stdout_console


def register(sub) -> None:
    parser = sub.add_parser(
        "searches", help="what people searched: top, zero-result and weak queries (the notes' gaps), slow ones"
    )
    parser.add_argument("--days", type=int, default=30, help="over the last N days (default 30)")
    parser.add_argument("-n", type=int, dest="limit", default=10, metavar="N", help="N queries per list (default 10)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_searches)


def cmd_searches(args) -> int:
    from indexing.errors import CommandError
    from indexing.selectors import search_log_report

    if args.days < 1 or args.limit < 1:
        raise CommandError("--days and -n must be at least 1")
    report = search_log_report(access=local_access(), days=args.days, limit=args.limit)
    if args.json:
        print_json(report)
        return 0
    console = stdout_console()
    console.print(
        f"{report['searches']} searches in the last {report['days']} days; {report['opened']} with a result opened",
        markup=False,
    )
    for title, key in (
        ("top queries", "top"),
        ("no results", "zero_results"),
        ("weak results", "weak"),
        ("slow", "slow"),
    ):
        console.print(f"\n{title}:", markup=False)
        if not report[key]:
            console.print("  none", markup=False)
        for row in report[key]:
            score = "—" if row["top_score"] is None else f"{row['top_score']:.2f}"
            console.print(
                f"  {row['searches']:>5}×  {row['query']!r}  results {row['results']}, best {score}, "
                f"{row['latency_ms']:.0f} ms",
                markup=False,
                highlight=False,
            )
    return 0
