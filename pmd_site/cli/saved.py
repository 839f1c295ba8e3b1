"""`pmd saved add|list|run|rm`: saved searches (indexing.services.saved_searches; running one is
search.pipeline.saved.saved_search_run), as /api/saved offers them."""

from __future__ import annotations

from pmd_site.cli.output import local_access, print_json, stdout_console


def register(sub) -> None:
    parser = sub.add_parser("saved", help="saved searches: add, list, run (with what is new since the last run), rm")
    verbs = parser.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="save a search: NAME QUERY… (filters may be in the query: tag:db after:2025-01)")
    add.add_argument("name")
    add.add_argument("query", nargs="+")
    add.add_argument(
        "--mode", default="keyword", help="keyword (default), vector or hybrid (or search, vsearch, query)"
    )
    add.add_argument("-c", "--collection", action="append", dest="collections", default=[], metavar="NAME")
    add.add_argument("--group", help="share it with this group (its members may run it)")
    add.add_argument(
        "--webhook",
        default="",
        metavar="URL",
        help="POST a JSON digest of its new matches here (every PMD_DIGEST_INTERVAL seconds)",
    )
    add.add_argument(
        "--email", action="store_true", help="email a digest of its new matches (when email is configured)"
    )
    add.set_defaults(func=cmd_add)
    listing = verbs.add_parser("list", help="your saved searches and those shared with your groups")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_list)
    run = verbs.add_parser("run", help="run a saved search; marks the results new since its last run")
    run.add_argument("name")
    run.add_argument("-n", type=int, dest="limit", metavar="N")
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=cmd_run)
    digest = verbs.add_parser("digest", help="change where one of your saved searches sends its new matches")
    digest.add_argument("name")
    digest.add_argument("--webhook", metavar="URL", help="POST a JSON digest here ('' stops)")
    digest.add_argument("--email", choices=["on", "off"], help="email a digest to you (when email is configured)")
    digest.set_defaults(func=cmd_digest)
    remove = verbs.add_parser("rm", help="remove one of your saved searches")
    remove.add_argument("name")
    remove.set_defaults(func=cmd_rm)


def cmd_add(args) -> int:
    from indexing.services.saved_searches import saved_search_add
    from search import mode_normalize

    try:
        mode = mode_normalize(args.mode)
    except ValueError as exc:
        from indexing.errors import CommandError

        raise CommandError(str(exc)) from None
    saved = saved_search_add(
        access=local_access(),
        name=args.name,
        query=" ".join(args.query),
        mode=mode,
        collections=args.collections,
        group=args.group,
        webhook_url=args.webhook,
        email_digest=args.email,
    )
    stdout_console().print(
        f"saved '{saved.name}'" + (f", shared with {saved.group.name}" if saved.group else ""), markup=False
    )
    return 0


def cmd_digest(args) -> int:
    from indexing.services.saved_searches import saved_search_digest_set

    saved = saved_search_digest_set(
        access=local_access(),
        name=args.name,
        webhook_url=args.webhook,
        email_digest=None if args.email is None else args.email == "on",
    )
    where = [w for w in (saved.webhook_url, "email" if saved.email_digest else "") if w]
    stdout_console().print(
        f"'{saved.name}' sends its digest to " + (", ".join(where) if where else "nowhere"), markup=False
    )
    return 0


def cmd_list(args) -> int:
    from search import saved_searches_listed

    rows = saved_searches_listed(access=local_access())
    if args.json:
        print_json({"saved": rows})
        return 0
    console = stdout_console()
    if not rows:
        console.print("no saved searches", markup=False)
    for row in rows:
        shared = f"  shared with {row['shared_with']}" if row["shared_with"] else ""
        console.print(
            f"{row['name']}: {row['query']!r} ({row['mode']}){shared}  last run {row['last_run'] or 'never'}",
            markup=False,
            highlight=False,
        )
    return 0


def cmd_run(args) -> int:
    from search import format_response, saved_search_run

    response, new = saved_search_run(access=local_access(), name=args.name, face="cli", limit=args.limit)
    if args.json:
        print_json({**response.as_dict(), "new": new})
        return 0
    console = stdout_console()
    console.print(
        f"{len(new)} new since the last run" + (": " + ", ".join(new) if new else ""), markup=False, highlight=False
    )
    import sys

    sys.stdout.write(format_response(response, "cli", color=False))
    return 0


def cmd_rm(args) -> int:
    from indexing.services.saved_searches import saved_search_remove

    saved_search_remove(access=local_access(), name=args.name)
    stdout_console().print(f"removed '{args.name}'", markup=False)
    return 0
