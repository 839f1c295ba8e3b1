"""Terminal output shared by every CLI command: colour rules, progress bars, errors.

rich is imported when something is drawn with it, not here: a search printed as plain
text never loads it. In a server answering a `pmd` client (client mode, see
pmd_site/cli/client.py), the terminal is the client's: `sys.stdout`/`sys.stderr` are
stand-ins that write to the request's captured streams, and `environ()` is the
client's environment, so the same code prints what the client itself would.

Text pmd did not write (titles, snippets, paths, messages) reaches a terminal without its control
characters (search.formatters.terminal_text): everything printed with rich is cleaned segment by
segment (pmd's own styles are not text, so they stay), a document's text through `write_text`
only when stdout is a terminal (`pmd get note.md > copy.md` copies the note as it is).
"""

from __future__ import annotations

import contextvars
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class ClientTerminal:
    """The terminal of the `pmd` client a request is answered for (client mode)."""

    stdout: object
    stderr: object
    environ: dict = field(default_factory=dict)
    size: tuple[int, int] | None = None  # of the client's first terminal among stdin, stdout, stderr
    help_width: int | None = None  # what argparse would lay help out for


_client_terminal: contextvars.ContextVar[ClientTerminal | None] = contextvars.ContextVar(
    "pmd_client_terminal", default=None
)


def client_terminal() -> ClientTerminal | None:
    return _client_terminal.get()


@contextmanager
def printing_for(terminal: ClientTerminal):
    """Within this block (this thread's context), output goes to `terminal`'s streams."""
    token = _client_terminal.set(terminal)
    try:
        yield
    finally:
        _client_terminal.reset(token)


class _ClientStream:
    """Stands in for sys.stdout or sys.stderr: the client's captured stream inside `printing_for`,
    the process's own everywhere else (other threads, the web server's logs)."""

    def __init__(self, name: str, real):
        self._name = name
        self._real = real

    def _target(self):
        terminal = _client_terminal.get()
        return getattr(terminal, self._name) if terminal is not None else self._real

    def write(self, text):
        return self._target().write(text)

    def flush(self):
        return self._target().flush()

    def isatty(self):
        return self._target().isatty()

    def __getattr__(self, name):
        return getattr(self._target(), name)


def install_client_streams() -> None:
    """Make sys.stdout/sys.stderr follow `printing_for` (once, in a server process)."""
    if not isinstance(sys.stdout, _ClientStream):
        sys.stdout = _ClientStream("stdout", sys.stdout)
    if not isinstance(sys.stderr, _ClientStream):
        sys.stderr = _ClientStream("stderr", sys.stderr)


def environ():
    """The environment output follows (NO_COLOR, FORCE_COLOR, TERM, COLUMNS…): the client's in client mode."""
    terminal = _client_terminal.get()
    return terminal.environ if terminal is not None else os.environ


def color_enabled(stream=None) -> bool:
    stream = stream or sys.stdout
    env = environ()
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


_console_class = None


def _terminal_console_class():
    """rich's Console, whose text segments (never its own control segments: cursor moves of a
    progress bar) are printed without control characters."""
    global _console_class
    if _console_class is None:
        from rich.console import Console
        from rich.segment import Segment

        from search import terminal_text

        class TerminalConsole(Console):
            def render(self, renderable, options=None):
                for segment in super().render(renderable, options):
                    if segment.control or segment.text.isprintable():
                        yield segment
                    else:
                        yield Segment(terminal_text(segment.text), segment.style, segment.control)

        _console_class = TerminalConsole
    return _console_class


def _console(**options):
    # No :emoji: codes: a note's title or a folder's name is printed as written (values are escaped
    # for rich markup where they are printed, with rich.markup.escape).
    console = _terminal_console_class()(_environ=environ(), emoji=False, **options)
    terminal = _client_terminal.get()
    # rich keeps whether a size was given (width=, COLUMNS) only in its private _width and _height.
    if terminal is not None and (console._width is None or console._height is None):  # noqa: SLF001 - see above
        console.size = _client_size(console, terminal)
    return console


def _client_size(console, terminal: ClientTerminal) -> tuple[int, int]:
    """The size rich would measure in the client's process (not this server's terminal, if any)."""
    if console.is_dumb_terminal:
        return 80, 25
    width, height = terminal.size or (None, None)
    columns, lines = terminal.environ.get("COLUMNS", ""), terminal.environ.get("LINES", "")
    width = int(columns) if columns.isdigit() else width
    height = int(lines) if lines.isdigit() else height
    return width or 80, height or 25


def stdout_console():
    enabled = color_enabled(sys.stdout)
    return _console(
        file=sys.stdout,
        no_color=not enabled,
        highlight=False,
        force_terminal=enabled if enabled else None,
        soft_wrap=True,
        color_system="auto" if enabled else None,
    )


def stderr_console():
    enabled = color_enabled(sys.stderr)
    return _console(
        file=sys.stderr, no_color=not enabled, highlight=False, color_system="auto" if enabled else None, soft_wrap=True
    )


def escape(value) -> str:
    """`value` (a title, a path, a message: text pmd did not write) as plain text inside rich markup:
    `[draft]` or `[/x]` in it prints as written instead of styling or failing."""
    from rich.markup import escape as markup_escape  # rich loads only to print

    return markup_escape(str(value))


def error(message: str) -> None:
    stderr_console().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


# How a person follows a queued job (its id is for programs: `--json`, the API).
FOLLOW_JOB = "`pmd status` follows it, and the web's Collections page"


def warn(message: str) -> None:
    """A warning; the message is text, not markup (`[[Note]]`, `notes/[draft].md` print as written)."""
    stderr_console().print(f"[yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


def print_json(data) -> None:
    from search import json_text

    sys.stdout.write(json_text(data) + "\n")


def print_markup(text: str) -> None:
    """Console markup a renderer wrote (search.formatters: the `cli` format of history, links,
    related) on stdout, in colour when stdout takes it, without the values' control characters."""
    if text:
        stdout_console().print(text, end="", highlight=False)


def write_text(text: str) -> None:
    """Text pmd did not write (a document, a CSV or markdown listing) on stdout: with its control
    characters shown, not obeyed, on a terminal; as it is into a file or a pipe."""
    if text and sys.stdout.isatty():
        from search import terminal_text

        text = terminal_text(text)
    sys.stdout.write(text)


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
        task = bar.add_task(escape(description), total=None, detail="")  # folder and file names

        def update(done: int, total: int, detail: str = "") -> None:
            bar.update(task, completed=done, total=total or None, detail=escape(detail[-70:]))

        yield update


def local_access():
    """The CLI acts as the local OS user, who can read the collection folders anyway: everything."""
    from indexing.access import Access

    return Access.local_user()
