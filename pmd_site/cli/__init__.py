"""The `pmd` command line: a thin adapter over the indexing and search services.

Each area lives in its own module with a `register(subparsers)` function that adds
commands and sets `func` (and `needs_db`, default True) on its parsers. Only the commands meant to
create an index (`pmd up`, `pmd collection add`, …) create one: those in `only_reads` never do.

The command modules import pmd's services inside their command functions, not at module
top: that is deliberate (start-up cost: `pmd --help` and commands without a database
should not load Django models, celery and the LLM clients). Everywhere else pmd's own
modules are imported at module top.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from indexing.errors import PmdError
from pmd_site.version import VERSION

# The modules that contribute commands, in help order, and the commands each one adds: a run
# imports only its command's module (start-up time); help and unknown commands import them all.
COMMANDS_BY_MODULE = {
    "pmd_site.cli.collections": ("collection", "update"),
    "pmd_site.cli.documents": ("get", "multi-get", "ls"),
    "pmd_site.cli.links": ("links", "backlinks"),
    "pmd_site.cli.related": ("related",),
    "pmd_site.cli.contexts": ("context",),
    "pmd_site.cli.search": ("search",),
    "pmd_site.cli.fields": ("fields",),
    "pmd_site.cli.searches": ("searches",),
    "pmd_site.cli.saved": ("saved",),
    "pmd_site.cli.query": ("query",),
    "pmd_site.cli.ask": ("ask",),
    "pmd_site.cli.embed": ("embed", "vsearch", "models"),
    "pmd_site.cli.status": ("status", "cleanup"),
    "pmd_site.cli.config": ("config",),
    "pmd_site.cli.users": ("user",),
    "pmd_site.cli.db": ("db",),
    "pmd_site.cli.backup": ("backup", "restore"),
    "pmd_site.cli.bench": ("bench",),
    "pmd_site.cli.up": ("up",),
    "pmd_site.cli.services": ("serve", "worker", "beat", "watch", "healthcheck", "migrate"),
    "pmd_site.cli.mcp": ("mcp",),
    "pmd_site.cli.tokens": ("token",),
    "pmd_site.cli.groups": ("group",),
    "pmd_site.cli.audit": ("audit",),
    "pmd_site.cli.history": ("history",),
}
MODULE_OF_COMMAND = {command: module for module, commands in COMMANDS_BY_MODULE.items() for command in commands}

# Commands that use an index but never create one, besides the read commands client mode answers
# (pmd_site.cli.client.READ_COMMANDS): without an index they say where they looked and fail.
USES_AN_INDEX = frozenset({"fields", "searches", "saved", "ask", "update", "embed", "cleanup", "audit", "mcp"})
CREATES_IN = {"collection": frozenset({"add"}), "context": frozenset()}  # the actions that may create one
# Actions that show what an index holds, of any command that has actions (`pmd config show`, `pmd user list`).
SHOWING = frozenset({"list", "show"})


# What the command line adds to a service error, in its own syntax (flags, commands), by code
# (indexing.errors.PmdError.hint_from): the services' messages name no face's syntax.
CLI_HINTS = {
    "collection_exists": "choose another with --name, or `pmd collection remove {name}`",
    "collection_not_found": "see `pmd collection list`",
    "collection_folder_taken": "`pmd update -c {name}` re-indexes it, `pmd collection set {name}` changes its files",
    "not_embedded": lambda exc: (
        None if getattr(exc, "held", None) or getattr(exc, "underway", False) else "run `pmd embed`"
    ),
    "llm_model_missing": lambda exc: None if exc.backend == "openai" else "pull it with `pmd models pull`",
    "user_not_found": "create one with `pmd user create {name}`",
    "token_not_found": "see `pmd token list`",
    "saved_search_not_found": "see `pmd saved list`",
    "account_exists": "`pmd user password {name}` sets a new password",
    # The index's configuration, which `pmd up` and every other process read: not a .env `pmd up` never reads.
    "answer_model_unset": "e.g. `ollama pull qwen3:1.7b`, then `pmd config set PMD_ANSWER_MODEL=qwen3:1.7b`",
    "restore_refused": "stop it, then restore again (with compose: `docker compose stop web worker beat watcher`)",
    "replaces_vectors": lambda exc: None if "--yes" in exc.message else "confirm with --yes",
    "index_outdated": "run `pmd migrate` (or start `pmd up`, which migrates)",
}


def error_text(exc: PmdError) -> str:
    """A service error as the CLI prints it: the message, the CLI's hint, then any suggestions."""
    text = exc.message
    hint = exc.hint_from(CLI_HINTS)
    if hint:
        text += ": " + hint
    if exc.suggestions:
        text += "\n  did you mean:\n" + "\n".join(f"    {s}" for s in exc.suggestions)
    return text


