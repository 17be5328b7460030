"""A lean server side of MCP streamable HTTP, the handshake era (2024-11-05 to 2025-11-25).

Why not the SDK's ``StreamableHTTPServerTransport``: it answers every POST
with an SSE stream through several task groups and memory streams, which
cost ~6 ms per call on a small machine, and a gateway in front of every
tool call must add well under a millisecond. This one answers a request
with a plain JSON body unless something related to it has to reach the
client first (progress, a log message, a sampling or elicitation request):
only then does the response become an SSE stream, which the spec lets the
server choose per response.

    POST    JSON-RPC: a request (JSON or SSE reply), a notification or a
            response (202), or in a 2025-03-26 session a batch of them.
            ``initialize`` opens a session and returns ``Mcp-Session-Id``;
            everything else needs it.
    GET     the session's standalone SSE stream, for messages not tied to a
            request (list_changed, resources/updated, log messages).
    DELETE  ends the session.

Checked on every request, in this order: the MCP-Protocol-Version header,
Content-Type (415) and Accept (406), the body size (413), JSON (400 parse
error), JSON-RPC shape (400 invalid request / invalid params). A request the
client cancels is not answered (its POST ends with an empty stream).

Messages from one client may arrive over several connections at once. A
client that needs them handled in the order it sent them (the stdio bridge)
numbers them with ``x-mcp-tray-seq``; the session then dispatches them in
that order (a gap is waited for at most ``SEQUENCE_GAP_SECONDS``). Every
number is used up in its turn, also by a message refused before dispatch
(malformed, too large, a batch), so none leaves a gap.
"""

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from starlette.types import Receive, Scope, Send

from core.base.errors import RpcError
from core.protocol.headers import (
    PROTOCOL_HEADER,
    SEQUENCE_HEADER,
    SESSION_HEADER,
    TRAY_STOPPING_REASON,
    scope_headers,
)
from core.protocol.http_session import Handler, HttpSession, RequestContext
from core.protocol.jsonrpc import (
    BATCH_PROTOCOL_VERSIONS,
    HANDSHAKE_PROTOCOL_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    dumps,
    error_message,
    valid_id,
)
from core.protocol.stateless import StatelessHandler, handle_stateless
from core.protocol.turns import LoopTurns
from core.protocol.wire import (
    ANSWERED,
    DEFAULT_MAX_BODY_BYTES,
    JSON_TYPE,
    SSE_TYPE,
    Reply,
    accepts,
    error,
    event,
    read_message,
    respond,
    shape_problem,
    start_sse,
    wait_disconnect,
)

logger = logging.getLogger(__name__)

#: A session with nothing in flight and no open stream for this long ends.
SESSION_IDLE_TIMEOUT_SECONDS: Final = 30 * 60
#: How often idle sessions are looked for.
SESSION_REAP_INTERVAL_SECONDS: Final = 60.0
#: Comment lines on idle SSE streams, so dead connections are noticed.
SSE_KEEPALIVE_SECONDS: Final = 15.0


class _Exchange(NamedTuple):
    """One HTTP request to the endpoint, and the session its header names."""

    scope: Scope
    receive: Receive
    send: Send
    headers: Mapping[str, str]
    session_id: str | None
    session: HttpSession | None


