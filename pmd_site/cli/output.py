"""Terminal output shared by every CLI command: colour rules, progress bars, errors."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape


def color_enabled(stream=None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def stdout_console() -> Console:
    enabled = color_enabled(sys.stdout)
    return Console(file=sys.stdout, no_color=not enabled, highlight=False,
                   force_terminal=enabled if enabled else None, soft_wrap=True,
                   color_system="auto" if enabled else None)


def stderr_console() -> Console:
    enabled = color_enabled(sys.stderr)
    return Console(file=sys.stderr, no_color=not enabled, highlight=False,
                   color_system="auto" if enabled else None, soft_wrap=True)


def error(message: str) -> None:
    stderr_console().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def warn(message: str) -> None:
    """A warning; the message is text, not markup (`[[Note]]`, `notes/[draft].md` print as written)."""
    stderr_console().print(f"[yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


@contextmanager
def progress_bar(description: str, *, enabled: bool = True):
    """Yields a `callback(done, total, detail)`; draws a bar on stderr only for a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total, detail="": None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("[dim]{task.fields[detail]}"),
        console=stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None, detail="")

        def update(done: int, total: int, detail: str = "") -> None:
            bar.update(task, completed=done, total=total or None, detail=detail[-50:])

        yield update


def local_access():
    """The CLI acts as the local OS user, who can read the collection folders anyway: everything."""
    from indexing.access import Access

    return Access.local_user()
