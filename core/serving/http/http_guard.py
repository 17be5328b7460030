"""Limits on the local HTTP server, so a local process without the token cannot starve it.

uvicorn times out idle keep-alive connections between requests, but not a
connection that never sends a request, nor one that sends half of one; and
it has no cap on connections short of the process's file limit, where
accept() starts failing for everyone (``mcp-tray status`` included) and
asyncio logs a traceback per failed accept. This module adds, around
uvicorn's own httptools protocol:

- a read deadline: a request must arrive complete (head and body) within
  ``read_seconds`` of its first byte, and a new connection must send one
  within ``read_seconds`` of opening;
- a connection cap below the file limit (core.platform.files raises the
  limit where the OS has one), applied as connections are accepted (at most
  ``ACCEPTS_PER_WAKEUP`` per wake-up, the listen backlog apart): past it, the
  oldest connection
  that never presented the token is shed first, then the oldest idle one;
  a new connection is refused only when every open one is busy and trusted;
- accept errors (EMFILE and the like) logged once a minute with a count
  instead of a traceback each time.

"Trusted" is decided by the control API's guard (core.serving.http.api): it
calls ``ConnectionGuard.trust`` with the peer address of every request that
passed the token check, and on loopback a peer address names one connection.
"""

import asyncio
import functools
import inspect
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

logger = logging.getLogger(__name__)

#: A request must be read completely within this long of its first byte
#: (and a new connection must start one within this long). Loopback clients
#: send a whole MCP message in microseconds; ten seconds is generous.
READ_SECONDS: Final = 10.0
#: Most connections served at once. Bridges and HTTP clients hold one or
#: two each; hundreds of clients on one desktop is already unusual.
MAX_CONNECTIONS: Final = 512
#: File descriptors kept for everything else (children's pipes and pidfds,
#: log files, the registry) when the cap is derived from a low file limit.
RESERVED_FDS: Final = 256
#: Connections accepted per wake-up of the loop. asyncio accepts as many as
#: the backlog it was given (uvicorn's default: 2,048) before any of them is
#: seen by the cap, so a burst ran into the file limit (EMFILE, and asyncio
#: then stops listening for a second); in bites of 64 the cap sheds between
#: bites and holds at accept time.
ACCEPTS_PER_WAKEUP: Final = 64
#: The kernel's queue of connections not yet accepted (a burst waits there).
LISTEN_BACKLOG: Final = 2048
#: Repeated accept errors are summarised at most this often.
ACCEPT_ERROR_LOG_SECONDS: Final = 60.0

Peer = tuple[str, int]


@dataclass(frozen=True)
class HttpLimits:
    read_seconds: float = READ_SECONDS
    max_connections: int = MAX_CONNECTIONS


def connection_cap(wanted: int, file_limit: int) -> int:
    """``wanted``, lowered so connections can never use up the process's file limit."""
    return max(16, min(wanted, file_limit - RESERVED_FDS))


@dataclass
class ConnectionGuard:
    """What every connection of one server shares: the cap, trust, and shedding."""

    limits: HttpLimits
    cap: int
    clock: Callable[[], float] = time.monotonic
    open: dict["GuardedProtocol", float] = field(default_factory=dict)
    trusted: set[Peer] = field(default_factory=set)
    shed: int = 0
    refused: int = 0

    def trust(self, peer: Peer | None) -> None:
        """A request from ``peer`` presented the token: its connection is shed last."""
        if peer is not None:
            self.trusted.add(peer)

    def admit(self, newcomer: "GuardedProtocol") -> bool:
        """Room for ``newcomer``, shedding someone if needed; False when it must go."""
        if len(self.open) >= self.cap:
            victim = self._victim()
            if victim is None:
                self.refused += 1
                return False
            self.shed += 1
            # Out of the count now: its connection_lost comes a loop turn later.
            del self.open[victim]
            victim.close_now()
        self.open[newcomer] = self.clock()
        return True

    def left(self, protocol: "GuardedProtocol") -> None:
        self.open.pop(protocol, None)
        if protocol.client is not None:
            self.trusted.discard(protocol.client)

    def _victim(self) -> "GuardedProtocol | None":
        """The oldest untrusted connection, else the oldest idle one. ``open`` is in
        admission order already (a dict keeps it): a burst sheds hundreds, no sorting."""
        idle: GuardedProtocol | None = None
        for candidate in self.open:
            if candidate.client not in self.trusted:
                return candidate
            if idle is None and candidate.idle:
                idle = candidate
        return idle


