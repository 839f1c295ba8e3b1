"""The server side of client mode: `pmd serve` answers the read commands of `pmd` clients.

A thread in the web server's process listens on a unix socket in a 0700 folder under
PMD_HOME (the socket itself 0600), and checks each connecting process's user with
SO_PEERCRED: only the OS user the server runs as may ask, and the command runs as that
user's Access (`local_user()`), exactly as the client's own process would run it.

Each request carries the client's argv and terminal (see pmd_site/cli/client.py). The
command is parsed by the CLI's own parser and run by the CLI's own `run_command` in this
process, with stdout/stderr captured for that request only (a context variable, so other
requests and the web server's own output are untouched) and encoded as the client's
streams would; the bytes and the exit status go back. Anything but a read command is
declined, and the client then runs it itself.
"""

from __future__ import annotations

import codecs
import fcntl
import logging
import os
import socket
import socketserver
import threading
from pathlib import Path

from pmd_site.cli.client import (
    PROTOCOL,
    TERMINAL_ENVIRON,
    peer_uid,
    read_command,
    recv_message,
    send_frame,
    socket_path,
)
from pmd_site.cli.output import ClientTerminal, install_client_streams, printing_for

log = logging.getLogger("pmd.cli")

MAX_CONCURRENT = 4  # requests run at once; more wait their turn
REQUEST_TIMEOUT = 10.0  # seconds a client has to send its request


class CapturedStream:
    """A client's stdout or stderr inside the server: text encoded as the client's stream would
    encode it, kept in one list with the other stream so the order of the two survives."""

    def __init__(self, kind: bytes, chunks: list, *, encoding: str, errors: str, tty: bool):
        self.kind = kind
        self.chunks = chunks
        self.encoding = encoding
        self.errors = errors
        self.tty = tty
        self.closed = False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            self.chunks.append((self.kind, text.encode(self.encoding, self.errors)))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty

    def writable(self) -> bool:
        return True


def _stream(kind: bytes, chunks: list, info) -> CapturedStream:
    if not isinstance(info, dict):
        raise ValueError("a stream is described by an object")
    encoding, errors = str(info.get("encoding") or "utf-8"), str(info.get("errors") or "strict")
    codecs.lookup(encoding)  # LookupError (a ValueError) for an unknown one
    codecs.lookup_error(errors)
    return CapturedStream(kind, chunks, encoding=encoding, errors=errors, tty=bool(info.get("tty")))


def _size(value) -> tuple[int, int] | None:
    if value is None:
        return None
    width, height = (int(v) for v in value)
    return width, height


def _exit_status(exc: SystemExit) -> tuple[int, str]:
    """What Python does with a SystemExit at the top: its status, and text it prints on stderr."""
    if exc.code is None:
        return 0, ""
    if isinstance(exc.code, int):
        return exc.code, ""
    return 1, f"{exc.code}\n"


class CommandRunner:
    """Parses and runs one client's read command in this process (the parser is built once)."""

    def __init__(self, index: str):
        from pmd_site.cli import build_parser

        self.index = index
        self.parser = build_parser()
        self.parse_lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(MAX_CONCURRENT)

    def answer(self, request: dict) -> tuple[list[tuple[bytes, bytes]], dict]:
        """(stdout/stderr chunks in order, the end message: {"exit": n} or {"declined": why})."""
        from django.db import connections

        from indexing.paths import caller_directory
        from pmd_site.cli import run_command

        if request.get("protocol") != PROTOCOL:
            return [], {"declined": f"protocol {request.get('protocol')!r} (this server speaks {PROTOCOL})"}
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return [], {"declined": "argv must be a list of strings"}
        is_read, index = read_command(argv)
        if not is_read:
            return [], {"declined": "not a read command"}
        if index is not None and index != self.index:
            return [], {"declined": f"this server answers for the index {self.index!r}"}
        chunks: list[tuple[bytes, bytes]] = []
        environ = request.get("environ") or {}
        terminal = ClientTerminal(
            stdout=_stream(b"1", chunks, request.get("stdout")),
            stderr=_stream(b"2", chunks, request.get("stderr")),
            environ={k: str(environ[k]) for k in TERMINAL_ENVIRON if k in environ},
            size=_size(request.get("terminal_size")),
            help_width=int(request.get("help_width") or 0) or None,
        )
        cwd = request.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            return [], {"declined": "cwd must be an absolute path"}
        with self.slots, printing_for(terminal):
            token = caller_directory.set(cwd)
            try:
                try:
                    with self.parse_lock:
                        args = self.parser.parse_args(argv)
                    code = run_command(args, prepare=False)
                except SystemExit as exc:  # argparse's usage errors (status 2), or a command's own exit
                    code, text = _exit_status(exc)
                    terminal.stderr.write(text)
            finally:
                caller_directory.reset(token)
                connections.close_all()  # this thread's connections go back to the pool
        return chunks, {"exit": code}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            uid = peer_uid(sock)
            if uid != os.geteuid():
                log.warning("client mode: refused a connection from uid %s (only uid %s may ask)", uid, os.geteuid())
                return
            sock.settimeout(REQUEST_TIMEOUT)
            request = recv_message(sock)
            sock.settimeout(None)
            chunks, end = self.server.runner.answer(request)
            for kind, payload in _merged(chunks):
                send_frame(sock, kind, payload)
            import json

            send_frame(sock, b"x", json.dumps(end).encode())
        except (OSError, ValueError, TypeError, LookupError) as exc:  # a client that went away or sent nonsense
            log.info("client mode: dropped a request: %s", exc)
        except Exception:  # one bad request must not stop the listener (logged with its traceback)
            log.exception("client mode: a request failed")


def _merged(chunks):
    """Consecutive chunks of one stream as one frame."""
    kind, parts = None, []
    for k, data in chunks:
        if k != kind and parts:
            yield kind, b"".join(parts)
            parts = []
        kind = k
        parts.append(data)
    if parts:
        yield kind, b"".join(parts)


class _SocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False


class LocalServer:
    """The listener thread; `start()` is False when another server already answers for this index."""

    def __init__(self, index: str, path: Path | None = None):
        self.index = index
        self.path = Path(path) if path is not None else socket_path(index)
        self._lock_file = None
        self._server: _SocketServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        from pmd_site.runtime.server_files import private_dir

        private_dir(self.path.parent)  # 0700: only this user reaches the socket
        lock = open(self.path.with_suffix(".lock"), "w")  # noqa: SIM115 - held (and flocked) while the server runs
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return False
        self._lock_file = lock
        if os.path.lexists(self.path):
            os.unlink(self.path)  # left by a server that died: we hold the lock now
        runner = CommandRunner(self.index)
        server = _SocketServer(str(self.path), _Handler, bind_and_activate=False)
        try:
            server.server_bind()
            os.chmod(self.path, 0o600)
            server.server_activate()
        except OSError:
            server.server_close()
            self._release()
            raise
        server.runner = runner
        install_client_streams()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="pmd-client-mode", daemon=True
        )
        self._thread.start()
        return True

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._release()

    def _release(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None


def start_local_server(index: str) -> LocalServer | None:
    """Listen for `pmd` clients of this index; None (and a log line) when that is not possible."""
    server = LocalServer(index)
    try:
        if server.start():
            return server
        log.warning("client mode: another pmd server already answers on %s", server.path)
    except Exception as exc:  # noqa: BLE001 - the web server runs on without client mode
        log.warning("client mode is off: cannot listen on %s: %s", server.path, exc)
    return None
