"""One handshake-era client session of the streamable HTTP endpoint, and one request in it.

``core.protocol.streamable`` is the endpoint (HTTP methods, checks, dispatch);
this is what it keeps per ``Mcp-Session-Id``: the standalone GET stream (and
the notifications that came while the client had none open), the
server->client requests waiting for the client's answer, the requests in
flight (so a cancellation finds them), and the turn order of numbered
messages (``x-mcp-tray-seq``, see the endpoint's docstring).
"""

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Final, Protocol

from core.base.errors import RpcError
from core.protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, settle
from core.protocol.wire import Reply

logger = logging.getLogger(__name__)

#: How long a server->client request waits for the client's answer.
CLIENT_REQUEST_TIMEOUT_SECONDS: Final = 300.0
#: How long a request not tied to a call waits for the client to open its GET stream
#: (a client opens it right after initialize; until then there is nowhere to send it).
STREAM_WAIT_SECONDS: Final = 5.0
#: Notifications kept for a client between two GET streams (its SDK reconnects a
#: second after a stream ends, a tray restart ends every one): the newest this many.
STREAM_BACKLOG: Final = 64
#: A numbered message waits at most this long for the ones before it.
SEQUENCE_GAP_SECONDS: Final = 10.0
#: The first revision whose SSE streams carry event ids and a priming event.
PRIMED_STREAMS_SINCE: Final = "2025-11-25"


class Handler(Protocol):
    """What a session's owner implements (the gateway)."""

    async def on_request(
        self, ctx: "RequestContext", method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]: ...

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None: ...

    def on_close(self) -> None: ...


