"""`pmd links REF` (the links a note writes) and `pmd backlinks REF` (the notes that link to it).

Both read indexing.links.document_links, as /api/links and the MCP tool pmd_links do; the JSON
of both commands is that shape. Formats: text (default), --json, --csv, --md, --files.
"""

from __future__ import annotations

from pmd_site.cli.output import local_access, print_markup, write_text

FORMATS = (
    ("json", "JSON: the note, its links and its backlinks"),
    ("csv", "CSV"),
    ("md", "markdown"),
    ("files", "one line per linked note: #docid,pmd://path (resolved links only)"),
)


def register(sub) -> None:
    for name, help_text, func in (
        (
            "links",
            "the links a note writes: [[wikilinks]], embeds and links to .md files, and where they lead",
            cmd_links,
        ),
        ("backlinks", "the notes that link to a note, with the sentence around each link", cmd_backlinks),
    ):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("reference", help="PATH, pmd://collection/path or #docid")
        parser.add_argument("-c", "--collection", action="append", dest="collections", metavar="NAME")
        parser.add_argument("-n", type=int, dest="limit", metavar="N", help="at most N links")
        fmt = parser.add_mutually_exclusive_group()
        for flag, text in FORMATS:
            fmt.add_argument(f"--{flag}", action="store_const", const=flag, dest="format", help=f"output {text}")
        parser.set_defaults(func=func, format="cli")


def _read(args):
    from indexing.errors import CommandError
    from indexing.links import document_links

    if args.limit is not None and args.limit < 1:
        raise CommandError("-n must be at least 1")
    return document_links(args.reference, access=local_access(), collections=args.collections, limit=args.limit)


def cmd_links(args) -> int:
    result = _read(args)
    _print(result, "links", args.format)
    return 0


def cmd_backlinks(args) -> int:
    result = _read(args)
    _print(result, "backlinks", args.format)
    return 0


def _print(result, kind: str, fmt: str) -> None:
    from search import render

    text = render(kind, fmt, result)
    if fmt == "cli":
        print_markup(text)
    else:
        write_text(text)
