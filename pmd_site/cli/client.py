"""Client mode: a read command answered by the running `pmd serve` / `pmd up` of the same index.

Starting Django, psycopg and rich costs a `pmd` process far more than the query does. When
a server for the same PMD_HOME and index is running, `pmd search …` (and the other read
commands in READ_COMMANDS / READ_ACTIONS) sends its arguments and its terminal (what
colour, width and encoding it would print with, its working directory) over a unix socket
only the same OS user can open; the server runs the very same command function in its own
process and sends back the bytes it printed on stdout and stderr and the exit status, which
are written out unchanged. The server side is pmd_site/cli/local_server.py.

`PMD_CLIENT` chooses: `auto` (the default: the server when one answers, else in-process,
silently, also for a stale socket), `never`, or `always` (no server is an error).

This module is imported first by every `pmd` run: the standard library only, and only
the cheap parts of it.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys

# Commands that only read, and so may run in the server's process; `collection` and
# `context` read only with these actions.
READ_COMMANDS = frozenset(
    {"search", "vsearch", "query", "get", "multi-get", "ls", "status", "links", "backlinks", "related", "history"}
)
READ_ACTIONS = {"collection": frozenset({"list", "show"}), "context": frozenset({"list"})}

# The client's environment that decides how output looks (colour, width): sent along.
TERMINAL_ENVIRON = (
    "NO_COLOR",
    "FORCE_COLOR",
    "TERM",
    "COLORTERM",
    "COLUMNS",
    "LINES",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
)
MAX_MESSAGE_BYTES = 1 << 20  # a request: arguments and a few settings
PROTOCOL = 1
_HEADER = struct.Struct(">I")
_FRAME = struct.Struct(">cI")
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class ClientModeError(Exception):
    """PMD_CLIENT=always and no server answers (or PMD_CLIENT holds no known value)."""


def split_command(argv: list[str]) -> tuple[str | None, str | None, list[str]]:
    """The command `argv` runs, the `--index` it names (None: the environment's) and what follows.

    Only the global option --index may come before the command; anything else there
    (-h, an abbreviation) gives no command: argparse deals with it.
    """
    index = None
    args = iter(argv)
    for arg in args:
        if arg == "--index":
            index = next(args, None)
            if index is None:
                return None, None, []
        elif arg.startswith("--index="):
            index = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            return None, None, []
        else:
            return arg, index, list(args)
    return None, None, []


def read_command(argv: list[str]) -> tuple[bool, str | None]:
    """Whether `argv` runs a read command, and the `--index` it names (None: the environment's)."""
    command, index, rest = split_command(argv)
    if command is None:
        return False, None
    if any(a in ("-h", "--help") for a in rest):
        return False, None  # help is laid out for the terminal's width: in-process
    if command in READ_COMMANDS:
        return True, index
    actions = READ_ACTIONS.get(command)
    return bool(actions and rest and rest[0] in actions), index


def socket_path(index: str | None = None):
    """The socket of the server for this PMD_HOME and index (it need not exist)."""
    from pmd_site import env  # standard library and indexing.errors only
    from pmd_site.runtime.server_files import run_dir_for

    name = index if index is not None else env.index_name()
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"bad index name {name!r}")
    folder = run_dir_for(env.pmd_home()) / "cli"
    path = folder / f"{name}.sock"
    if len(os.fsencode(str(path))) > 100:  # sun_path is 108 bytes
        import hashlib

        path = folder / (hashlib.sha256(name.encode()).hexdigest()[:16] + ".sock")
    return path


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a connected unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return _UCRED.unpack(raw)[1]


def send_message(sock: socket.socket, data: dict) -> None:
    body = json.dumps(data).encode()
    sock.sendall(_HEADER.pack(len(body)) + body)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        if not chunk:
            raise ConnectionError("the connection closed early")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket, limit: int = MAX_MESSAGE_BYTES) -> dict:
    (size,) = _HEADER.unpack(recv_exactly(sock, _HEADER.size))
    if size > limit:
        raise ValueError(f"a message of {size} bytes is more than {limit}")
    data = json.loads(recv_exactly(sock, size))
    if not isinstance(data, dict):
        raise ValueError("a message must be a JSON object")
    return data


