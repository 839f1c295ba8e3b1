"""`pmd context add|list|rm`."""

from __future__ import annotations

from pmd_site.cli.output import escape, local_access, print_json, stdout_console


def register(sub) -> None:
    ctx = sub.add_parser("context", help="describe parts of the knowledge base (inherited by paths below)")
    csub = ctx.add_subparsers(dest="context_command", metavar="ACTION", required=True)
    add = csub.add_parser("add", help="set context text: `pmd context add [/|pmd://coll/prefix|PATH] TEXT`")
    add.add_argument("parts", nargs="+", metavar="[TARGET] TEXT")
    add.set_defaults(func=cmd_add)
    ls = csub.add_parser("list", help="list contexts")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    rm = csub.add_parser("rm", aliases=["remove"], help="remove the context at TARGET")
    rm.add_argument("target")
    rm.set_defaults(func=cmd_rm)


def cmd_add(args) -> int:
    from indexing.services.contexts import context_set

    target, text = ("/" if len(args.parts) == 1 else args.parts[0]), " ".join(args.parts[1:] or args.parts)
    context = context_set(target=target, text=text, access=local_access())
    stdout_console().print(f"context for [bold]{escape(context.target)}[/]: {escape(context.text)}")
    return 0


def cmd_list(args) -> int:
    from indexing.selectors import context_list

    contexts = context_list(access=local_access())
    if args.json:
        print_json([{"target": c.target, "text": c.text} for c in contexts])
        return 0
    console = stdout_console()
    if not contexts:
        console.print('no contexts yet: `pmd context add pmd://COLLECTION/ "what is in it"`')
    for c in contexts:
        console.print(f"[bold]{escape(c.target)}[/]  {escape(c.text)}")
    return 0


def cmd_rm(args) -> int:
    from indexing.services.contexts import context_remove

    context_remove(target=args.target, access=local_access())
    stdout_console().print(f"removed context at [bold]{escape(args.target)}[/]")
    return 0
