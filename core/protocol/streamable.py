"""A lean server side of MCP streamable HTTP (the handshake era, 2024-11-05 to 2025-11-25).

Why not the SDK's ``StreamableHTTPServerTransport``: it answers every POST
with an SSE stream through several task groups and memory streams, which
cost ~6 ms per call on a small machine, and a gateway in front of every
tool call must add well under a millisecond. This one answers a request
with a plain JSON body unless something related to it has to reach the
client first (progress, a sampling or elicitation request): only then does
the response become an SSE stream, which the spec lets the server choose
per response.

    POST    one JSON-RPC message: a request (JSON or SSE reply), or a
            notification / response (202). ``initialize`` opens a session
            and returns ``Mcp-Session-Id``; everything else needs it.
    GET     the session's standalone SSE stream, for messages not tied to a
            request (list_changed, resources/updated, log messages).
    DELETE  ends the session.
"""

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple, Protocol

from starlette.types import Message, Receive, Scope, Send

from core.base.errors import RpcError
from core.protocol.headers import PROTOCOL_HEADER, SESSION_HEADER
from core.protocol.jsonrpc import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    dumps,
    error_message,
    settle,
)

logger = logging.getLogger(__name__)

#: A session with nothing in flight and no open stream for this long ends.
SESSION_IDLE_TIMEOUT_SECONDS: Final = 30 * 60
#: How often idle sessions are looked for.
SESSION_REAP_INTERVAL_SECONDS: Final = 60.0
#: Comment lines on idle SSE streams, so dead connections are noticed.
SSE_KEEPALIVE_SECONDS: Final = 15.0
#: How long a server->client request waits for the client's answer.
CLIENT_REQUEST_TIMEOUT_SECONDS: Final = 300.0
#: Largest request body accepted (a tool call with a big argument is legal).
MAX_BODY_BYTES: Final = 16 * 1024 * 1024


class Handler(Protocol):
    """What a session's owner implements (the gateway)."""

    async def on_request(
        self, ctx: "RequestContext", method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]: ...

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None: ...

    def on_close(self) -> None: ...


