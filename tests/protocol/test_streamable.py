"""StreamableHttp: the gateway's server side of MCP streamable HTTP, branch by branch.

Strategy: every test drives ``StreamableHttp.handle`` directly as the ASGI
callable it is, with a hand-built scope, a ``receive`` that hands over the
body and then waits for a disconnect the test controls, and a ``send`` that
queues what the app wrote. That is the same contract uvicorn honours, with
no socket in between, so a test can read an SSE stream event by event while
the request is still in flight. The session's owner is a small fake
``Handler`` whose methods each do one thing (echo, wait to be cancelled,
send progress, ask the client). Idle reaping is driven by letting the
reaper's 60 s sleep return on a test's signal and moving ``last_active``
into the past; nothing waits real minutes. Every wait is bounded.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from starlette.types import Message, Scope

import core.protocol.http_session as http_session
import core.protocol.streamable as streamable
from core.base.errors import RpcError
from core.protocol.headers import PROTOCOL_HEADER, SESSION_HEADER, TRAY_STOPPING_REASON
from core.protocol.http_session import HttpSession, RequestContext
from core.protocol.jsonrpc import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    SLICE_CHARS,
    dumps,
)
from core.protocol.streamable import StreamableHttp
from core.protocol.wire import DEFAULT_MAX_BODY_BYTES
from tests.conftest import wait_until

PROMPT = 5.0
PATH = "/mcp/fake"


class FakeHandler:
    """One session's owner: each method name does one thing."""

    def __init__(self, session: HttpSession) -> None:
        self.session = session
        self.notifications: list[tuple[str, Any]] = []
        self.closed = False
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def on_request(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method == "initialize":
            if params and params.get("fail"):
                raise RpcError(-32602, "this server refuses to start")
            return {
                "protocolVersion": "set-by-the-handler",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
        if method == "echo":
            return {"params": params}
        if method == "wait":
            self.started.set()
            try:
                await asyncio.Event().wait()  # until cancelled
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        if method == "progress":
            await ctx.progress(
                {"progressToken": 9, "progress": 1, "total": 2, "message": "half way"}
            )
            await self.release.wait()
            return {"done": True}
        if method == "ask":
            try:
                answer = await ctx.send_request("sampling/createMessage", {"q": 1})
            except RpcError as exc:
                return {"client_error": exc.message}
            return {"client_said": answer}
        if method == "boom":
            raise ValueError("kaboom")
        if method == "large":
            assert params is not None
            if params.get("progress"):
                await ctx.progress({"progressToken": 9, "progress": 1})
            return {"text": large_text(params["unit"], params["times"])}
        raise RpcError(-32601, f"no method {method}")

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        self.notifications.append((method, params))
        if method == "test/explode":
            raise RuntimeError("a notification handler failed")

    def on_close(self) -> None:
        self.closed = True


class Gateway:
    """The app under test plus the handlers it created, by session id."""

    def __init__(self) -> None:
        self.app = StreamableHttp(self._connect)
        self.handlers: dict[str, FakeHandler] = {}
        self.refused: list[FakeHandler] = []
        self.exchanges: list[Exchange] = []

    def _connect(self, session: HttpSession, scope: Scope) -> FakeHandler | None:
        if scope["path"] != PATH:
            return None
        handler = FakeHandler(session)
        self.handlers[session.id] = handler
        return handler

    def exchange(
        self,
        method: str,
        message: Any = None,
        *,
        session: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        chunks: list[bytes] | None = None,
        path: str = PATH,
    ) -> "Exchange":
        all_headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **(headers or {}),
        }
        if session is not None:
            all_headers[SESSION_HEADER] = session
        if chunks is None:
            chunks = [body if body is not None else b"" if message is None else dumps(message)]
        exchange = Exchange(self.app, method, path, all_headers, chunks)
        self.exchanges.append(exchange)
        return exchange

    async def post(self, message: Any = None, **kwargs: Any) -> "Reply":
        return await self.exchange("POST", message, **kwargs).reply()

    async def initialize(self, version: str = "2025-06-18") -> str:
        reply = await self.post(initialize_message(version))
        assert reply.status == 200, reply.body
        return reply.headers[SESSION_HEADER]


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


class Exchange:
    """One HTTP request through the ASGI callable; the test reads what it sends."""

    def __init__(
        self,
        app: StreamableHttp,
        method: str,
        path: str,
        headers: Mapping[str, str],
        chunks: list[bytes],
    ) -> None:
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        self._chunks = list(chunks)
        self._disconnected = asyncio.Event()
        self._sent: asyncio.Queue[Message] = asyncio.Queue()
        self.task = asyncio.ensure_future(app.handle(scope, self._receive, self._send))

    async def _receive(self) -> Message:
        if self._chunks:
            chunk = self._chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self._chunks)}
        await self._disconnected.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        await self._sent.put(message)

    async def _next(self) -> Message:
        return await asyncio.wait_for(self._sent.get(), PROMPT)

    async def start(self) -> tuple[int, dict[str, str]]:
        message = await self._next()
        assert message["type"] == "http.response.start"
        headers = {k.decode(): v.decode() for k, v in message["headers"]}
        return message["status"], headers

    async def body_part(self) -> tuple[bytes, bool]:
        message = await self._next()
        assert message["type"] == "http.response.body"
        return message.get("body", b""), message.get("more_body", False)

    async def reply(self) -> Reply:
        status, headers = await self.start()
        parts = []
        while True:
            part, more = await self.body_part()
            parts.append(part)
            if not more:
                break
        await asyncio.wait_for(self.task, PROMPT)
        return Reply(status, headers, b"".join(parts))

    async def event(self) -> dict[str, Any]:
        """The next SSE event's JSON-RPC message (each event is one body part here)."""
        part, more = await self.body_part()
        assert more, f"the stream ended instead of sending an event: {part!r}"
        assert part.startswith(b"event: message\ndata: ") and part.endswith(b"\n\n"), part
        message = json.loads(part[len(b"event: message\ndata: ") :])
        assert isinstance(message, dict)
        return message

    async def end(self) -> None:
        """The stream's last (empty) body part, then the app returns."""
        part, more = await self.body_part()
        assert (part, more) == (b"", False)
        await asyncio.wait_for(self.task, PROMPT)

    def disconnect(self) -> None:
        self._disconnected.set()


