"""`pmd token create|list|revoke`: API tokens for the JSON API and the MCP endpoint."""

from __future__ import annotations

from pmd_site.cli.output import escape, local_access, print_json, stdout_console


def register(sub) -> None:
    tok = sub.add_parser("token", help="API tokens for /api/ and /mcp (Authorization: Bearer …)")
    tsub = tok.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = tsub.add_parser(
        "create",
        help="create a token for a user; it is printed once",
        description="Create a token for a user; it is printed once. A token sees what its user sees, "
        "is read-only unless made with --write, and may be limited to some collections.",
    )
    create.add_argument("--user", required=True, metavar="USERNAME")
    create.add_argument("--name", default="", help="a label, e.g. the script or agent using it")
    create.add_argument(
        "--write", action="store_true", help="may also change what its user may change (default: read-only)"
    )
    create.add_argument(
        "--collection",
        action="append",
        default=[],
        dest="collections",
        metavar="NAME",
        help="limit it to this collection (repeatable; default: all its user can see)",
    )
    create.add_argument(
        "--expires", metavar="DURATION", help="expire after e.g. 90m, 12h, 30d, 2w, 1y (default: never)"
    )
    create.add_argument("--json", action="store_true")
    create.set_defaults(func=cmd_create)
    ls = tsub.add_parser("list", help="list tokens (prefix only; the secret is never shown again)")
    ls.add_argument("--user", metavar="USERNAME")
    ls.add_argument("--all", action="store_true", help="include revoked tokens")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    revoke = tsub.add_parser("revoke", help="revoke a token by id, prefix or the token itself")
    revoke.add_argument("token")
    revoke.set_defaults(func=cmd_revoke)


def _when(value) -> str:
    from django.utils import timezone

    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M %Z")


def _scope_text(token, scope: dict) -> str:
    """`read-only; all collections alice can see; never expires`."""
    access = "read and write" if scope["write"] else "read-only"
    where = (
        "collections " + ", ".join(scope["collections"])
        if scope["collections"]
        else f"all collections {token.user.get_username()} can see"
    )
    expiry = f"expires {_when(token.expires)}" if token.expires else "never expires"
    return f"{access}; {where}; {expiry}"


def cmd_create(args) -> int:
    from indexing.services.tokens import token_create, token_scope

    created = token_create(
        user=args.user,
        name=args.name,
        can_write=args.write,
        collections=args.collections,
        expires_in=args.expires,
        access=local_access(),
    )
    token = created.token
    scope = token_scope(token)
    if args.json:
        print_json(
            {
                "id": token.pk,
                "user": str(token.user),
                "name": token.name,
                "prefix": token.prefix,
                "token": created.raw,
                **scope,
            }
        )
        return 0
    import sys

    # The token alone on stdout so `TOKEN=$(pmd token create --user u)` works; the note on stderr.
    sys.stdout.write(created.raw + "\n")
    sys.stderr.write(
        f"token {token.pk} for {token.user} ({_scope_text(token, scope)}): copy it now, it is not shown again\n"
    )
    return 0


def _row(t) -> dict:
    from indexing.services.tokens import token_scope

    return {
        "id": t.pk,
        "user": str(t.user),
        "name": t.name,
        "prefix": t.prefix,
        "created": t.created.isoformat(),
        "last_used": t.last_used.isoformat() if t.last_used else None,
        "revoked": t.revoked.isoformat() if t.revoked else None,
        **token_scope(t),
        "expired": t.expired,
    }


def cmd_list(args) -> int:
    from indexing.services.tokens import token_list

    rows = [(t, _row(t)) for t in token_list(user=args.user, include_revoked=args.all)]
    if args.json:
        print_json([row for _, row in rows])
        return 0
    console = stdout_console()
    if not rows:
        console.print("no tokens: `pmd token create --user USERNAME`")
        return 0
    from rich.table import Table
    from rich.text import Text

    from pmd_site.cli.collections import print_table

    table = Table(box=None, header_style="bold")
    for col in ("id", "prefix", "user", "name", "scope", "collections", "expires", "created", "last used", "state"):
        table.add_column(col, justify="right" if col == "id" else "left")
    for t, row in rows:
        state = "revoked" if t.revoked else "expired" if row["expired"] else "active"
        table.add_row(
            Text(str(t.pk)),
            Text(f"{t.prefix}…", style="bold"),
            Text(str(t.user)),
            Text(t.name or "-"),
            Text("rw" if row["write"] else "ro"),
            Text(", ".join(row["collections"]) or "all"),
            Text(_when(t.expires) if t.expires else "never", style="red" if row["expired"] else ""),
            Text(f"{t.created:%Y-%m-%d}"),
            Text(_when(t.last_used) if t.last_used else "never"),
            Text(state, style="red" if state != "active" else ""),
        )
    print_table(table, console=console)
    return 0


def cmd_revoke(args) -> int:
    from indexing.services.tokens import token_revoke

    token = token_revoke(token=args.token, access=local_access())
    stdout_console().print(f"revoked token {token.pk} ({token.prefix}…) of {escape(token.user)}")
    return 0