class RequestContext:
    """One client request in flight: where related messages go.

    The reply is a plain JSON body unless something related (progress, a
    server->client request) has to reach the client first: the first such
    message turns the reply into an SSE stream, written by a task that is
    only created then, so the common call costs no extra task at all.
    """

    def __init__(
        self,
        session: "HttpSession",
        request_id: Any,
        params: Mapping[str, Any] | None,
        send: Send | None = None,
    ) -> None:
        self.session = session
        self.request_id = request_id
        meta = (params or {}).get("_meta") or {}
        self.progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
        self._send = send
        self._queue: asyncio.Queue[dict[str, Any] | None] | None = None
        self._writer: asyncio.Task[None] | None = None

    def related(self, message: dict[str, Any]) -> None:
        if self._send is None:
            return  # initialize: no stream to carry it
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._writer = asyncio.get_running_loop().create_task(
                self._stream(self._send, self._queue)
            )
        self._queue.put_nowait(message)

    async def _stream(self, send: Send, queue: "asyncio.Queue[dict[str, Any] | None]") -> None:
        await _start_sse(send, self.session.id)
        while (item := await queue.get()) is not None:
            await _event(send, item)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def finish(self, response: dict[str, Any]) -> None:
        """Send the response: the JSON body, or the last event of the stream."""
        assert self._send is not None
        if self._queue is None or self._writer is None:
            await _respond(
                self._send,
                200,
                dumps(response),
                "application/json",
                {SESSION_HEADER: self.session.id},
            )
            return
        self._queue.put_nowait(response)
        self._queue.put_nowait(None)
        await self._writer

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.related({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

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
        self.last_active = time.monotonic()
        self.closed = False

    @property
    def streaming(self) -> bool:
        """The client holds the standalone GET stream open."""
        return self._stream is not None

    def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """A notification not tied to a request: the GET stream, if the client opened one."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        if self._stream is not None:
            self._stream.put_nowait(message)

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
            elif self._stream is not None:
                self._stream.put_nowait(message)
            else:
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

    def __init__(self, handler_factory: Callable[[HttpSession, Scope], Handler | None]) -> None:
        self._factory = handler_factory
        self.sessions: dict[str, HttpSession] = {}
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for session in list(self.sessions.values()):
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
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        session_id = headers.get(SESSION_HEADER)
        session = self.sessions.get(session_id) if session_id else None
        exchange = _Exchange(scope, receive, send, headers, session_id, session)
        if method == "POST":
            await self._post(exchange)
        elif method == "GET":
            await self._get(exchange)
        elif method == "DELETE":
            if session is None:
                await _error(
                    send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id)
                )
                return
            self._end(session)
            await _respond(send, 200, b"", "application/json")
        else:
            await _error(
                send,
                405,
                INVALID_REQUEST,
                f"method {method} is not supported here",
                {"allow": "GET, POST, DELETE"},
            )

    async def _post(self, exchange: "_Exchange") -> None:
        scope, receive, send, headers, session_id, session = exchange
        body = await _read_body(receive)
        if body is None:
            await _error(
                send, 413, INVALID_REQUEST, f"request body larger than {MAX_BODY_BYTES} bytes"
            )
            return
        try:
            message = json.loads(body)
        except ValueError as exc:
            await _error(send, 400, PARSE_ERROR, f"Parse error: {exc}")
            return
        if isinstance(message, list):
            await _error(
                send,
                400,
                INVALID_REQUEST,
                "JSON-RPC batches are not supported; send one message per POST",
            )
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await _error(send, 400, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
            return
        method = message.get("method")
        is_request = isinstance(method, str) and "id" in message
        if is_request and method == "initialize" and session_id is None:
            await self._initialize(scope, send, message)
            return
        if session is None:
            await _error(send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id))
            return
        session.last_active = time.monotonic()
        version = headers.get(PROTOCOL_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _error(
                send, 400, INVALID_REQUEST, f"unsupported MCP-Protocol-Version {version!r}"
            )
            return
        if is_request:
            assert isinstance(method, str)
            await self._request(send, receive, session, message, method)
            return
        await _respond(send, 202, b"", "application/json")
        if isinstance(method, str):
            if method == "notifications/cancelled":
                task = session.in_flight.get((message.get("params") or {}).get("requestId"))
                if task is not None:
                    task.cancel()
            elif session.handler is not None:
                try:
                    await session.handler.on_notification(method, message.get("params"))
                except Exception:
                    logger.exception("notification %s failed", method)
        else:
            session.client_answered(message)

    async def _initialize(self, scope: Scope, send: Send, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        version = (
            requested
            if requested in HANDSHAKE_PROTOCOL_VERSIONS
            else HANDSHAKE_PROTOCOL_VERSIONS[-1]
        )
        session = HttpSession(uuid.uuid4().hex, version)
        handler = self._factory(session, scope)
        if handler is None:
            await _error(send, 404, INVALID_REQUEST, "no such server")
            return
        session.handler = handler
        ctx = RequestContext(session, message["id"], params)
        response = await _run(handler, ctx, "initialize", params)
        if "error" in response:
            await _respond(send, 200, dumps(response), "application/json")
            session.close()
            return
        response["result"]["protocolVersion"] = version
        self.sessions[session.id] = session
        await _respond(send, 200, dumps(response), "application/json", {SESSION_HEADER: session.id})

    async def _request(
        self,
        send: Send,
        receive: Receive,
        session: HttpSession,
        message: dict[str, Any],
        method: str,
    ) -> None:
        handler = session.handler
        assert handler is not None
        ctx = RequestContext(session, message["id"], message.get("params"), send)
        task = asyncio.current_task()
        assert task is not None
        # notifications/cancelled cancels this very task; _run turns that into an answer.
        session.in_flight[message["id"]] = task
        try:
            response = await _run(handler, ctx, method, message.get("params"))
        finally:
            session.in_flight.pop(message["id"], None)
            session.last_active = time.monotonic()
        await ctx.finish(response)

    async def _get(self, exchange: "_Exchange") -> None:
        _, receive, send, headers, session_id, session = exchange
        if session is None:
            await _error(send, 404 if session_id else 400, INVALID_REQUEST, _missing(session_id))
            return
        if "text/event-stream" not in headers.get("accept", ""):
            await _error(
                send,
                406,
                INVALID_REQUEST,
                "Not Acceptable: the GET stream needs Accept: text/event-stream",
            )
            return
        if session._stream is not None:
            await _error(
                send, 409, INVALID_REQUEST, "Conflict: this session already has an open GET stream"
            )
            return
        stream: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        session._stream = stream
        await _start_sse(send, session.id)
        disconnected = asyncio.ensure_future(_wait_disconnect(receive))
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
                await _event(send, item)
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            disconnected.cancel()
            if session._stream is stream:
                session._stream = None
            session.last_active = time.monotonic()


async def _run(handler: Handler, ctx: RequestContext, method: str, params: Any) -> dict[str, Any]:
    """The response message for one request; handler errors become JSON-RPC errors."""
    try:
        result = await handler.on_request(ctx, method, params if isinstance(params, dict) else None)
    except RpcError as exc:
        return error_message(ctx.request_id, exc.code, exc.message, exc.data)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # answered: the cancel request is consumed here
        return error_message(ctx.request_id, INTERNAL_ERROR, "request cancelled")
    except Exception as exc:
        logger.exception("request %s failed", method)
        return error_message(
            ctx.request_id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"
        )
    return {"jsonrpc": "2.0", "id": ctx.request_id, "result": result}


def _missing(session_id: str | None) -> str:
    if session_id:
        return "Session not found: it ended or never existed; initialize a new session"
    return "Bad Request: Missing Mcp-Session-Id header (send initialize first)"


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _respond(
    send: Send, status: int, body: bytes, media_type: str, headers: Mapping[str, str] | None = None
) -> None:
    raw = [(b"content-type", media_type.encode()), (b"content-length", str(len(body)).encode())]
    raw.extend((k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _error(
    send: Send, status: int, code: int, message: str, headers: Mapping[str, str] | None = None
) -> None:
    await _respond(
        send, status, dumps(error_message(None, code, message)), "application/json", headers
    )


async def _start_sse(send: Send, session_id: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache, no-transform"),
                (SESSION_HEADER.encode(), session_id.encode()),
            ],
        }
    )


async def _event(send: Send, message: Mapping[str, Any]) -> None:
    await send(
        {
            "type": "http.response.body",
            "body": b"event: message\ndata: " + dumps(message) + b"\n\n",
            "more_body": True,
        }
    )