def initialize_message(version: str = "2025-06-18", **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"sampling": {}},
            "clientInfo": {"name": "test", "version": "1"},
            **params,
        },
    }


def request(method: str, request_id: Any = 1, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def error_of(reply: Reply) -> dict[str, Any]:
    body = reply.json()
    assert body["id"] is None
    error = body["error"]
    assert isinstance(error, dict)
    return error


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gateway = Gateway()
    yield gateway
    await gateway.app.aclose()
    for exchange in gateway.exchanges:
        exchange.disconnect()
    pending = [e.task for e in gateway.exchanges if not e.task.done()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


# ---------------------------------------------------------- initialize


async def test_initialize_opens_a_session_and_answers_with_its_id_and_the_requested_version(
    gateway: Gateway,
) -> None:
    reply = await gateway.post(initialize_message("2025-03-26"))

    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    session_id = reply.headers[SESSION_HEADER]
    assert session_id in gateway.app.sessions
    body = reply.json()
    assert body["id"] == 0
    # The transport, not the handler, decides the version it speaks.
    assert body["result"]["protocolVersion"] == "2025-03-26"
    assert body["result"]["serverInfo"] == {"name": "fake", "version": "1"}
    assert gateway.app.sessions[session_id].protocol_version == "2025-03-26"


async def test_initialize_with_a_version_the_gateway_does_not_speak_gets_the_latest_it_does(
    gateway: Gateway,
) -> None:
    reply = await gateway.post(initialize_message("2099-01-01"))

    assert reply.json()["result"]["protocolVersion"] == HANDSHAKE_PROTOCOL_VERSIONS[-1]


async def test_an_initialize_the_handler_refuses_is_answered_with_its_error_and_opens_no_session(
    gateway: Gateway,
) -> None:
    reply = await gateway.post(initialize_message(fail=True))

    assert reply.status == 200
    assert SESSION_HEADER not in reply.headers
    assert reply.json()["error"] == {"code": -32602, "message": "this server refuses to start"}
    assert gateway.app.sessions == {}
    (handler,) = gateway.handlers.values()
    assert handler.closed


async def test_initialize_for_a_server_the_factory_does_not_know_is_404(gateway: Gateway) -> None:
    reply = await gateway.post(initialize_message(), path="/mcp/nosuch")

    assert reply.status == 404
    assert error_of(reply)["message"] == "no such server"
    assert gateway.app.sessions == {}


# -------------------------------------------------------------- 4xx


async def test_a_post_without_a_session_id_is_400_and_says_to_initialize_first(
    gateway: Gateway,
) -> None:
    reply = await gateway.post(request("tools/list"))

    assert reply.status == 400
    error = error_of(reply)
    assert error["code"] == INVALID_REQUEST
    assert "Missing Mcp-Session-Id" in error["message"]


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_a_session_id_the_gateway_does_not_know_is_404_for_every_method(
    gateway: Gateway, method: str
) -> None:
    reply = await gateway.exchange(
        method,
        request("tools/list") if method == "POST" else None,
        session="no-such-session",
        headers={"accept": "application/json, text/event-stream"},
    ).reply()

    assert reply.status == 404
    assert "Session not found" in error_of(reply)["message"]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_get_or_delete_without_a_session_id_is_400(gateway: Gateway, method: str) -> None:
    reply = await gateway.exchange(method, headers={"accept": "text/event-stream"}).reply()

    assert reply.status == 400
    assert "Missing Mcp-Session-Id" in error_of(reply)["message"]


async def test_a_body_over_the_limit_is_413_even_when_it_arrives_in_pieces(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = await gateway.initialize()
    body = dumps(request("echo", params={"pad": "x" * 40}))
    gateway.app.max_body_bytes = len(body) - 1

    pieces = [body[:20], body[20:40], body[40:]]
    reply = await gateway.post(session=session, chunks=pieces)

    assert reply.status == 413
    assert f"limited to {len(body) - 1} bytes" in error_of(reply)["message"]


async def test_a_body_exactly_at_the_limit_is_accepted(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = await gateway.initialize()
    body = dumps(request("echo", params={"pad": "x" * 40}))
    gateway.app.max_body_bytes = len(body)

    reply = await gateway.post(session=session, chunks=[body[:30], body[30:]])

    assert reply.status == 200
    assert reply.json()["result"] == {"params": {"pad": "x" * 40}}


async def test_a_body_that_is_not_json_is_400_with_a_parse_error(gateway: Gateway) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(session=session, body=b'{"jsonrpc": "2.0", "id": 1,')

    assert reply.status == 400
    error = error_of(reply)
    assert error["code"] == PARSE_ERROR
    assert error["message"].startswith("Parse error:")


async def test_a_json_rpc_batch_is_answered_in_a_2025_03_26_session_as_an_array(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize("2025-03-26")

    reply = await gateway.post(
        [request("echo", 1), {"jsonrpc": "2.0", "method": "note"}, request("echo", 2)],
        session=session,
    )

    assert reply.status == 200
    assert sorted(item["id"] for item in reply.json()) == [1, 2]
    assert gateway.handlers[session].notifications == [("note", None)]


async def test_a_json_rpc_batch_is_400_in_a_session_of_a_later_revision(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize("2025-06-18")

    reply = await gateway.post([request("echo", 1), request("echo", 2)], session=session)

    assert reply.status == 400
    error = error_of(reply)
    assert error["code"] == INVALID_REQUEST
    assert "batches are not part of MCP 2025-06-18" in error["message"]


async def test_a_batch_holding_initialize_is_refused(gateway: Gateway) -> None:
    session = await gateway.initialize("2025-03-26")

    reply = await gateway.post([initialize_message("2025-03-26")], session=session)

    assert reply.status == 400
    assert "initialize must not be part of a batch" in error_of(reply)["message"]


async def test_a_second_initialize_in_a_session_is_400_with_its_id(gateway: Gateway) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(initialize_message(), session=session)

    assert reply.status == 400
    assert reply.json()["id"] == 0
    assert "already initialized" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"accept": "application/json"}, 406),
        ({"accept": "text/event-stream"}, 406),
        ({"accept": ""}, 406),
        ({"content-type": "text/plain"}, 415),
        ({"content-type": ""}, 415),
    ],
    ids=["json-only", "sse-only", "no-accept", "text-plain", "no-content-type"],
)
async def test_a_post_with_the_wrong_media_types_is_refused(
    gateway: Gateway, headers: dict[str, str], status: int
) -> None:
    reply = await gateway.post(initialize_message(), headers=headers)

    assert reply.status == status
    assert gateway.app.sessions == {}


CANCEL_7 = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}


async def cancelled_before_it_came(gateway: Gateway, session: str, cancel: Exchange) -> None:
    """Request 7 (which waits to be cancelled), numbered 1, sent after ``cancel``, which
    cancels it: the cancellation must have waited for it, and it is not answered."""
    waiting = gateway.exchange(
        "POST", request("wait", 7), session=session, headers={"x-mcp-tray-seq": "1"}
    )

    assert (await cancel.reply()).status == 202
    assert gateway.handlers[session].cancelled
    assert (await waiting.reply()).body == b""


async def test_numbered_messages_are_dispatched_in_the_order_of_their_numbers(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    cancel = gateway.exchange("POST", CANCEL_7, session=session, headers={"x-mcp-tray-seq": "2"})

    await cancelled_before_it_came(gateway, session, cancel)


@pytest.mark.parametrize(
    ("version", "body", "status"),
    [
        ("2025-06-18", b"[]", 400),
        ("2025-06-18", b"42", 400),
        ("2025-06-18", b'{"jsonrpc": "2.0", "id": NaN, "method": "echo"}', 400),
        ("2025-06-18", b"not json", 400),
        ("2025-06-18", b" " * (DEFAULT_MAX_BODY_BYTES + 1), 413),
        ("2025-06-18", dumps(initialize_message()), 400),
        ("2025-03-26", b"[]", 400),
        ("2025-03-26", dumps([request("echo", 5), request("echo", 6)]), 200),
    ],
    ids=[
        "batch-2025-06-18",
        "a-number",
        "nan-id",
        "not-json",
        "too-large",
        "initialize-again",
        "empty-batch-2025-03-26",
        "batch-2025-03-26",
    ],
)
async def test_a_numbered_message_answered_without_dispatch_never_holds_up_the_next(
    gateway: Gateway, version: str, body: bytes, status: int
) -> None:
    session = await gateway.initialize(version)

    odd = await gateway.post(body=body, session=session, headers={"x-mcp-tray-seq": "1"})
    # Well within the 10 s a missing number is waited for (every wait here is 5 s).
    following = await gateway.post(
        request("echo", 9), session=session, headers={"x-mcp-tray-seq": "2"}
    )

    assert odd.status == status
    assert following.status == 200 and following.json()["id"] == 9


async def test_a_refused_numbered_message_still_waits_its_turn_so_later_ones_keep_their_order(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    # Arriving in the order 2, 3, 1: the refusal (2) must not let the
    # cancellation (3) overtake the request it cancels (1).
    refused = gateway.exchange("POST", 42, session=session, headers={"x-mcp-tray-seq": "2"})
    cancel = gateway.exchange("POST", CANCEL_7, session=session, headers={"x-mcp-tray-seq": "3"})

    await cancelled_before_it_came(gateway, session, cancel)
    assert (await refused.reply()).status == 400


async def test_a_numbered_batch_takes_its_turn_as_one_message(gateway: Gateway) -> None:
    session = await gateway.initialize("2025-03-26")
    batch = gateway.exchange("POST", [CANCEL_7], session=session, headers={"x-mcp-tray-seq": "2"})

    await cancelled_before_it_came(gateway, session, batch)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "echo"},
        {"id": 1, "method": "echo"},
        42,
        "echo",
    ],
    ids=["version-1.0", "no-jsonrpc-member", "a-number", "a-string"],
)
async def test_a_message_that_is_not_json_rpc_2_0_is_400(gateway: Gateway, message: Any) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(message, session=session)

    assert reply.status == 400
    assert error_of(reply) == {
        "code": INVALID_REQUEST,
        "message": "Invalid Request: not a JSON-RPC 2.0 message",
    }


