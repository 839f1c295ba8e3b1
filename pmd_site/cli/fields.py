"""`pmd fields [COLLECTION]`: the frontmatter keys to filter by, with their types and top values.

Reads search.retrieval.filters.frontmatter_fields, as /api/fields and the MCP tool pmd_fields do.
"""

from __future__ import annotations

from pmd_site.cli.output import local_access, print_json, stdout_console


def register(sub) -> None:
    parser = sub.add_parser(
        "fields",
        help="frontmatter keys to filter by (status:draft, priority:>=2, has:due), "
        "with their types and most frequent values",
    )
    parser.add_argument("collection", nargs="?", help="only this collection")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_fields)


def cmd_fields(args) -> int:
    from search import frontmatter_fields

    fields = frontmatter_fields(access=local_access(), collections=[args.collection] if args.collection else None)
    if args.json:
        print_json({"fields": fields})
        return 0
    console = stdout_console()
    if not fields:
        console.print("no frontmatter keys", markup=False)
        return 0
    width = max(len(f["key"]) for f in fields)
    for f in fields:
        kinds = ", ".join(f["types"])
        top = ", ".join(f"{v['value']} ({v['notes']})" for v in f["values"])
        console.print(f"{f['key']:<{width}}  {f['notes']:>6} notes  {kinds:<12}  {top}", markup=False, highlight=False)
    return 0