class RequestContext:
    """One client request in flight: where its related messages go."""

    def __init__(
        self,
        session: "HttpSession",
        request_id: Any,
        params: Mapping[str, Any] | None,
        reply: Reply | None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.session = session
        self.request_id = request_id
        #: The HTTP headers of the POST it came in (a client's ``traceparent``).
        self.headers: Mapping[str, str] = headers or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        self.progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.reply = reply

    def related(self, message: dict[str, Any]) -> None:
        """A message that belongs with this request (progress, a log line, a server request)."""
        if self.reply is not None:
            self.reply.related(message)
        else:
            # initialize has no stream to carry anything: the session's GET stream does.
            self.session.post(message)

    async def progress(self, params: Mapping[str, Any]) -> None:
        """The server's progress, passed on as it came, under the client's own token."""
        if self.progress_token is None:
            return
        forwarded = {**params, "progressToken": self.progress_token}
        self.related({"jsonrpc": "2.0", "method": "notifications/progress", "params": forwarded})

    async def send_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """A server->client request on this request's stream (sampling, elicitation, roots)."""
        return await self.session.client_request(method, params, via=self)


class HttpSession:
    def __init__(self, session_id: str, protocol_version: str) -> None:
        self.id = session_id
        self.protocol_version = protocol_version
        self.handler: Handler | None = None
        self.in_flight: dict[Any, asyncio.Task[Any]] = {}
        self._client_requests: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._stream: asyncio.Queue[dict[str, Any] | None] | None = None
        self._stream_opened = asyncio.Event()
        #: Notifications posted while no GET stream was open, for the next one.
        self._backlog: deque[dict[str, Any]] = deque(maxlen=STREAM_BACKLOG)
        self._next_seq = 1
        #: Set for a session adopted from a previous tray: its client numbers its
        #: messages on from where it was, so its first number starts the count.
        self.numbering_resumes = False
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._streams = itertools.count(1)
        self.last_active = time.monotonic()
        self.closed = False
        #: Closed because mcp-tray is shutting down (not a DELETE, not idle).
        self.stopping = False

    def stream_id(self) -> str | None:
        """An id for a new SSE stream, where the session's revision numbers its events."""
        if self.protocol_version < PRIMED_STREAMS_SINCE:
            return None
        return str(next(self._streams))

    @property
    def streaming(self) -> bool:
        """The client holds the standalone GET stream open."""
        return self._stream is not None

    def post(self, message: dict[str, Any]) -> bool:
        """A message for the GET stream; False when the client has none open (a
        notification then waits for its next one: a resource that changed while
        the client reconnected is still news when it is back)."""
        if self._stream is None:
            if "id" not in message:
                self._backlog.append(message)
            return False
        self._stream.put_nowait(message)
        return True

    def open_stream(self) -> "asyncio.Queue[dict[str, Any] | None]":
        """The client opened its GET stream: what waited for it goes first."""
        stream: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        while self._backlog:
            stream.put_nowait(self._backlog.popleft())
        self._stream = stream
        self._stream_opened.set()
        return stream

    def stream_closed(self, stream: "asyncio.Queue[dict[str, Any] | None]") -> None:
        """The GET stream ended: notifications it had not sent yet wait for the next one."""
        if self._stream is not stream:
            return
        self._stream = None
        self._stream_opened.clear()
        while not stream.empty():
            item = stream.get_nowait()
            if item is not None and "id" not in item:
                self._backlog.append(item)

    def notify(self, method: str, params: Mapping[str, Any] | None) -> bool:
        """A notification not tied to a request, on the GET stream if the client opened one."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        return self.post(message)

    async def client_request(
        self, method: str, params: Mapping[str, Any] | None, *, via: RequestContext | None = None
    ) -> dict[str, Any]:
        request_id = f"mcp-tray-{next(self._ids)}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._client_requests[request_id] = future
        try:
            if via is not None:
                via.related(message)
            elif not self.post(message):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stream_opened.wait(), STREAM_WAIT_SECONDS)
                if not self.post(message):
                    raise RpcError(
                        INVALID_REQUEST, f"cannot send {method!r}: the client has no open stream"
                    )
            return await asyncio.wait_for(future, CLIENT_REQUEST_TIMEOUT_SECONDS)
        except TimeoutError:
            raise RpcError(INTERNAL_ERROR, f"the client did not answer {method!r}") from None
        finally:
            self._client_requests.pop(request_id, None)

    def client_answered(self, message: Mapping[str, Any]) -> None:
        future = self._client_requests.get(str(message.get("id")))
        if future is not None:
            settle(future, message)

    async def wait_turn(self, seq: int | None) -> None:
        """Hold a numbered message until the ones numbered before it were dispatched."""
        if seq is not None and self.numbering_resumes:
            # Not a gap: the numbers before it went to the previous tray (a bridge
            # idle across a restart waited 10 s here for them).
            self.numbering_resumes = False
            self._next_seq = seq
        if seq is None or seq <= self._next_seq:
            return  # its turn (the common case: no lock, no task switch)
        waiter = self._waiters.setdefault(seq, asyncio.get_running_loop().create_future())
        try:
            await asyncio.wait_for(asyncio.shield(waiter), SEQUENCE_GAP_SECONDS)
        except TimeoutError:
            logger.warning("session %s: message %d waited for a gap; going on", self.id, seq)
        finally:
            self._waiters.pop(seq, None)

    def done_turn(self, seq: int | None) -> None:
        if seq is None or seq < self._next_seq:
            return
        self._next_seq = seq + 1
        waiter = self._waiters.get(self._next_seq)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def pass_turn(self, seq: int | None) -> None:
        """Use up a message's number, in its turn, whatever became of the message (refused,
        malformed): the next one must not wait out the gap for it. Nothing when it was used."""
        await self.wait_turn(seq)
        self.done_turn(seq)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in self.in_flight.values():
            task.cancel()
        for future in self._client_requests.values():
            if not future.done():
                future.set_exception(RpcError(INTERNAL_ERROR, "the session ended"))
        if self._stream is not None:
            self._stream.put_nowait(None)
        if self.handler is not None:
            self.handler.on_close()