def send_frame(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    """One piece of the answer: b"1" stdout bytes, b"2" stderr bytes, b"x" the end (JSON)."""
    sock.sendall(_FRAME.pack(kind, len(payload)) + payload)


def terminal_size() -> tuple[int, int] | None:
    """The size of the first of stdin, stdout and stderr that is a terminal (where rich looks)."""
    for fd in (0, 1, 2):
        try:
            return tuple(os.get_terminal_size(fd))
        except (AttributeError, ValueError, OSError):
            continue
    return None


def help_width() -> int:
    """The columns argparse lays help out for (shutil.get_terminal_size's rule; shutil itself
    would import the compression modules)."""

    def number(name: str) -> int:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            return 0

    columns, lines = number("COLUMNS"), number("LINES")
    if columns > 0 and lines > 0:
        return columns
    try:
        measured = os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        measured = 80
    return columns if columns > 0 else (measured or 80)


def _stream_info(stream) -> dict | None:
    if stream is None or not hasattr(stream, "buffer"):
        return None
    try:
        tty = stream.isatty()
    except ValueError:
        return None
    return {"encoding": stream.encoding, "errors": stream.errors, "tty": tty}


def request_for(argv: list[str]) -> dict | None:
    """What the server needs to print exactly what this process would; None: it cannot."""
    stdout, stderr = _stream_info(sys.stdout), _stream_info(sys.stderr)
    if stdout is None or stderr is None:
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    return {
        "protocol": PROTOCOL,
        "argv": list(argv),
        "environ": {k: os.environ[k] for k in TERMINAL_ENVIRON if k in os.environ},
        "stdout": stdout,
        "stderr": stderr,
        "terminal_size": terminal_size(),
        "help_width": help_width(),
        "cwd": cwd,
    }


def _connect(path) -> socket.socket | None:
    """A connection to a live server of our own user, or None (no socket, a stale one, someone else's)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
        if peer_uid(sock) != os.geteuid():
            raise PermissionError("the socket's server runs as another user")
    except OSError:
        sock.close()
        return None
    return sock


def _exchange(sock: socket.socket, request: dict) -> tuple[list[tuple[bytes, bytes]], dict]:
    send_message(sock, request)
    frames = []
    while True:
        kind, size = _FRAME.unpack(recv_exactly(sock, _FRAME.size))
        payload = recv_exactly(sock, size)
        if kind == b"x":
            return frames, json.loads(payload)
        if kind not in (b"1", b"2"):
            raise ValueError(f"unknown frame {kind!r}")
        frames.append((kind, payload))


def answer_from_server(argv: list[str]) -> int | None:
    """The exit status of `argv` run by the server, after printing its output; None: run it in-process.

    Raises ClientModeError when PMD_CLIENT=always and that is not possible for a read command.
    """
    mode = (os.environ.get("PMD_CLIENT") or "auto").strip().lower()
    if mode not in ("auto", "always", "never"):
        raise ClientModeError(f"PMD_CLIENT={os.environ['PMD_CLIENT']!r}: use auto, always or never")
    if mode == "never" or os.environ.get("PMD_DEBUG"):  # a traceback is this process's
        return None
    is_read, index = read_command(argv)
    if not is_read:
        return None
    always = mode == "always"
    try:
        path = socket_path(index)
    except Exception:  # noqa: BLE001 - a bad PMD_HOME/--index: in-process says what is wrong
        return None
    request = request_for(argv)
    sock = _connect(path) if request is not None else None
    if sock is None:
        if always:
            raise ClientModeError(
                f"PMD_CLIENT=always, but no pmd server answers on {path} (start one with `pmd up` or `pmd serve`)"
            )
        return None
    try:
        with sock:
            frames, end = _exchange(sock, request)
    except (OSError, ValueError) as exc:  # it went away before answering: nothing was printed yet
        if always:
            raise ClientModeError(f"the pmd server on {path} did not answer: {exc}") from None
        return None
    if "exit" not in end:  # declined (not a read command to it, another index)
        if always:
            raise ClientModeError(f"the pmd server on {path} declined: {end.get('declined', 'no reason given')}")
        return None
    for kind, payload in frames:
        stream = sys.stdout if kind == b"1" else sys.stderr
        stream.flush()
        stream.buffer.write(payload)
        stream.buffer.flush()
    return int(end["exit"])


def client_error(message: str) -> int:
    """Print a client-mode error the way the CLI prints errors (red `error:` on a colour terminal)."""
    color = (not os.environ.get("NO_COLOR")) and (bool(os.environ.get("FORCE_COLOR")) or sys.stderr.isatty())
    label = "\x1b[1;31merror:\x1b[0m" if color else "error:"
    sys.stderr.write(f"{label} {message}\n")
    return 1