class LaneTicket(Protocol):
    """A request whose head qualified for the express lane (core.serving.http.express.Ticket)."""

    def message(self, body: bytes) -> dict[str, Any] | None: ...

    def app(self, message: dict[str, Any]) -> Any: ...


class Lane(Protocol):
    """Whether a request may take the express lane (core.serving.http.express.Express)."""

    def ticket(self, url: bytes, raw: list[tuple[bytes, bytes]]) -> LaneTicket | None: ...


#: What the lane's cycle is built with (``GuardedProtocol._express_cycle``).
_CYCLE_KEYWORDS: Final = frozenset(
    {
        "scope",
        "transport",
        "flow",
        "logger",
        "access_logger",
        "access_log",
        "default_headers",
        "message_event",
        "expect_100_continue",
        "keep_alive",
        "on_response",
    }
)


@functools.cache
def lane_hook_missing() -> str | None:
    """Why this uvicorn cannot carry the express lane, or None when it can.

    The lane starts uvicorn's own response cycle through a private method of its
    httptools protocol (``_start_asgi_task``, from uvicorn 0.45) and builds that
    cycle itself. A uvicorn without them would answer every plain call with an
    exception, so the lane stays off there and every request takes the full path:
    the same answers, at the full path's cost (``mcp-tray doctor`` says so)."""
    version = getattr(uvicorn, "__version__", "?")
    if not callable(getattr(HttpToolsProtocol, "_start_asgi_task", None)):
        return f"uvicorn {version} has no HttpToolsProtocol._start_asgi_task (0.45 and later have)"
    try:
        accepted = set(inspect.signature(RequestResponseCycle).parameters)
    except (TypeError, ValueError):
        return f"uvicorn {version}: its RequestResponseCycle cannot be inspected"
    missing_keywords = _CYCLE_KEYWORDS - accepted
    if missing_keywords:
        missing = ", ".join(sorted(missing_keywords))
        return f"uvicorn {version}: its RequestResponseCycle takes no {missing}"
    return None


