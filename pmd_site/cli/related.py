"""`pmd related REF`: the notes related to a note (links either way, shared tags, similar text),
each with its reasons. Reads search.retrieval.related.related_notes, as /api/related and the MCP
tool pmd_related do; --json prints that shape."""

from __future__ import annotations

from pmd_site.cli.output import local_access, print_markup, write_text


def register(sub) -> None:
    parser = sub.add_parser("related", help="the notes related to a note: links either way, shared tags, similar text")
    parser.add_argument("reference", help="PATH, pmd://collection/path or #docid")
    parser.add_argument(
        "-c",
        "--collection",
        action="append",
        dest="collections",
        metavar="NAME",
        help="look the note up in these collections",
    )
    parser.add_argument("-n", type=int, dest="limit", default=10, metavar="N", help="at most N notes (default 10)")
    parser.add_argument("--json", action="store_true", help="output JSON")
    parser.set_defaults(func=cmd_related)


def cmd_related(args) -> int:
    from indexing.errors import CommandError
    from search import related_notes, render

    if args.limit < 1:
        raise CommandError("-n must be at least 1")
    found = related_notes(args.reference, access=local_access(), limit=args.limit, collections=args.collections)
    text = render("related", "json" if args.json else "cli", found)
    if args.json:
        write_text(text)
    else:
        print_markup(text)
    return 0
