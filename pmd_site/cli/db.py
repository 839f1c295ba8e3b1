"""`pmd db start|stop|status`: the embedded PostgreSQL server."""

from __future__ import annotations

from indexing.errors import CommandError
from pmd_site.cli.output import escape, stdout_console


def register(sub) -> None:
    db = sub.add_parser("db", help="start, stop or inspect the embedded PostgreSQL server")
    dsub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    for name, func, text in (
        ("start", cmd_start, "start it and keep it running (commands then skip start-up)"),
        ("stop", cmd_stop, "stop it"),
        ("status", cmd_status, "is it running?"),
    ):
        p = dsub.add_parser(name, help=text)
        p.set_defaults(func=func, needs_db=False)


def _server():
    from pmd_site.runtime.process import embedded_server

    server = embedded_server()
    if server is None:
        raise CommandError("DATABASE_URL is set: pmd uses that server and manages no embedded one")
    return server


def cmd_start(args) -> int:
    from pmd_site.runtime.process import ensure_database, migrate_if_needed

    server = _server()
    started = ensure_database()
    migrate_if_needed()
    from django.db import connections

    connections.close_all()
    stdout_console().print(("started: " if started else "already running: ") + escape(server.status().describe()))
    return 0


def cmd_stop(args) -> int:
    server = _server()
    stopped = server.stop()
    stdout_console().print("stopped" if stopped else "not running")
    return 0


def cmd_status(args) -> int:
    state = _server().status()
    stdout_console().print(escape(state.describe()))
    return 0 if state.running else 3