async def test_a_post_with_an_unsupported_protocol_version_header_is_400_and_a_known_one_passes(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()

    refused = await gateway.post(
        request("echo"), session=session, headers={PROTOCOL_HEADER: "2099-01-01"}
    )
    accepted = await gateway.post(
        request("echo"), session=session, headers={PROTOCOL_HEADER: "2025-06-18"}
    )

    assert refused.status == 400
    assert "unsupported MCP-Protocol-Version '2099-01-01'" in error_of(refused)["message"]
    assert accepted.status == 200


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_get_or_delete_with_an_unsupported_protocol_version_header_is_400(
    gateway: Gateway, method: str
) -> None:
    session = await gateway.initialize()

    exchange = gateway.exchange(
        method,
        session=session,
        headers={PROTOCOL_HEADER: "2099-01-01", "accept": "text/event-stream"},
    )
    status, _ = await exchange.start()
    exchange.disconnect()

    assert status == 400


@pytest.mark.parametrize("method", ["initialize", "echo"])
async def test_a_request_whose_params_are_not_an_object_gets_a_json_rpc_error_not_a_crash(
    gateway: Gateway, method: str
) -> None:
    session = None if method == "initialize" else await gateway.initialize()
    exchange = gateway.exchange("POST", request(method, 1, ["by", "position"]), session=session)

    await asyncio.wait_for(exchange.task, PROMPT)  # the app must return, not raise
    reply = await exchange.reply()

    assert reply.status in (200, 400)
    assert reply.json()["id"] == 1
    assert reply.json()["error"]["code"] in (INVALID_REQUEST, -32602)


@pytest.mark.parametrize(
    "params", [["not", "an", "object"], {"requestId": ["a", "list"]}], ids=["list", "list-id"]
)
async def test_a_malformed_cancellation_is_202_and_the_app_returns_normally(
    gateway: Gateway, params: Any
) -> None:
    session = await gateway.initialize()
    exchange = gateway.exchange(
        "POST",
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params},
        session=session,
    )

    await asyncio.wait_for(exchange.task, PROMPT)  # the app must return, not raise
    assert (await exchange.reply()).status == 202


