"""`pmd group create|delete|add|remove|list`: groups of people a collection can be shared with."""

from __future__ import annotations

from pmd_site.cli.output import escape, local_access, print_json, stdout_console


def register(sub) -> None:
    grp = sub.add_parser("group", help="groups of people to share collections with (`pmd collection share`)")
    gsub = grp.add_subparsers(dest="group_command", metavar="ACTION", required=True)

    create = gsub.add_parser("create", help="create an empty group")
    create.add_argument("name")
    create.set_defaults(func=cmd_create)

    delete = gsub.add_parser("delete", aliases=["rm"], help="delete a group (its members lose what it shared)")
    delete.add_argument("name")
    delete.set_defaults(func=cmd_delete)

    add = gsub.add_parser("add", help="add people to a group")
    add.add_argument("name")
    add.add_argument("users", nargs="+", metavar="USERNAME")
    add.set_defaults(func=cmd_add)

    remove = gsub.add_parser("remove", help="remove people from a group")
    remove.add_argument("name")
    remove.add_argument("users", nargs="+", metavar="USERNAME")
    remove.set_defaults(func=cmd_remove)

    ls = gsub.add_parser("list", help="list groups and their members")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)


def _members(group) -> str:
    names = sorted(u.get_username() for u in group.user_set.all())
    return ", ".join(names) if names else "no members"


def cmd_create(args) -> int:
    from indexing.services.sharing import group_create

    group = group_create(name=args.name, access=local_access())
    stdout_console().print(
        f"created group [bold]{escape(group.name)}[/] (add people with `pmd group add {escape(group.name)} USERNAME…`)"
    )
    return 0


def cmd_delete(args) -> int:
    from indexing.services.sharing import group_delete

    group_delete(name=args.name, access=local_access())
    stdout_console().print(f"deleted group [bold]{escape(args.name)}[/]")
    return 0


def _change(args, *, add: bool) -> int:
    from indexing.services.sharing import group_members_change

    group = group_members_change(name=args.name, users=args.users, add=add, access=local_access())
    verb = "added to" if add else "removed from"
    stdout_console().print(
        f"{escape(', '.join(dict.fromkeys(args.users)))} {verb} [bold]{escape(group.name)}[/]; "
        f"members now: {escape(_members(group))}"
    )
    return 0


def cmd_add(args) -> int:
    return _change(args, add=True)


def cmd_remove(args) -> int:
    return _change(args, add=False)


def cmd_list(args) -> int:
    from indexing.services.sharing import group_list

    groups = group_list()
    if args.json:
        print_json(groups)
        return 0
    console = stdout_console()
    if not groups:
        console.print("no groups yet: `pmd group create NAME`")
        return 0
    from rich.table import Table
    from rich.text import Text

    from pmd_site.cli.collections import print_table

    table = Table(box=None, header_style="bold")
    table.add_column("group")
    table.add_column("members")
    for g in groups:
        table.add_row(Text(g["name"]), Text(", ".join(g["members"]) or "-"))
    print_table(table, console=console)
    return 0
