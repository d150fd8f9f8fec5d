"""uvicorn's HTTP/1.1 connection (h11) with the two limits it lacks: a deadline for a
request to arrive, and a cap on open connections.

uvicorn times out only an idle keep-alive connection after a response. A connection that
sends nothing, or its headers one byte at a time ("slowloris"), is held for ever, and it
accepts every connection up to the system's limits. Here a connection must deliver its
whole request (line, headers and body) within ``request_timeout_s`` of its first byte (of
the connection, for the first request), else it gets 408 and is closed; and beyond
``max_connections`` open at once, a new one gets 503 and is closed at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)
# h11 states in which the client has not finished sending its request
_RECEIVING = (h11.IDLE, h11.SEND_BODY)


def _raw_response(status: int, reason: str, message: str, code: str) -> bytes:
    """A whole response written past h11: it sends a response only to a request it has
    parsed, and these answer requests that never arrived whole."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "param": None, "code": code}}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """See the module's docstring; :func:`guarded_protocol` makes one with its limits."""

    request_timeout_s = 5.0
    max_connections = 64
    too_slow = b""
    too_many = b""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning("refused a connection: %d are open", len(self.connections) - 1)
            transport.write(self.too_many)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the next request on a kept-alive connection has begun
        super().data_received(data)
        if self.conn.their_state not in _RECEIVING:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state not in _RECEIVING:
            return
        # No response begun (a refusal may be under way while the body trickles in): say
        # why it ends. Written past h11, which answers only a request it has read whole.
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and not (
                self.cycle is not None and self.cycle.response_started):
            self.transport.write(self.too_slow)
        self.transport.close()


def guarded_protocol(request_timeout_s: float, max_connections: int
                     ) -> type[GuardedH11Protocol]:
    """The protocol class for one server's limits (uvicorn builds it per connection)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "request_timeout_s": request_timeout_s, "max_connections": max_connections,
        "too_slow": _raw_response(408, "Request Timeout", "The request did not arrive "
                                  f"within {request_timeout_s:g} s.", "request_timeout"),
        "too_many": _raw_response(503, "Service Unavailable", f"More than {max_connections}"
                                  " connections are open; try again later.",
                                  "too_many_connections")})