@pytest.mark.parametrize("method", ["PUT", "PATCH", "HEAD", "OPTIONS"])
async def test_other_http_methods_are_405_with_an_allow_header(
    gateway: Gateway, method: str
) -> None:
    reply = await gateway.exchange(method).reply()

    assert reply.status == 405
    assert reply.headers["allow"] == "GET, POST, DELETE"
    assert f"method {method} is not supported" in error_of(reply)["message"]


async def test_a_get_that_does_not_accept_an_event_stream_is_406(gateway: Gateway) -> None:
    session = await gateway.initialize()

    reply = await gateway.exchange(
        "GET", session=session, headers={"accept": "application/json"}
    ).reply()

    assert reply.status == 406
    assert "Accept: text/event-stream" in error_of(reply)["message"]


async def test_a_second_get_stream_for_one_session_is_409_while_the_first_is_open(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    first = gateway.exchange("GET", session=session, headers={"accept": "text/event-stream"})
    status, headers = await first.start()
    assert status == 200
    assert headers["content-type"] == "text/event-stream"

    second = await gateway.exchange(
        "GET", session=session, headers={"accept": "text/event-stream"}
    ).reply()

    assert second.status == 409
    assert "already has an open GET stream" in error_of(second)["message"]


# ----------------------------------------------------- 202 and DELETE


async def test_a_notification_is_202_and_reaches_the_handler(gateway: Gateway) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session
    )

    assert (reply.status, reply.body) == (202, b"")
    assert gateway.handlers[session].notifications == [("notifications/initialized", None)]


