"""`pmd token create|list|revoke`: API tokens for the JSON API and the MCP endpoint."""

from __future__ import annotations

from pmd_site.cli.output import local_access, print_json, stdout_console


def register(sub) -> None:
    tok = sub.add_parser("token", help="API tokens for /api/ and /mcp (Authorization: Bearer …)")
    tsub = tok.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = tsub.add_parser("create", help="create a token for a user; it is printed once")
    create.add_argument("--user", required=True, metavar="USERNAME")
    create.add_argument("--name", default="", help="a label, e.g. the script or agent using it")
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


def cmd_create(args) -> int:
    from search.api_tokens import token_create

    created = token_create(user=args.user, name=args.name, access=local_access())
    if args.json:
        print_json({"id": created.token.pk, "user": str(created.token.user), "name": created.token.name,
                    "prefix": created.token.prefix, "token": created.raw})
        return 0
    import sys

    # The token alone on stdout so `TOKEN=$(pmd token create --user u)` works; the note on stderr.
    sys.stdout.write(created.raw + "\n")
    sys.stderr.write(f"token {created.token.pk} for {created.token.user}: copy it now, it is not shown again\n")
    return 0


def _row(t) -> dict:
    return {"id": t.pk, "user": str(t.user), "name": t.name, "prefix": t.prefix,
            "created": t.created.isoformat(), "last_used": t.last_used.isoformat() if t.last_used else None,
            "revoked": t.revoked.isoformat() if t.revoked else None}


def cmd_list(args) -> int:
    from search.api_tokens import token_list

    tokens = token_list(user=args.user, include_revoked=args.all)
    if args.json:
        print_json([_row(t) for t in tokens])
        return 0
    console = stdout_console()
    if not tokens:
        console.print("no tokens: `pmd token create --user USERNAME`")
    for t in tokens:
        used = t.last_used.strftime("%Y-%m-%d %H:%M") if t.last_used else "never used"
        state = " [red]revoked[/]" if t.revoked else ""
        console.print(f"{t.pk:>4}  [bold]{t.prefix}…[/]  {t.user}  {t.name or '-'}  "
                      f"created {t.created:%Y-%m-%d}  {used}{state}")
    return 0


def cmd_revoke(args) -> int:
    from search.api_tokens import token_revoke

    token = token_revoke(token=args.token, access=local_access())
    stdout_console().print(f"revoked token {token.pk} ({token.prefix}…) of {token.user}")
    return 0
