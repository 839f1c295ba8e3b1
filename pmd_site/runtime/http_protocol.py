"""The web server's HTTP/1.1 protocol: uvicorn's h11 protocol plus the timeouts it lacks.

uvicorn closes a connection that stays idle between requests (`timeout_keep_alive`), but
nothing else: a client that sends half a request header, or stops in the middle of a
request body, or stops reading a response, holds its connection (and a request task)
for ever. A few hundred such clients take a server down. This protocol adds:

* a header timeout (PMD_HTTP_HEADER_TIMEOUT): from the first byte of a request (or the
  opening of the connection) to the end of its header, however slowly it trickles in;
  then `408 Request Timeout` and the connection is closed;
* an idle timeout (PMD_HTTP_IDLE_TIMEOUT) while a request body is being received: no
  byte for that long and the request is abandoned (408 when no response started yet);
  the same while a response waits for a client that stopped reading it.

`pmd serve` passes it to uvicorn as `http=`; the settings come from Django's settings.
"""

from __future__ import annotations

import asyncio
import logging

import h11
from django.conf import settings
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("pmd.http")

_TIMEOUT_BODY = b"request timeout: the request did not arrive in time\n"
_RAW_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\nconnection: close\r\n\r\n" + _TIMEOUT_BODY
)


class TimeoutH11Protocol(H11Protocol):
    """H11Protocol with header, request-body and stalled-write timeouts (see the module docstring)."""

    def __init__(self, config, server_state, app_state, _loop=None) -> None:
        super().__init__(config, server_state, app_state, _loop)

        self.header_timeout = settings.PMD_HTTP_HEADER_TIMEOUT
        self.idle_timeout = settings.PMD_HTTP_IDLE_TIMEOUT
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None

    # -- the events that move the timers --------------------------------------------------

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_request()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.idle_timeout, self._write_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_timer = self._cancel(self._write_timer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_all()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._cancel_all()  # the connection belongs to the websocket protocol from here on
        super().handle_websocket_upgrade(event)

    # -- timers ---------------------------------------------------------------------------

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        """Stop `timer`; returns None, to assign back."""
        if timer is not None:
            timer.cancel()

    def _cancel_all(self) -> None:
        self._header_timer = self._cancel(self._header_timer)
        self._body_timer = self._cancel(self._body_timer)
        self._write_timer = self._cancel(self._write_timer)

    def _follow_request(self) -> None:
        """Arm or stop the header and body timers for where the client's request now stands."""
        if self.transport.is_closing():
            self._cancel_all()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            # Between requests uvicorn's keep-alive timer runs; once a byte of the next one is
            # here (uvicorn then stops that timer), the header has this long to be complete.
            if self.conn.trailing_data[0] and self._header_timer is None:
                self._header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)
            return
        self._header_timer = self._cancel(self._header_timer)
        self._body_timer = self._cancel(self._body_timer)
        if state is h11.SEND_BODY:
            self._body_timer = self.loop.call_later(self.idle_timeout, self._body_timed_out)

    def _client(self) -> str:
        return "%s:%d" % self.client if self.client else "a client"

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:  # a request had begun: say why it ends
            logger.info(
                "closed the connection of %s: request header incomplete after %gs", self._client(), self.header_timeout
            )
            self.transport.write(_RAW_408)
        self.transport.close()

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.flow.read_paused:  # the application has not read what came yet: not the client's delay
            self._body_timer = self.loop.call_later(self.idle_timeout, self._body_timed_out)
            return
        logger.info("closed the connection of %s: request body stalled for %gs", self._client(), self.idle_timeout)
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and self.conn.our_state is h11.SEND_RESPONSE:
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"connection", b"close"),
                (b"content-length", str(len(_TIMEOUT_BODY)).encode()),
            ]
            self.transport.write(
                self.conn.send(h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"))
            )
            self.transport.write(self.conn.send(h11.Data(data=_TIMEOUT_BODY)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        self._abandon()

    def _write_timed_out(self) -> None:
        self._write_timer = None
        if self.transport.is_closing() or not self.flow.write_paused:
            return
        logger.info(
            "closed the connection of %s: it read nothing of the response for %gs", self._client(), self.idle_timeout
        )
        self._abandon(flush=False)  # close() would wait for the client to read the buffered rest

    def _abandon(self, *, flush: bool = True) -> None:
        """Close now; the application sees a disconnected client (receive → http.disconnect, send → no-op)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        if flush:
            self.transport.close()
        else:
            self.transport.abort()