class ArgumentParser(argparse.ArgumentParser):
    """Lays out help and usage errors for the width of the terminal they are printed on: in client
    mode the client's (subcommand parsers are made of the same class)."""

    def _get_formatter(self):
        from pmd_site.cli.output import client_terminal

        terminal = client_terminal()
        if terminal is None or not terminal.help_width:
            return super()._get_formatter()
        return self.formatter_class(prog=self.prog, width=terminal.help_width)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (`command`) only the part that parses that command."""
    parser = ArgumentParser(
        prog="pmd",
        description="Hybrid search for markdown knowledge bases (BM25 + vectors + LLM re-ranking).",
    )
    parser.add_argument("--index", metavar="NAME", help="use a separate named index (its own database)")
    parser.add_argument("--version", action="version", version=f"pmd {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    module = MODULE_OF_COMMAND.get(command)
    for name in [module] if module else COMMANDS_BY_MODULE:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from pmd_site.cli.client import ClientModeError, answer_from_server, client_error

    program = argv is None  # the process's own command line: it ends when this returns
    argv = sys.argv[1:] if argv is None else argv
    try:  # first, before anything heavy is imported: a running server may answer (client mode)
        answered = answer_from_server(argv)
    except ClientModeError as exc:
        return client_error(str(exc))
    except KeyboardInterrupt:
        client_error("interrupted")
        return 130
    if answered is not None:
        return answered
    from pmd_site.runtime.startup import collector_paused_while_starting

    with collector_paused_while_starting(process_ends_after=program):
        return _parse_and_run(argv)


def only_reads(argv: list[str]) -> bool:
    """Whether `argv` runs a command that must find an index rather than create an empty one."""
    from pmd_site.cli.client import read_command, split_command

    command, _, rest = split_command(argv)
    if command in CREATES_IN:
        return not (rest and rest[0] in CREATES_IN[command])
    if command != "models" and rest and rest[0] in SHOWING:
        return True
    return command in USES_AN_INDEX or read_command(argv)[0]


def never_migrates(argv: list[str]) -> bool:
    """Whether `argv` runs a command that only reads: it leaves an index made by an older pmd as it
    is (that pmd may still use it) and says how to bring it forward."""
    from pmd_site.cli.client import read_command, split_command

    command, _, rest = split_command(argv)
    return read_command(argv)[0] or (command != "models" and bool(rest) and rest[0] in SHOWING)


def _parse_and_run(argv: list[str]) -> int:
    from pmd_site.cli.client import read_command, split_command

    parser = build_parser(split_command(argv)[0])
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    args.existing_index_only = only_reads(argv)
    args.never_migrates = never_migrates(argv)
    if read_command(argv)[0]:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmd_site.settings.cli")  # without the web's apps
    if args.index:
        os.environ["PMD_INDEX"] = args.index
    for name, value in getattr(args, "environ_defaults", {}).items():
        os.environ.setdefault(name, value)  # a command's own defaults, read by the settings below
    return run_command(args)


def run_command(args, *, prepare: bool = True) -> int:
    """Run a parsed command and map its errors to one line and an exit status.

    `prepare=False` in a server answering a client (Django and the database are up already)."""
    from indexing.userinput import refuse_unstorable
    from pmd_site.cli.output import error

    try:
        refuse_unstorable(vars(args))  # text the database cannot store (a NUL byte): refused before any query
        if not prepare:
            result = args.func(args)
        else:
            from pmd_site.runtime.process import setup_django

            if getattr(args, "existing_index_only", False):
                from pmd_site.runtime.process import require_existing_index

                require_existing_index(for_agents=args.command == "mcp")
            setup_django()
            if getattr(args, "needs_db", True):
                from pmd_site.runtime.process import database_lease, migrate_if_needed, require_current_index

                with database_lease():
                    if getattr(args, "never_migrates", False):
                        require_current_index()
                    else:
                        migrate_if_needed()
                    result = args.func(args)
            else:
                result = args.func(args)
        return int(result or 0)
    except PmdError as exc:  # a service's error or the CLI's own: one line (and suggestions), status 1
        error(error_text(exc))
        return 1
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except Exception as exc:  # the last line of defence for users
        from django.db import DataError
        from django.db import OperationalError as DjangoOperationalError
        from psycopg import OperationalError

        from indexing.errors import InputRefused

        if isinstance(exc, (OperationalError, DjangoOperationalError)):
            error(f"cannot reach the database: {exc}".strip())
            return 1
        if isinstance(exc, DataError):  # the database refused input no check caught: the user's to fix
            error(error_text(InputRefused.from_database(exc)))
            return 1
        if prepare and os.environ.get("PMD_DEBUG"):
            raise
        error(f"{exc.__class__.__name__}: {exc} (set PMD_DEBUG=1 for a traceback)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
