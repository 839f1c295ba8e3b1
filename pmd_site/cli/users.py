"""`pmd user …`: accounts for the web UI (a team has several users)."""

from __future__ import annotations

import getpass
import sys

from indexing.errors import CommandError
from pmd_site.cli.output import escape, local_access, print_json, stdout_console


def _ip_address(value: str) -> str:
    """An IP address as the lockout records it, or argparse's usage error."""
    import argparse

    from pmd_site.addresses import normalized_ip

    address = normalized_ip(value)
    if address is None:
        raise argparse.ArgumentTypeError(f"not an IP address: {value!r} (e.g. 198.51.100.7 or 2001:db8::1)")
    return address


def register(sub) -> None:
    user = sub.add_parser("user", help="manage web UI accounts")
    usub = user.add_subparsers(dest="user_command", metavar="ACTION", required=True)

    create = usub.add_parser("create", help="create an account (staff accounts manage collections)")
    create.add_argument("username")
    create.add_argument("--staff", action="store_true", help="may add, reindex and embed collections and use /admin/")
    create.add_argument("--superuser", action="store_true", help="staff with every admin permission")
    create.add_argument("--email", default="")
    create.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of standard input (for scripts)",
    )
    create.set_defaults(func=cmd_create)

    passwd = usub.add_parser("password", help="set an account's password")
    passwd.add_argument("username")
    passwd.add_argument("--password-stdin", action="store_true")
    passwd.set_defaults(func=cmd_password)

    unlock = usub.add_parser("unlock", help="lift a lockout after too many failed logins (PMD_LOGIN_FAILURE_LIMIT)")
    unlock.add_argument("username")
    unlock.add_argument(
        "--address",
        action="append",
        default=[],
        metavar="IP",
        type=_ip_address,
        help="also unlock this client address (logins and API tokens); repeatable",
    )
    unlock.set_defaults(func=cmd_unlock)

    link = usub.add_parser("link", help="let an identity provider's person sign in as an existing account")
    link.add_argument("username")
    link.add_argument("--provider", required=True, help="forward-auth, ldap or openid:ID (PMD_OIDC_PROVIDERS)")
    link.add_argument(
        "--subject",
        required=True,
        help="the provider's id for the person: OpenID `sub`, the proxy's user name, the LDAP DN "
        "(a refused sign-in shows it)",
    )
    link.set_defaults(func=cmd_link)

    ls = usub.add_parser("list", help="list accounts")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)


def _read_password(args, username: str) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password for {username}: ")
        if getpass.getpass("again: ") != password:
            raise CommandError("the two passwords differ")
    else:
        raise CommandError("no terminal to ask for a password: pass --password-stdin and pipe it in")
    if not password:
        raise CommandError("the password is empty")
    return password


def cmd_create(args) -> int:
    from indexing.services.accounts import user_create, user_role, username_available

    username = username_available(username=args.username)  # before asking for a password in vain
    user = user_create(
        username=username,
        password=_read_password(args, username),
        email=args.email,
        staff=args.staff,
        superuser=args.superuser,
        access=local_access(),
    )
    stdout_console().print(f"created {user_role(user)} account [bold]{escape(user.username)}[/]")
    return 0


def cmd_password(args) -> int:
    from indexing.services.accounts import user_password_set

    user = user_password_set(
        username=args.username, password=_read_password(args, args.username), access=local_access()
    )
    stdout_console().print(f"password of [bold]{escape(user.username)}[/] changed")
    return 0


def cmd_unlock(args) -> int:
    from indexing.services.accounts import user_unlock

    cleared = user_unlock(username=args.username, addresses=tuple(args.address), access=local_access())
    what = " and ".join([f"[bold]{escape(args.username)}[/]", *map(escape, args.address)])
    stdout_console().print(f"unlocked {what} ({cleared} failure record{'s' if cleared != 1 else ''} removed)")
    return 0


def cmd_link(args) -> int:
    from indexing.services.accounts import identity_link

    identity_link(username=args.username, provider=args.provider, subject=args.subject, access=local_access())
    stdout_console().print(
        f"{escape(args.provider)} {escape(args.subject)!r} signs in as [bold]{escape(args.username)}[/]"
    )
    return 0


def cmd_list(args) -> int:
    from django.contrib.auth import get_user_model

    users = list(get_user_model().objects.order_by("username"))
    rows = [
        {
            "username": u.username,
            "staff": u.is_staff,
            "superuser": u.is_superuser,
            "active": u.is_active,
            "last_login": u.last_login.isoformat() if u.last_login else None,
        }
        for u in users
    ]
    if args.json:
        print_json(rows)
        return 0
    console = stdout_console()
    if not rows:
        console.print("no accounts yet: `pmd user create NAME --staff`")
    for r in rows:
        role = "superuser" if r["superuser"] else "staff" if r["staff"] else "member"
        console.print(
            f"{escape(r['username']):<24} {role:<10} {'active' if r['active'] else 'disabled':<9} "
            f"last login {r['last_login'] or 'never'}"
        )
    return 0
