"""`pmd get`, `pmd multi-get` and `pmd ls`."""

from __future__ import annotations

from pmd_site.cli.output import escape, local_access, print_json, stdout_console, write_text


def register(sub) -> None:
    get = sub.add_parser("get", help="print a document: PATH, pmd://collection/path or #docid (optionally :LINE)")
    get.add_argument("reference")
    get.add_argument("-l", "--lines", type=int, dest="max_lines", metavar="N", help="at most N lines")
    get.add_argument("--from", type=int, dest="from_line", metavar="LINE", help="start at this line")
    get.add_argument("--line-numbers", action="store_true", help="prefix lines with their numbers")
    get.add_argument("-c", "--collection", action="append", dest="collections", metavar="NAME")
    get.add_argument("--json", action="store_true")
    get.set_defaults(func=cmd_get)

    mget = sub.add_parser("multi-get", help="print several documents: a glob, or a comma list of paths/#docids")
    mget.add_argument("pattern")
    mget.add_argument(
        "--max-bytes",
        type=int,
        metavar="N",
        help="skip documents larger than N bytes (default 10240; at most "
        "PMD_MULTI_GET_MAX_TOTAL_BYTES, which bounds the whole output)",
    )
    mget.add_argument("-l", "--lines", type=int, dest="max_lines", metavar="N", help="at most N lines per document")
    mget.add_argument("-c", "--collection", action="append", dest="collections", metavar="NAME")
    mget.add_argument("--json", action="store_true")
    mget.set_defaults(func=cmd_multi_get)

    ls = sub.add_parser("ls", help="list collections, or documents under COLLECTION[/PREFIX]")
    ls.add_argument("target", nargs="?")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_ls)


def cmd_get(args) -> int:
    from indexing.selectors import document_page
    from search import numbered_lines

    page = document_page(
        args.reference,
        from_line=args.from_line,
        max_lines=args.max_lines,
        collections=args.collections,
        access=local_access(),
    )
    if args.json:
        print_json(page.as_dict())
        return 0
    # `pmd get` has always aligned the numbers one line further than the last one shown
    out = numbered_lines(page.lines, page.first, width=len(str(page.last + 1))) if args.line_numbers else page.lines
    write_text("\n".join(out) + ("\n" if out else ""))  # on a terminal without its control characters
    return 0


def cmd_multi_get(args) -> int:
    from indexing.selectors import documents_multi_get
    from pmd_site.cli.output import warn

    result = documents_multi_get(
        args.pattern,
        max_bytes=args.max_bytes,
        max_lines=args.max_lines,
        collections=args.collections,
        access=local_access(),
    )
    if args.json:
        print_json(result.as_dict())
        return 0 if result.items or not result.missing else 1
    write = write_text  # on a terminal without the notes' control characters
    for item in result.items:
        write(f"==> {item.document.uri} (#{item.document.docid}) <==\n")
        if item.skipped_reason:
            write(f"[skipped: {item.skipped_reason}; use `pmd get #{item.document.docid}`]\n\n")
            continue
        write("\n".join(item.lines) + "\n")
        if item.truncated:
            write("[… truncated by --lines]\n")
        write("\n")
    for missing in result.missing:
        warn(f"nothing matches {missing}")
    if result.notice:
        warn(result.notice)
    return 0 if result.items or not result.missing else 1


def cmd_ls(args) -> int:
    from indexing.selectors import collections_overview, documents_list

    console = stdout_console()
    if not args.target:
        rows = [r.as_dict() for r in collections_overview(access=local_access())]
        if args.json:
            print_json([{"name": r["name"], "documents": r["documents"], "path": r["path"]} for r in rows])
        elif not rows:
            console.print("no collections yet: `pmd collection add PATH`")
        for r in rows if not args.json else []:
            console.print(f"pmd://{escape(r['name'])}/  [dim]{r['documents']} documents  {escape(r['path'])}[/]")
        return 0
    docs = documents_list(args.target, access=local_access())
    if args.json:
        print_json(
            [{"docid": d.docid, "uri": d.uri, "title": d.title, "size": d.size, "type": d.file_type} for d in docs]
        )
        return 0
    if docs:  # one print for the whole listing: rich's cost is per call, and a folder can hold thousands
        console.print(
            "\n".join(
                f"[cyan]#{d.docid}[/]  {escape(d.uri)}  [dim]{escape(d.title)}[/]"
                + ("" if d.file_type == "markdown" else f"  [dim]\\[{d.file_type}][/]")
                for d in docs
            ),
            highlight=False,
        )
    return 0
