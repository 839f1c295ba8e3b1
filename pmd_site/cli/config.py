"""`pmd config show|set|unset`: the index's own configuration, which every process uses
(indexing/services/index_config.py)."""

from __future__ import annotations

from pmd_site.cli.output import FOLLOW_JOB, print_json, stdout_console, warn


def register(sub) -> None:
    config = sub.add_parser("config", help="show or change the index's configuration (backend, URLs, models, chunking)")
    csub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = csub.add_parser("show", help="each setting: the value used here, the index's, and where it comes from")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_config_show)
    put = csub.add_parser("set", help="write settings into the index (NAME=VALUE …), for every process")
    put.add_argument("pairs", nargs="+", metavar="NAME=VALUE")
    put.add_argument(
        "--yes",
        action="store_true",
        help="confirm a change that embeds everything again (another model, chunking or backend)",
    )
    put.set_defaults(func=cmd_config_set)
    unset = csub.add_parser("unset", help="forget settings: processes fall back to their environment or the default")
    unset.add_argument("names", nargs="+", metavar="NAME")
    unset.set_defaults(func=cmd_config_unset)


def cmd_config_show(args) -> int:
    from indexing.services.index_config import index_config_effective

    rows = index_config_effective()
    if args.json:
        print_json(rows)
        return 0
    console = stdout_console()
    for row in rows:
        line = f"{row['name']}={row['value']}  ({row['source_words']})"
        if row["mismatch"]:
            line += f"  the index says {row['index']}"
        console.print(line, markup=False, highlight=False)
    return 0


def _pairs(pairs: list[str]) -> dict[str, str]:
    from indexing.errors import InvalidSetting

    values = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise InvalidSetting(f"{pair!r}: write NAME=VALUE, e.g. PMD_EMBED_MODEL=nomic-embed-text")
        values[name.strip().upper()] = value
    return values


def cmd_config_set(args) -> int:
    import sys

    from indexing.errors import ReplacesVectors
    from indexing.services.index_config import index_config_set

    values = _pairs(args.pairs)
    try:
        change = index_config_set(values=values, replace_vectors=args.yes)
    except ReplacesVectors as exc:
        if not sys.stdin.isatty():
            raise
        print(str(exc).removesuffix(" (confirm with --yes)"))
        if input("embed everything again? [y/N] ").strip().lower() not in {"y", "yes"}:
            print("nothing changed")
            return 1
        change = index_config_set(values=values, replace_vectors=True)
    console = stdout_console()
    if not change.changed:
        console.print("nothing changed")
    for name, (before, after) in change.changed.items():
        was = "(not set)" if before is None else (before or '""')  # "": set empty (no model)
        now = after or '""'
        console.print(f"{name}: {was} → {now}", markup=False)
    if change.replaces_vectors:
        from indexing.services.background import embedding_request

        job = embedding_request(no_worker="queue")
        console.print(
            f"embedding again: queued; {FOLLOW_JOB}" if job else "embedding again on the next `pmd up` or `pmd embed`",
            markup=False,
        )
    elif change.changed:
        warn("processes running now keep their settings until they restart")
    return 0


def cmd_config_unset(args) -> int:
    from indexing.services.index_config import index_config_unset

    names = [name.upper() for name in args.names]
    stdout_console().print(f"{index_config_unset(names=names)} setting(s) forgotten")
    return 0