def guarded_protocol(
    guard: ConnectionGuard, express: Lane | None = None
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``guard``'s deadline and cap, and ``express``'s lane
    for plain tool calls (core.serving.http.express), for ``Config(http=...)``; without the lane
    where this uvicorn cannot carry it (``lane_hook_missing``)."""
    if express is not None and lane_hook_missing() is not None:
        express = None
    return type("GuardedHttpProtocol", (GuardedProtocol,), {"guard": guard, "express": express})


class GuardedProtocol(HttpToolsProtocol):
    guard: ConnectionGuard
    express: Lane | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        #: When the request being read must be complete (loop time), None between requests.
        self._due: float | None = None
        self._reading = False
        #: The request being read qualified for the express lane by its head: its
        #: cycle waits for the body (``_held``), which decides.
        self._ticket: LaneTicket | None = None
        self._held: list[bytes] = []

    @property
    def idle(self) -> bool:
        """Between requests (or before the first): nothing is lost by closing it."""
        return (self.cycle is None or self.cycle.response_complete) and self._ticket is None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._writes = HeadWithBody(transport)
        if not self.guard.admit(self):
            transport.abort()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._drop_timer()
        self._ticket = None
        self.guard.left(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._due is None and self.idle:
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)

    def on_headers_complete(self) -> None:
        authority = absolute_form_authority(self.url)
        if authority is not None:
            # RFC 9112 3.2.2: a target in absolute form names the host itself, and
            # any Host header is ignored; so the loopback check judges that one.
            self.headers[:] = [(k, v) for k, v in self.headers if k != b"host"]
            self.headers.append((b"host", authority))
        elif self.express is not None and self._between_requests():
            self._ticket = self.express.ticket(self.url, self.headers)
            if self._ticket is not None:
                return  # the cycle waits for the body: on_message_complete
        self._begin_cycle()

    def _between_requests(self) -> bool:
        """A POST of HTTP/1.1, no other request of this connection still answering, nothing
        asked of the protocol that uvicorn's cycle alone does (100-continue, an upgrade)."""
        parser = self.parser
        return (
            (self.cycle is None or self.cycle.response_complete)
            and not self.expect_100_continue
            and parser.get_method() == b"POST"
            and parser.get_http_version() == "1.1"
            and not parser.should_upgrade()
        )

    def _begin_cycle(self) -> None:
        super().on_headers_complete()
        if self.cycle is not None:
            self.cycle.transport = self._writes  # type: ignore[assignment]

    def on_body(self, body: bytes) -> None:
        if self._ticket is not None:
            self._held.append(body)  # at most EXPRESS_MAX_BODY_BYTES (its Content-Length)
            return
        super().on_body(body)

    def on_response_complete(self) -> None:
        # A response without a body to carry its head (HEAD): the head leaves now.
        self._writes.release()
        super().on_response_complete()

    def on_message_complete(self) -> None:
        self._disarm()  # read in full: from here on it is the server's turn
        ticket = self._ticket
        if ticket is None:
            super().on_message_complete()
            return
        self._ticket = None
        body = b"".join(self._held)
        self._held = []
        message = ticket.message(body)
        if message is None:
            # The full path, as if the lane had never looked: the same cycle, the same body.
            self._begin_cycle()
            if body:
                super().on_body(body)
            super().on_message_complete()
            return
        self.guard.trust(self.client)
        self._express_cycle(ticket.app(message))

    def _express_cycle(self, app: Any) -> None:
        """uvicorn's cycle for a request read in full, running ``app`` instead of the ASGI
        stack: the response leaves through the cycle's writer, with its keep-alive and
        pipelining, and a failure becomes the 500 or the closed connection it always was."""
        scope = self.scope
        scope["method"] = "POST"
        scope["path"] = self.url.decode("ascii")  # the lane took only a plain ASCII path
        scope["raw_path"] = self.url
        scope["query_string"] = b""
        cycle = RequestResponseCycle(
            scope=scope,
            transport=self._writes,  # type: ignore[arg-type]
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=self.access_log,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=False,
            keep_alive=self.parser.should_keep_alive(),
            on_response=self.on_response_complete,
        )
        cycle.more_body = False
        self.cycle = cycle
        self._start_asgi_task(cycle, app)

    def close_now(self) -> None:
        self._drop_timer()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    # One timer per connection, moved lazily: a request's deadline is a number, and the
    # timer, when it fires, looks at the number (a timer made and cancelled for every
    # request would cost every call a heap push and the heap its cancelled entries).

    def _arm(self) -> None:
        self._due = self.loop.time() + self.guard.limits.read_seconds
        if self._deadline is None:
            self._deadline = self.loop.call_at(self._due, self._too_slow)

    def _disarm(self) -> None:
        self._due = None

    def _drop_timer(self) -> None:
        self._due = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        due = self._due
        if due is None:
            return  # read in time: the next request arms it again
        if due > self.loop.time():
            self._deadline = self.loop.call_at(due, self._too_slow)  # a later request's
            return
        self._due = None
        if self.transport is not None and not self.transport.is_closing():
            # No reply: a client that needed this long is not one we serve.
            self.transport.abort()


class HeadWithBody:
    """A connection's transport as its responses write to it: the head of a response
    with a Content-Length waits for its body's first piece, and the two leave in one
    write (one segment on the wire, one wake-up of the client, one system call fewer
    per call). uvicorn writes them apart, though a sized body follows its head at once
    (every such response of the tray's sends both together); a streamed one (SSE,
    chunked) has no Content-Length, so its head still leaves at once.
    """

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
        elif data.startswith(b"HTTP/1.1 ") and b"\r\ncontent-length: " in data:
            self._head = data
        else:
            self._transport.write(data)

    def close(self) -> None:
        self.release()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def release(self) -> None:
        """A head still held leaves now."""
        if self._head is not None:
            head, self._head = self._head, None
            self._transport.write(head)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def absolute_form_authority(target: bytes) -> bytes | None:
    """The host[:port] of a request target in absolute form (``http://host/path``), or None
    for the usual origin form (``/path``)."""
    _, sep, rest = target.partition(b"://")
    if not sep or target.startswith(b"/"):
        return None
    authority = re.split(rb"[/?#]", rest, maxsplit=1)[0]
    return authority.rpartition(b"@")[2]  # never the user info


class AcceptErrorThrottle:
    """An asyncio exception handler that summarises accept() failures once a minute."""

    PREFIX: Final = "socket.accept() out of system resource"

    def __init__(
        self,
        previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None,
        clock: Callable[[], float] = time.monotonic,
        every: float = ACCEPT_ERROR_LOG_SECONDS,
    ) -> None:
        self.previous = previous
        self._clock = clock
        self._every = every
        self._last: float | None = None
        self.count = 0
        self.unreported = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not str(context.get("message", "")).startswith(self.PREFIX):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self.count += 1
        self.unreported += 1
        now = self._clock()
        if self._last is None or now - self._last >= self._every:
            logger.warning(
                "the local HTTP server cannot accept connections (%s); %d time(s) since the "
                "last report. Too many open connections? mcp-tray keeps supervising meanwhile",
                context.get("exception"),
                self.unreported,
            )
            self._last = now
            self.unreported = 0