async def test_a_notification_whose_handler_fails_is_still_202_and_the_session_goes_on(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()

    reply = await gateway.post({"jsonrpc": "2.0", "method": "test/explode"}, session=session)
    after = await gateway.post(request("echo"), session=session)

    assert reply.status == 202
    assert after.status == 200


async def test_a_response_from_the_client_is_202_even_when_nothing_waits_for_it(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(
        {"jsonrpc": "2.0", "id": "mcp-tray-99", "result": {}}, session=session
    )

    assert (reply.status, reply.body) == (202, b"")


async def test_delete_ends_the_session_and_later_requests_for_it_are_404(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    stream = gateway.exchange("GET", session=session, headers={"accept": "text/event-stream"})
    await stream.start()

    deleted = await gateway.exchange("DELETE", session=session).reply()

    assert deleted.status == 200
    assert gateway.handlers[session].closed
    assert session not in gateway.app.sessions
    await stream.end()  # the session's GET stream ends with it
    after = await gateway.post(request("echo"), session=session)
    assert after.status == 404


# ------------------------------------------------------ JSON or SSE


async def test_a_request_with_nothing_related_to_send_gets_a_plain_json_reply(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(request("echo", 7, {"text": "hi"}), session=session)

    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers[SESSION_HEADER] == session
    assert reply.json() == {"jsonrpc": "2.0", "id": 7, "result": {"params": {"text": "hi"}}}


async def test_progress_before_the_answer_turns_the_reply_into_an_sse_stream(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    handler = gateway.handlers[session]
    exchange = gateway.exchange(
        "POST", request("progress", "p-1", {"_meta": {"progressToken": "tok"}}), session=session
    )

    status, headers = await exchange.start()
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers[SESSION_HEADER] == session
    # The progress arrives while the handler is still working.
    assert await exchange.event() == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "tok", "progress": 1, "total": 2, "message": "half way"},
    }
    handler.release.set()
    assert await exchange.event() == {"jsonrpc": "2.0", "id": "p-1", "result": {"done": True}}
    await exchange.end()


async def body_parts(exchange: Exchange) -> list[bytes]:
    """The rest of a reply's body, as the parts the app sent it in."""
    parts = []
    more = True
    while more:
        part, more = await exchange.body_part()
        parts.append(part)
    await asyncio.wait_for(exchange.task, PROMPT)
    return parts


#: Larger than a slice once repeated; JSON escapes some of it, UTF-8 takes several
#: bytes for some, and a lone surrogate (no client may send one: the handler makes
#: it from "@") has the whole message go out escaped.
LARGE_UNITS = ['é "quoted"\n😀 ', "a@"]


def large_text(unit: str, times: int) -> str:
    return unit.replace("@", "\ud800") * times


@pytest.mark.parametrize("unit", LARGE_UNITS, ids=["escapes-and-utf-8", "lone-surrogate"])
async def test_a_large_result_goes_out_in_slices_that_make_exactly_its_json(
    gateway: Gateway, unit: str
) -> None:
    session = await gateway.initialize()
    times = 3 * SLICE_CHARS // len(unit)
    exchange = gateway.exchange(
        "POST", request("large", 3, {"unit": unit, "times": times}), session=session
    )

    _, headers = await exchange.start()
    parts = await body_parts(exchange)

    body = b"".join(parts)
    assert body == dumps({"jsonrpc": "2.0", "id": 3, "result": {"text": large_text(unit, times)}})
    assert int(headers["content-length"]) == len(body)
    # Never whole as bytes: no part holds more than a slice's worth.
    assert len(parts) > 3 and max(map(len, parts)) <= 4 * SLICE_CHARS


async def test_a_large_result_on_an_event_stream_goes_out_in_slices_of_one_event(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    unit = LARGE_UNITS[0]
    times = 3 * SLICE_CHARS // len(unit)
    params = {"unit": unit, "times": times, "progress": True, "_meta": {"progressToken": "t"}}
    exchange = gateway.exchange("POST", request("large", 4, params), session=session)

    _, headers = await exchange.start()
    progress = await exchange.event()
    parts = await body_parts(exchange)

    assert headers["content-type"] == "text/event-stream"
    assert progress["method"] == "notifications/progress"
    answer = dumps({"jsonrpc": "2.0", "id": 4, "result": {"text": large_text(unit, times)}})
    assert b"".join(parts) == b"event: message\ndata: " + answer + b"\n\n"
    assert len(parts) > 3 and max(map(len, parts)) <= 4 * SLICE_CHARS


async def test_a_2025_11_25_stream_opens_with_a_priming_event_and_numbers_its_events(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize("2025-11-25")
    gateway.handlers[session].release.set()

    reply = await gateway.post(
        request("progress", 5, {"_meta": {"progressToken": "t"}}), session=session
    )

    body = reply.body.decode()
    priming, *events = body.split("\n\n")[:-1]
    assert priming == "id: 1/0\nretry: 1000\ndata: "
    assert [event.splitlines()[0] for event in events] == ["id: 1/1", "id: 1/2"]


async def test_progress_for_a_request_without_a_progress_token_is_dropped_and_the_reply_is_json(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    gateway.handlers[session].release.set()

    reply = await gateway.post(request("progress", 3), session=session)

    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == {"jsonrpc": "2.0", "id": 3, "result": {"done": True}}


async def test_a_handler_that_raises_gets_its_request_an_internal_error_naming_the_exception(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(request("boom", 4), session=session)

    assert reply.status == 200
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": INTERNAL_ERROR, "message": "internal error: ValueError: kaboom"},
    }


# ---------------------------------------------------- cancellation


async def test_notifications_cancelled_cancels_the_handler_and_the_request_is_not_answered(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    handler = gateway.handlers[session]
    waiting = gateway.exchange("POST", request("wait", 7), session=session)
    await asyncio.wait_for(handler.started.wait(), PROMPT)

    cancel = await gateway.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}},
        session=session,
    )
    reply = await waiting.reply()

    assert cancel.status == 202
    assert handler.cancelled
    # Receivers of a cancellation do not respond: the POST's stream just ends.
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.body == b""
    assert gateway.app.sessions[session].in_flight == {}
    # The cancel is not a notification for the handler.
    assert handler.notifications == []


async def test_a_cancellation_for_a_request_not_in_flight_changes_nothing(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()

    reply = await gateway.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        session=session,
    )
    after = await gateway.post(request("echo", 100), session=session)

    assert reply.status == 202
    assert after.json()["result"] == {"params": None}


# ------------------------------------------- server -> client requests


async def test_a_server_request_goes_out_on_the_requests_stream_and_a_posted_answer_resolves_it(
    gateway: Gateway,
) -> None:
    session = await gateway.initialize()
    asking = gateway.exchange("POST", request("ask", "call-1"), session=session)

    status, headers = await asking.start()
    assert (status, headers["content-type"]) == (200, "text/event-stream")
    server_request = await asking.event()
    assert server_request["method"] == "sampling/createMessage"
    assert server_request["params"] == {"q": 1}
    assert server_request["id"] == "mcp-tray-1"

    answer = await gateway.post(
        {"jsonrpc": "2.0", "id": server_request["id"], "result": {"text": "hello"}},
        session=session,
    )

    assert answer.status == 202
    assert await asking.event() == {
        "jsonrpc": "2.0",
        "id": "call-1",
        "result": {"client_said": {"text": "hello"}},
    }
    await asking.end()


async def test_a_posted_error_answer_reaches_the_handler_as_rpc_error(gateway: Gateway) -> None:
    session = await gateway.initialize()
    asking = gateway.exchange("POST", request("ask", "call-2"), session=session)
    await asking.start()
    server_request = await asking.event()

    await gateway.post(
        {
            "jsonrpc": "2.0",
            "id": server_request["id"],
            "error": {"code": -1, "message": "the user declined"},
        },
        session=session,
    )

    assert (await asking.event())["result"] == {"client_error": "the user declined"}
    await asking.end()


async def test_the_get_stream_carries_notifications_and_requests_not_tied_to_a_request(
    gateway: Gateway,
) -> None:
    session_id = await gateway.initialize()
    session = gateway.app.sessions[session_id]
    stream = gateway.exchange("GET", session=session_id, headers={"accept": "text/event-stream"})
    await stream.start()

    session.notify("notifications/tools/list_changed", None)
    assert await stream.event() == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    asking = asyncio.ensure_future(session.client_request("roots/list", None))
    roots = await stream.event()
    assert roots["method"] == "roots/list"
    await gateway.post(
        {"jsonrpc": "2.0", "id": roots["id"], "result": {"roots": []}}, session=session_id
    )
    assert await asyncio.wait_for(asking, PROMPT) == {"roots": []}


async def test_a_server_request_waits_for_the_clients_get_stream_then_rides_it(
    gateway: Gateway,
) -> None:
    # A server may ask the moment it is initialized, before the client opened its stream.
    session_id = await gateway.initialize()
    session = gateway.app.sessions[session_id]
    asking = asyncio.ensure_future(session.client_request("roots/list", None))
    await asyncio.sleep(0)
    stream = gateway.exchange("GET", session=session_id, headers={"accept": "text/event-stream"})
    await stream.start()

    roots = await stream.event()
    await gateway.post(
        {"jsonrpc": "2.0", "id": roots["id"], "result": {"roots": []}}, session=session_id
    )

    assert roots["method"] == "roots/list"
    assert await asyncio.wait_for(asking, PROMPT) == {"roots": []}


async def test_a_server_request_with_no_stream_to_carry_it_fails_once_none_opens(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_session, "STREAM_WAIT_SECONDS", 0.01)
    session_id = await gateway.initialize()
    session = gateway.app.sessions[session_id]
    session.notify("notifications/message", {"level": "info"})  # dropped: nobody listens

    with pytest.raises(RpcError) as caught:
        await asyncio.wait_for(session.client_request("roots/list", None), PROMPT)
    assert "the client has no open stream" in caught.value.message


async def test_a_client_that_drops_its_get_stream_can_open_a_new_one(gateway: Gateway) -> None:
    session = await gateway.initialize()
    headers = {"accept": "text/event-stream"}
    first = gateway.exchange("GET", session=session, headers=headers)
    await first.start()

    first.disconnect()
    await first.end()
    second = gateway.exchange("GET", session=session, headers=headers)

    status, _ = await second.start()
    assert status == 200


# ------------------------------------------------------------ reaping


async def test_the_reaper_ends_sessions_idle_past_the_timeout_and_spares_busy_ones(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reaper sleeps 60 s between rounds: let that one sleep end on our signal.
    real_sleep = asyncio.sleep
    rounds = asyncio.Queue[None]()
    waiting = 0

    async def sleep(delay: float, result: Any = None) -> Any:
        nonlocal waiting
        if delay != 60:
            return await real_sleep(delay, result)
        waiting += 1
        await rounds.get()
        return result

    monkeypatch.setattr(asyncio, "sleep", sleep)
    app = gateway.app
    idle, recent, streaming, busy = [await gateway.initialize() for _ in range(4)]
    stream = gateway.exchange("GET", session=streaming, headers={"accept": "text/event-stream"})
    await stream.start()
    working = gateway.exchange("POST", request("wait", 1), session=busy)
    await asyncio.wait_for(gateway.handlers[busy].started.wait(), PROMPT)
    long_ago = time.monotonic() - streamable.SESSION_IDLE_TIMEOUT_SECONDS - 1
    for session_id in (idle, streaming, busy):
        app.sessions[session_id].last_active = long_ago
    app.start()
    await wait_until(lambda: waiting == 1, timeout=PROMPT, what="the reaper's first sleep")

    rounds.put_nowait(None)
    await wait_until(lambda: waiting == 2, timeout=PROMPT, what="one reaping round")

    assert set(app.sessions) == {recent, streaming, busy}
    assert gateway.handlers[idle].closed
    assert not any(gateway.handlers[s].closed for s in (recent, streaming, busy))

    # The reaper keeps going: once "recent" has been idle too long, the next round ends it.
    app.sessions[recent].last_active = long_ago
    rounds.put_nowait(None)
    await wait_until(lambda: waiting == 3, timeout=PROMPT, what="a second reaping round")
    assert set(app.sessions) == {streaming, busy}

    await app.aclose()  # ends the rest: the stream closes, the busy request is answered
    await stream.end()
    answer = (await working.reply()).json()
    # Cut by the shutdown, and marked so (a bridge reconnects instead of relaying it).
    assert answer["error"]["message"].startswith("mcp-tray is shutting down")
    assert answer["error"]["data"] == {"reason": TRAY_STOPPING_REASON}


async def test_aclose_ends_every_session(gateway: Gateway) -> None:
    sessions = [await gateway.initialize() for _ in range(2)]
    gateway.app.start()

    await gateway.app.aclose()

    assert gateway.app.sessions == {}
    assert all(gateway.handlers[s].closed for s in sessions)