class StreamableHttp:
    """The ASGI side: sessions by id, one ``Handler`` per session."""

    def __init__(
        self,
        handler_factory: Callable[[HttpSession, Scope], Handler | None],
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        stateless: StatelessHandler | None = None,
        adopt: Callable[[str, Scope], HttpSession | None] | None = None,
    ) -> None:
        self._factory = handler_factory
        self._stateless = stateless
        #: Brings back a session this endpoint does not hold (one of a previous tray's).
        self._adopt = adopt
        self.max_body_bytes = max_body_bytes
        self.sessions: dict[str, HttpSession] = {}
        self._reaper: asyncio.Task[None] | None = None
        #: Opens take turns behind the calls of open sessions (core.protocol.turns).
        self._opens = LoopTurns()

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for session in list(self.sessions.values()):
            session.stopping = True
            self._end(session)

    def _end(self, session: HttpSession) -> None:
        self.sessions.pop(session.id, None)
        session.close()

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(SESSION_REAP_INTERVAL_SECONDS)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                idle = not session.in_flight and not session.streaming
                if idle and now - session.last_active > SESSION_IDLE_TIMEOUT_SECONDS:
                    logger.info(
                        "session %s idle for %d s: closing it",
                        session.id,
                        SESSION_IDLE_TIMEOUT_SECONDS,
                    )
                    self._end(session)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        headers = scope_headers(scope)
        session_id = headers.get(SESSION_HEADER)
        session = self.sessions.get(session_id) if session_id else None
        if session is None and session_id and self._adopt is not None:
            session = self._adopt(session_id, scope)
            if session is not None:
                self.sessions[session.id] = session
        version = headers.get(PROTOCOL_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            if self._stateless is not None and session_id is None:
                # Not a handshake revision: the stateless era, which also
                # answers versions it does not know (-32022 lists them).
                await handle_stateless(
                    self._stateless, scope, receive, send, headers, self.max_body_bytes
                )
                return
            await error(
                send,
                400,
                INVALID_REQUEST,
                f"Bad Request: unsupported MCP-Protocol-Version {version!r} "
                f"(supported: {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
            )
            return
        exchange = _Exchange(scope, receive, send, headers, session_id, session)
        if method == "POST":
            await self._post(exchange)
        elif method == "GET":
            await self._get(exchange)
        elif method == "DELETE":
            if session is None:
                await error(send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id))
                return
            self._end(session)
            await respond(send, 200, b"", JSON_TYPE)
        else:
            await error(
                send,
                405,
                INVALID_REQUEST,
                f"method {method} is not supported here",
                {"allow": "GET, POST, DELETE"},
            )

    async def _post(self, exchange: _Exchange) -> None:
        session = exchange.session
        seq = sequence_number(exchange.headers) if session is not None else None
        try:
            await self._post_numbered(exchange, seq)
        finally:
            if session is not None:
                await session.pass_turn(seq)

    async def _post_numbered(self, exchange: _Exchange, seq: int | None) -> None:
        _, receive, send, headers, session_id, session = exchange
        message = await read_message(receive, send, headers, self.max_body_bytes)
        if message is ANSWERED:
            return
        if isinstance(message, list):
            await self._batch(exchange, message, seq)
            return
        problem_message = shape_problem(message)
        if problem_message is not None:
            await respond(send, 400, dumps(problem_message), JSON_TYPE)
            return
        method = message.get("method")
        is_request = isinstance(method, str) and "id" in message
        if is_request and method == "initialize":
            if session_id is None:
                await self._opens.wait()
                await self._initialize(exchange, message)
            else:
                await error(
                    send,
                    400,
                    INVALID_REQUEST,
                    "Bad Request: this session is already initialized; "
                    "start a new session (without Mcp-Session-Id) to initialize again",
                    request_id=message["id"],
                )
            return
        if session is None:
            await error(send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id))
            return
        if is_request:
            await self._one_request(session, message, seq, send, headers)
            return
        session.last_active = time.monotonic()
        # Handled before the 202, so a client that waits for it knows its
        # notification (a cancellation, roots/list_changed) took effect.
        await self._one_way(session, message, seq)
        await respond(send, 202, b"", JSON_TYPE)

    async def serve_request(
        self, session: HttpSession, message: dict[str, Any], seq: int | None, send: Send
    ) -> None:
        """One request of an open session, already read and checked (core.serving.http.express
        makes sure the checks of ``handle`` would have let it through)."""
        try:
            await self._one_request(session, message, seq, send)
        finally:
            await session.pass_turn(seq)

    async def _one_request(
        self,
        session: HttpSession,
        message: dict[str, Any],
        seq: int | None,
        send: Send,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        session.last_active = time.monotonic()
        reply = Reply(
            send, {SESSION_HEADER: session.id}, 1, batch=False, stream_id=session.stream_id()
        )
        await self._request(session, message, reply, seq, headers)

    async def _batch(self, exchange: _Exchange, messages: list[Any], seq: int | None) -> None:
        """A JSON-RPC batch: allowed by 2025-03-26 only (later revisions removed it)."""
        send, session_id, session = exchange.send, exchange.session_id, exchange.session
        if session is None:
            await error(send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id))
            return
        if session.protocol_version not in BATCH_PROTOCOL_VERSIONS:
            await error(
                send,
                400,
                INVALID_REQUEST,
                f"JSON-RPC batches are not part of MCP {session.protocol_version}; "
                "send one message per POST",
            )
            return
        if not messages:
            await error(send, 400, INVALID_REQUEST, "an empty JSON-RPC batch")
            return
        problems = [shape_problem(item) for item in messages]
        requests = [
            item
            for item, problem in zip(messages, problems, strict=True)
            if problem is None and isinstance(item.get("method"), str) and "id" in item
        ]
        if any(item.get("method") == "initialize" for item in requests):
            await error(send, 400, INVALID_REQUEST, "initialize must not be part of a batch")
            return
        session.last_active = time.monotonic()
        rejected = [problem for problem in problems if problem is not None]
        reply = Reply(
            send,
            {SESSION_HEADER: session.id},
            len(requests) + len(rejected),
            batch=True,
            stream_id=None,
        )
        # The batch takes its turn as one message: what it holds is dispatched
        # (the requests put in flight) before a later-numbered message is.
        await session.wait_turn(seq)
        try:
            for item, problem in zip(messages, problems, strict=True):
                if problem is None and item not in requests:
                    await self._one_way(session, item, None)
            calls = [
                asyncio.ensure_future(self._request(session, item, reply, None, exchange.headers))
                for item in requests
            ]
        finally:
            session.done_turn(seq)
        for problem in rejected:
            await reply.respond(problem)
        if not requests and not rejected:
            await respond(send, 202, b"", JSON_TYPE)
            return
        await asyncio.gather(*calls)

    async def _one_way(
        self, session: HttpSession, message: dict[str, Any], seq: int | None
    ) -> None:
        """A notification or a response from the client (already answered with 202)."""
        await session.wait_turn(seq)
        method = message.get("method")
        params = message.get("params")
        try:
            if not isinstance(method, str):
                session.client_answered(message)
            elif method == "notifications/cancelled":
                request_id = params.get("requestId") if isinstance(params, dict) else None
                task = session.in_flight.get(request_id) if valid_id(request_id) else None
                if task is not None:
                    task.cancel()
        finally:
            session.done_turn(seq)
        if isinstance(method, str) and method != "notifications/cancelled" and session.handler:
            try:
                await session.handler.on_notification(
                    method, params if isinstance(params, dict) else None
                )
            except Exception:
                logger.exception("notification %s failed", method)

    async def _initialize(self, exchange: _Exchange, message: dict[str, Any]) -> None:
        send = exchange.send
        params = message.get("params") or {}
        if not isinstance(params, dict):
            problem = error_message(message["id"], INVALID_PARAMS, "params must be a JSON object")
            await respond(send, 400, dumps(problem), JSON_TYPE)
            return
        requested = params.get("protocolVersion")
        version = (
            requested
            if requested in HANDSHAKE_PROTOCOL_VERSIONS
            else HANDSHAKE_PROTOCOL_VERSIONS[-1]
        )
        session = HttpSession(uuid.uuid4().hex, version)
        handler = self._factory(session, exchange.scope)
        if handler is None:
            await error(send, 404, INVALID_REQUEST, "no such server")
            return
        session.handler = handler
        ctx = RequestContext(session, message["id"], params, None)
        response = await _run(handler, ctx, "initialize", params)
        if response is None or "error" in response:
            await respond(send, 200, dumps(response or {}), JSON_TYPE)
            session.close()
            return
        # The handler may settle on an older version both sides speak; the
        # transport still only speaks the handshake versions it knows.
        result = response["result"]
        if result.get("protocolVersion") not in HANDSHAKE_PROTOCOL_VERSIONS:
            result["protocolVersion"] = version
        session.protocol_version = result["protocolVersion"]
        self.sessions[session.id] = session
        await respond(send, 200, dumps(response), JSON_TYPE, {SESSION_HEADER: session.id})

    async def _request(
        self,
        session: HttpSession,
        message: dict[str, Any],
        reply: Reply,
        seq: int | None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        handler = session.handler
        assert handler is not None
        request_id = message["id"]
        params = message.get("params")
        ctx = RequestContext(session, request_id, params, reply, headers)
        task = asyncio.current_task()
        assert task is not None
        await session.wait_turn(seq)
        # notifications/cancelled cancels this very task; _run then answers nothing.
        session.in_flight[request_id] = task
        session.done_turn(seq)
        try:
            response = await _run(handler, ctx, message["method"], params)
        finally:
            session.in_flight.pop(request_id, None)
            session.last_active = time.monotonic()
        await reply.respond(response)

    async def _get(self, exchange: _Exchange) -> None:
        _, receive, send, headers, session_id, session = exchange
        if session is None:
            await error(send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id))
            return
        if not accepts(headers, SSE_TYPE):
            await error(
                send,
                406,
                INVALID_REQUEST,
                "Not Acceptable: the GET stream needs Accept: text/event-stream",
            )
            return
        if session._stream is not None:
            await error(
                send, 409, INVALID_REQUEST, "Conflict: this session already has an open GET stream"
            )
            return
        stream = session.open_stream()
        await start_sse(send, {SESSION_HEADER: session.id})
        disconnected = asyncio.ensure_future(wait_disconnect(receive))
        try:
            while not session.closed:
                getter = asyncio.ensure_future(stream.get())
                done, _ = await asyncio.wait(
                    [getter, disconnected],
                    timeout=SSE_KEEPALIVE_SECONDS,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if disconnected in done:
                    getter.cancel()
                    break
                if getter not in done:
                    getter.cancel()
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b": keepalive\n\n",
                            "more_body": True,
                        }
                    )
                    continue
                item = getter.result()
                if item is None:
                    break
                await event(send, item)
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            disconnected.cancel()
            session.stream_closed(stream)
            session.last_active = time.monotonic()


