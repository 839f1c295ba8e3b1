"""`pmd audit`: the trail of changes that matter for who sees what (newest first)."""

from __future__ import annotations

from indexing.errors import CommandError
from pmd_site.cli.output import print_json, stdout_console


def register(sub) -> None:
    audit = sub.add_parser(
        "audit",
        help="who changed collections, sharing, groups, tokens and contexts, and when",
        description="The audit trail, newest first: collections added, removed, renamed "
        "and shared; groups; tokens created and revoked; contexts changed.",
    )
    audit.add_argument("-n", "--limit", type=int, default=50, metavar="N", help="at most N events (default 50)")
    audit.add_argument(
        "--action", metavar="PREFIX", help="only actions starting with PREFIX (e.g. collection, token.create, group)"
    )
    audit.add_argument("--target", metavar="TEXT", help="only targets containing TEXT (e.g. a collection's name)")
    audit.add_argument("--json", action="store_true")
    audit.set_defaults(func=cmd_audit)


def _compact(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def detail_text(detail: dict) -> str:
    """An event's detail on one line, empty values left out: `visibility=shared groups=eng,hr`."""
    if not isinstance(detail, dict):
        return str(detail)
    return " ".join(f"{key}={_compact(value)}" for key, value in detail.items() if value not in (None, "", [], {}))


def cmd_audit(args) -> int:
    from django.utils import timezone

    from indexing.services.audit import audit_list

    if args.limit < 1:
        raise CommandError("--limit must be at least 1")
    events = audit_list(limit=args.limit, action=args.action, target=args.target)
    if args.json:
        print_json(
            [
                {
                    "id": e.pk,
                    "at": e.at.isoformat(),
                    "actor": e.actor_label,
                    "user": e.actor.get_username() if e.actor_id and e.actor else None,
                    "action": e.action,
                    "target": e.target,
                    "detail": e.detail,
                }
                for e in events
            ]
        )
        return 0
    console = stdout_console()
    if not events:
        filtered = args.action or args.target
        console.print("no events match" if filtered else "no changes recorded yet")
        return 0
    from rich.table import Table
    from rich.text import Text

    from pmd_site.cli.collections import print_table

    table = Table(box=None, header_style="bold")
    for col in ("when", "who", "action", "target", "detail"):
        table.add_column(col)
    for e in events:
        when = timezone.localtime(e.at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(*(Text(cell) for cell in (when, e.actor_label, e.action, e.target or "-", detail_text(e.detail))))
    print_table(table, console=console)
    return 0
