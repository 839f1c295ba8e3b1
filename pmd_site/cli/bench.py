"""`pmd bench DATASET_DIR --mode MODE`: thin adapter over pmd_site.bench.quality."""

from __future__ import annotations

from pmd_site.cli.output import escape, print_json, progress_bar, stdout_console


def register(sub) -> None:
    from pmd_site.bench.modes import MODES
    from pmd_site.bench.quality import SPLITS

    parser = sub.add_parser("bench", help="benchmark retrieval quality/latency or indexing on a test collection")
    parser.add_argument(
        "dataset",
        metavar="DATASET_DIR",
        nargs="?",
        help="folder with docs/ (sub-folders allowed; doc id = file name without .md), queries.tsv, qrels.tsv "
        "and optionally query_groups.tsv (query_id, groups…: metrics by group); or the name of a set "
        "kept in a checkout's scripts/bench/data (tldr-multi); not needed by --mode vector-scale (synthetic)",
    )
    parser.add_argument("--mode", default="search", choices=sorted(MODES), help="what to measure (default search)")
    parser.add_argument("--run", dest="run_file", metavar="FILE", help="write the run as query_id<TAB>rank<TAB>doc_id")
    parser.add_argument("--collection", metavar="NAME", help="collection to use (default bench-<dataset>)")
    parser.add_argument("--fresh", action="store_true", help="drop and re-index the collection first")
    parser.add_argument(
        "--queries",
        type=int,
        dest="limit",
        metavar="N",
        help="only the first N queries (of the split); --mode vector-scale: N queries (default 200)",
    )
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help="evaluate half of the queries, by 1-based position in queries.tsv: odd = 1st, 3rd, "
        "5th…, even = 2nd, 4th…; fit on one half, report the other (default all)",
    )
    parser.add_argument(
        "--as",
        dest="as_user",
        metavar="USER",
        help="search as this member, with access control on (default: the local user, who sees all)",
    )
    parser.add_argument(
        "--commits",
        type=int,
        metavar="N",
        help="--mode history (DATASET_DIR is a git work tree): index the newest N commits",
    )
    parser.add_argument(
        "--docs",
        type=int,
        metavar="N",
        help="--mode filtered: notes in the synthetic vault written to DATASET_DIR (default 100000)",
    )
    parser.add_argument(
        "--size",
        type=int,
        metavar="N",
        help="--mode vector-scale: synthetic 384-d vectors to index; --mode keyword-scale: passages "
        "written to DATASET_DIR and indexed (default 1000000 each)",
    )
    parser.add_argument(
        "--storage",
        metavar="LIST",
        help="--mode vector-scale: comma-separated indexes to measure, of vector, halfvec, bit, "
        "filtered (one collection through the vector index), partial (and through a "
        "partial index; default all)",
    )
    parser.add_argument(
        "--language",
        help="language of the bench collection when it is created (default auto; with --fresh to change it)",
    )
    parser.add_argument(
        "--typos",
        action="store_true",
        help="retrieval modes: also with one synthetic typo in each query's rarest word (fixed seed), "
        "typo correction off and on",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from indexing.errors import BenchmarkError
    from pmd_site.bench.modes import MODES, NO_DATASET
    from pmd_site.bench.quality import BenchOptions

    if args.dataset is None and args.mode not in NO_DATASET:
        raise BenchmarkError(f"--mode {args.mode} needs a DATASET_DIR")
    with progress_bar(f"bench {args.mode}", enabled=not args.json) as progress:
        options = BenchOptions(
            collection=args.collection,
            fresh=args.fresh,
            run_file=args.run_file,
            limit=args.limit,
            split=args.split,
            progress=progress,
            as_user=args.as_user,
            commits=args.commits,
            docs=args.docs,
            language=args.language,
            size=args.size,
            storages=[s.strip() for s in args.storage.split(",") if s.strip()] if args.storage else None,
        )
        if args.typos:
            from pmd_site.bench.typos import bench_typos

            report = bench_typos(args.dataset, options, mode_name=args.mode)
        else:
            report = MODES[args.mode](args.dataset, options)
    if args.json:
        print_json({"title": report.title, **report.data})
        return 0
    console = stdout_console()
    console.print(f"[bold]{escape(report.title)}[/]")
    width = max(len(label) for label, _ in report.lines)
    for label, value in report.lines:
        console.print(f"  {label:<{width}}  {value}", markup=False)
    return 0