async def _run(
    handler: Handler, ctx: RequestContext, method: str, params: Any
) -> dict[str, Any] | None:
    """The response message for one request (None when it was cancelled)."""
    if params is not None and not isinstance(params, dict):
        return error_message(ctx.request_id, INVALID_PARAMS, "params must be a JSON object")
    try:
        result = await handler.on_request(ctx, method, params)
    except RpcError as exc:
        return error_message(ctx.request_id, exc.code, exc.message, exc.data)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # consumed here
        if ctx.session.stopping:
            return error_message(
                ctx.request_id,
                INTERNAL_ERROR,
                "mcp-tray is shutting down: this request was cut in flight, so it may or may "
                "not have taken effect",
                {"reason": TRAY_STOPPING_REASON},
            )
        if ctx.session.closed:
            # The session ended under the request (DELETE, idle): say so.
            return error_message(
                ctx.request_id, INTERNAL_ERROR, "request cancelled: the session ended"
            )
        return None  # the client cancelled it: receivers of a cancellation do not answer
    except Exception as exc:
        logger.exception("request %s failed", method)
        return error_message(
            ctx.request_id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"
        )
    return {"jsonrpc": "2.0", "id": ctx.request_id, "result": result}


def sequence_number(headers: Mapping[str, str]) -> int | None:
    raw = headers.get(SEQUENCE_HEADER)
    # ASCII digits only: str.isdigit() also says yes to "²", which int() refuses.
    if raw is None or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)


def _missing(session_id: str | None) -> str:
    if session_id:
        return "Session not found: it ended or never existed; initialize a new session"
    return "Bad Request: Missing Mcp-Session-Id header (send initialize first)"
