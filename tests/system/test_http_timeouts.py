"""Slow, half-sent and unread requests do not hold the web server's connections for ever.

A real `pmd serve` in a subprocess, with one-second timeouts, over the test database; raw
sockets play the misbehaving clients. Every wait is a bounded poll for the server to close.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from indexing.access import Access
from indexing.services.tokens import token_create
from tests.support.factories import make_user
from tests.support.servers import child_database_url, pmd_serve

# The server is another process: what the test creates must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 1  # every PMD_HTTP_*_TIMEOUT of the server under test
CLOSE_DEADLINE = 60.0  # generous: the server closes about TIMEOUT after its buffers fill, and filling them
# once took more than 20 s with the whole suite and a benchmark sharing 2 cores
BIG_FILE_BYTES = 32 * 1024 * 1024  # more than the kernel buffers between the server and a client


class Server:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path):
        self.proc, self.port, self.log = proc, port, log

    def connect(self, **options) -> socket.socket:
        sock = socket.socket()
        for option, value in options.items():
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option), value)
        sock.connect(("127.0.0.1", self.port))
        return sock

    def holds(self, client: socket.socket) -> bool:
        """Has the server still got this client's connection open?"""
        port = client.getsockname()[1]
        return any(
            c.raddr and c.raddr.port == port and c.status != psutil.CONN_CLOSE_WAIT
            for c in psutil.Process(self.proc.pid).net_connections(kind="tcp")
        )


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    """One server for the module: each test opens its own connections and waits until the server
    has closed them, so none is left behind for the next."""
    tmp_path = tmp_path_factory.mktemp("http-timeouts")
    with django_db_blocker.unblock():
        database_url = child_database_url()
    static = tmp_path / "static"
    static.mkdir()
    with open(static / "big.bin", "wb") as handle:
        handle.truncate(BIG_FILE_BYTES)
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        PYTHONUNBUFFERED="1",
        PMD_STATIC_ROOT=str(static),
        PMD_HTTP_HEADER_TIMEOUT=str(TIMEOUT),
        PMD_HTTP_IDLE_TIMEOUT=str(TIMEOUT),
        PMD_HTTP_KEEPALIVE_TIMEOUT=str(TIMEOUT),
        PMD_LOG_LEVEL="INFO",
    )
    log = tmp_path / "serve.log"
    with pmd_serve(env=env, log=log, timeout=60) as (proc, port):
        yield Server(proc, port, log)


def _read_until_closed(sock: socket.socket, server: Server) -> bytes:
    """Everything the server sends until it closes the connection; fails if it keeps it open."""
    received = b""
    deadline = time.monotonic() + CLOSE_DEADLINE
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            pytest.fail(
                f"the server still holds the connection after {CLOSE_DEADLINE:.0f}s; it sent {received[:200]!r}"
                f"\n{server.log.read_text()[-3000:]}"
            )
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def test_a_half_sent_header_gets_408_and_a_silent_connection_is_closed(server):
    with server.connect() as half:
        half.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the blank line never comes
        assert _read_until_closed(half, server).startswith(b"HTTP/1.1 408 ")
    with server.connect() as silent:
        assert _read_until_closed(silent, server) == b""


def test_a_header_trickling_in_is_cut_off_before_it_completes(server):
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: one-byte-at-a-time\r\n\r\n"
    with server.connect() as slow:
        sent = 0
        while sent < len(request):
            readable, _, _ = select.select([slow], [], [], 0.25)  # a byte every quarter second
            if readable:
                break  # the server answered or closed before the header was complete
            slow.sendall(request[sent : sent + 1])
            sent += 1
        answer = _read_until_closed(slow, server)
        assert sent < len(request), "the whole header went through"
        assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_stalled_request_body_gets_408_and_is_closed(server):
    with server.connect() as stalled:
        stalled.sendall(
            b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n" + b'{"query": "to'
        )  # 87 bytes short, for ever
        answer = _read_until_closed(stalled, server)
        assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_get_mcp_opens_no_event_stream_and_idle_keep_alive_ends(server, django_user_model):
    user = make_user("agent")
    token = token_create(user=user, access=Access.local_user(), can_write=True).raw
    with server.connect() as client:
        client.sendall(
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        answer = _read_until_closed(client, server)  # the answer, then the keep-alive timeout
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 405 "), answer
    assert b"allow: POST" in head
    assert "no event stream" in json.loads(body)["message"]


def test_a_client_that_stops_reading_the_response_is_dropped(server):
    with server.connect(SO_RCVBUF=4096) as reader:
        reader.sendall(b"GET /static/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        deadline = time.monotonic() + CLOSE_DEADLINE
        while server.holds(reader):  # not reading a byte meanwhile
            assert time.monotonic() < deadline, f"still held after {CLOSE_DEADLINE:.0f}s"
            time.sleep(0.2)
        received = _read_until_closed(reader, server)
    assert received.startswith(b"HTTP/1.1 200 ")
    assert len(received) < BIG_FILE_BYTES
