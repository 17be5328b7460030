"""The bridge's Relay (stdin lines to POSTs, replies to stdout lines) and bridge_identity.

Strategy: a Relay is pointed at a fake gateway, a tiny HTTP/1.1 server on
127.0.0.1 port 0 on asyncio streams (tests/support/http_fakes.py), whose answer to each
request the test supplies as raw bytes (JSON bodies, chunked SSE split at
awkward places, 202s, 4xx bodies, or nothing listening at all). The Relay's
stdout is an in-memory writer that queues each line, so a test reads what
the AI client would read, with a bounded wait per line. ``Relay.aclose`` is
the drain point: after it, every submitted line has been answered or
dropped, so "nothing was written" is checked after it, never after a sleep.
bridge_identity runs against real processes (a spawned ``sleep``, and a pid
that cannot exist).
"""

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import psutil
import pytest

from core.base.envvars import CLIENT_INSTANCE_ENV, CLIENT_NAME_ENV, CLIENT_SESSION_ENV
from core.bridge.attachment import BridgeIdentity, bridge_identity
from core.bridge.relay import Relay
from core.protocol.headers import PROTOCOL_HEADER, SESSION_HEADER
from core.registry.identity import normalize_client_name
from tests.conftest import wait_until
from tests.support.http_fakes import Answer, RawServer, Request, answering, send, unused_port

PROMPT = 5.0
#: Above any Linux pid_max (2**22), so no process can have it.
IMPOSSIBLE_PID = 2**22 + 1


def http_reply(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def json_reply(message: Any, status: int = 200, headers: dict[str, str] | None = None) -> bytes:
    return http_reply(
        status,
        json.dumps(message).encode(),
        {"content-type": "application/json", **(headers or {})},
    )


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
SSE_END = b"0\r\n\r\n"


class FakeGateway(RawServer):
    """Records every request; ``answer`` decides the raw reply."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp/echo"

    def posted(self) -> list[Any]:
        return [r.json() for r in self.requests if r.method == "POST"]


class Stdout:
    """The bridge's stdout: what the AI client reads, one JSON-RPC line at a time."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self._lines: asyncio.Queue[bytes] = asyncio.Queue()

    def write(self, data: bytes) -> None:
        self.written.append(data)
        for line in data.split(b"\n")[:-1]:
            self._lines.put_nowait(line)

    async def drain(self) -> None:
        pass

    async def line(self) -> Any:
        return json.loads(await asyncio.wait_for(self._lines.get(), PROMPT))

    def lines(self) -> list[Any]:
        return [json.loads(line) for data in self.written for line in data.splitlines()]


def rpc(method: str, request_id: Any = None, **params: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def result(request: Request, value: dict[str, Any]) -> bytes:
    return json_reply({"jsonrpc": "2.0", "id": request.json()["id"], "result": value})


async def no_get_stream(request: Request, writer: asyncio.StreamWriter) -> bool:
    """The answer to the Relay's standalone GET when a test is not about it."""
    await send(writer, http_reply(405, headers={"allow": "POST"}))
    return True


@contextlib.asynccontextmanager
async def relay_to(
    answer: Answer, headers: dict[str, str] | None = None
) -> AsyncIterator[tuple[Relay, FakeGateway, Stdout]]:
    gateway = FakeGateway(answer)
    await gateway.start()
    out = Stdout()
    relay = Relay(gateway.url, headers or {"authorization": "Bearer t0ken"}, out)
    try:
        yield relay, gateway, out
    finally:
        await relay.aclose()
        await gateway.aclose()


# ----------------------------------------------------------- sessions


async def test_initialize_learns_the_session_and_version_and_every_later_request_carries_them() -> (
    None
):
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.method == "GET":
            return await no_get_stream(request, writer)
        if request.method == "DELETE":
            await send(writer, http_reply(200))
            return True
        message = request.json()
        if message["method"] == "initialize":
            reply = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {}}
            await send(
                writer,
                json_reply(
                    {"jsonrpc": "2.0", "id": 0, "result": reply}, headers={SESSION_HEADER: "sess-1"}
                ),
            )
        else:
            await send(writer, result(request, {"tools": []}))
        return True

    async with relay_to(answer) as (relay, gateway, out):
        relay.submit(rpc("initialize", 0, protocolVersion="2025-11-25"))
        assert (await out.line())["result"]["protocolVersion"] == "2025-06-18"
        assert (relay.session_id, relay.protocol_version) == ("sess-1", "2025-06-18")

        relay.submit(rpc("tools/list", 1))
        assert await out.line() == {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}

        first, later = (r for r in gateway.requests if r.method == "POST")
        assert first.target == "/mcp/echo"
        assert SESSION_HEADER not in first.headers
        assert later.headers[SESSION_HEADER] == "sess-1"
        assert later.headers[PROTOCOL_HEADER] == "2025-06-18"
        for sent in (first, later):
            assert sent.headers["authorization"] == "Bearer t0ken"
            assert sent.headers["accept"] == "application/json, text/event-stream"
            assert sent.headers["content-type"] == "application/json"
        # The session's standalone GET stream was asked for.
        await wait_until(
            lambda: any(r.method == "GET" for r in gateway.requests),
            timeout=PROMPT,
            what="the GET stream",
        )
        get = next(r for r in gateway.requests if r.method == "GET")
        assert get.headers["accept"] == "text/event-stream"
        assert get.headers[SESSION_HEADER] == "sess-1"

        await relay.aclose()
        # Ending the bridge ends its gateway session.
        delete = gateway.requests[-1]
        assert (delete.method, delete.headers[SESSION_HEADER]) == ("DELETE", "sess-1")


async def test_the_get_stream_relays_notifications_not_tied_to_a_request() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    gets = 0

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        nonlocal gets
        if request.method == "GET":
            gets += 1
            if gets > 1:
                return await no_get_stream(request, writer)
            await send(writer, SSE_HEAD + chunk(b"data: " + json.dumps(note).encode() + b"\n\n"))
            await send(writer, SSE_END)
            return True
        if request.method == "DELETE":
            await send(writer, http_reply(200))
            return True
        await send(
            writer,
            json_reply({"jsonrpc": "2.0", "id": 0, "result": {}}, headers={SESSION_HEADER: "s"}),
        )
        return True

    async with relay_to(answer) as (relay, _, out):
        relay.submit(rpc("initialize", 0))
        assert (await out.line())["id"] == 0
        assert await out.line() == note


# ---------------------------------------------------------------- SSE


async def test_an_sse_reply_is_relayed_line_by_line_as_its_events_arrive() -> None:
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 0.5},
    }
    final = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}}
    progress_seen = asyncio.Event()

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        first = b"event: message\r\ndata: " + json.dumps(progress).encode() + b"\r\n\r\n"
        # An event split mid-line across chunks, and a keepalive comment.
        await send(
            writer, SSE_HEAD + chunk(first[:25]) + chunk(first[25:]) + chunk(b": keepalive\n\n")
        )
        # The answer goes out only after the client has the progress line.
        await asyncio.wait_for(progress_seen.wait(), PROMPT)
        last = b"event: message\ndata: " + json.dumps(final).encode() + b"\n\n"
        await send(writer, chunk(last) + SSE_END)
        return True

    async with relay_to(answer) as (relay, _, out):
        relay.submit(rpc("tools/call", 1, name="slow", _meta={"progressToken": 1}))
        assert await out.line() == progress
        progress_seen.set()
        assert await out.line() == final


async def test_an_sse_stream_cut_before_its_blank_line_still_delivers_its_last_event() -> None:
    final = {"jsonrpc": "2.0", "id": 2, "result": {}}

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        await send(
            writer, SSE_HEAD + chunk(b"data: " + json.dumps(final).encode() + b"\n") + SSE_END
        )
        return True

    async with relay_to(answer) as (relay, _, out):
        relay.submit(rpc("ping", 2))
        assert await out.line() == final


async def test_a_large_event_in_many_chunks_is_relayed_whole_and_exact() -> None:
    large = {"jsonrpc": "2.0", "id": 3, "result": {"text": 'é "x"\n' * 300_000}}
    other = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": 1}}

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        # Two data lines (joined by a newline), one without the optional space,
        # CRLF line ends; then the large event, in 64 KiB chunks with its CR and
        # LF in different ones.
        stream = b'data:{"jsonrpc": "2.0", "method": "notifications/message",\r\n'
        stream += b'data: "params": {"n": 1}}\r\n\r\n'
        stream += b"event: message\r\ndata: " + json.dumps(large).encode() + b"\r"
        pieces = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
        await send(writer, SSE_HEAD + b"".join(map(chunk, pieces)) + chunk(b"\n\r\n") + SSE_END)
        return True

    async with relay_to(answer) as (relay, _, out):
        relay.submit(rpc("tools/call", 3, name="large"))
        assert await out.line() == other
        assert await out.line() == large


# ------------------------------------------------------- other replies


async def test_a_202_reply_writes_nothing_to_the_client() -> None:
    async with relay_to(answering(http_reply(202))) as (relay, gateway, out):
        relay.submit(rpc("notifications/initialized"))
        relay.submit(json.dumps({"jsonrpc": "2.0", "id": "mcp-tray-1", "result": {}}).encode())
        await relay.aclose()  # drains both

        assert len(gateway.posted()) == 2
        assert out.written == []


async def test_an_http_error_whose_body_is_a_json_rpc_error_for_the_request_is_relayed_as_is() -> (
    None
):
    body = {"jsonrpc": "2.0", "id": 5, "error": {"code": -32603, "message": "it broke"}}

    async with relay_to(answering(json_reply(body, status=500))) as (relay, _, out):
        relay.submit(rpc("tools/call", 5))
        assert await out.line() == body


async def test_an_http_error_without_a_body_becomes_a_json_rpc_error_for_the_request() -> None:
    async with relay_to(answering(http_reply(503))) as (relay, _, out):
        relay.submit(rpc("tools/call", "req-7"))
        assert await out.line() == {
            "jsonrpc": "2.0",
            "id": "req-7",
            "error": {"code": -32603, "message": "mcp-tray answered HTTP 503"},
        }


@pytest.mark.parametrize(
    "reply",
    [
        json_reply(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Session not found"},
            },
            status=404,
        ),
        json_reply({"error": "unauthorized", "kind": "unauthorized"}, status=401),
        http_reply(502, b"Bad Gateway", {"content-type": "text/plain"}),
    ],
    ids=["404-id-null", "401-not-json-rpc", "502-plain-text"],
)
async def test_an_http_error_body_that_does_not_answer_the_request_still_reaches_it_by_id(
    reply: bytes,
) -> None:
    async with relay_to(answering(reply)) as (relay, _, out):
        relay.submit(rpc("tools/call", 5))
        await relay.aclose()

        shapes = []
        for data in out.written:
            for line in data.splitlines():
                try:
                    message = json.loads(line)
                except ValueError:
                    message = {"not json": line}
                shapes.append((message.get("jsonrpc"), message.get("id"), "error" in message))
        assert shapes == [("2.0", 5, True)]


# -------------------------------------------------------------- failures


async def test_a_gateway_that_stays_down_answers_the_request_with_an_error_carrying_its_id() -> (
    None
):
    port = unused_port()
    out = Stdout()
    relay = Relay(f"http://127.0.0.1:{port}/mcp/echo", {}, out, wait_seconds=0.2)
    try:
        relay.submit(rpc("tools/call", 42))
        relay.submit(rpc("notifications/initialized"))  # nothing to answer
        await wait_until(lambda: out.lines(), timeout=PROMPT, what="the error")
    finally:
        await relay.aclose()

    (message,) = out.lines()  # the notification got no answer
    assert message["id"] == 42
    assert message["error"]["code"] == -32603
    assert "mcp-tray is not running (waited 0.2 s for it)" in message["error"]["message"]


async def test_a_ping_while_the_gateway_is_away_is_answered_by_the_bridge() -> None:
    port = unused_port()
    out = Stdout()
    relay = Relay(f"http://127.0.0.1:{port}/mcp/echo", {}, out, wait_seconds=5)
    try:
        relay.submit(rpc("tools/call", 1))  # finds the gateway away
        await wait_until(lambda: relay._reconnecting is not None, timeout=PROMPT, what="away")
        relay.submit(rpc("ping", 2))
        await wait_until(lambda: out.lines(), timeout=PROMPT, what="the pong")
        assert out.lines() == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    finally:
        await relay.aclose()


async def test_a_stdin_line_that_is_not_json_or_holds_nan_gets_a_parse_error_with_id_null_and_is_not_posted() -> (
    None
):
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        raise AssertionError("nothing should be posted")

    async with relay_to(answer) as (relay, gateway, out):
        relay.submit(b"this is not json\n")
        relay.submit(b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}\n')
        for why in ("Expecting value", "NaN is not JSON"):
            said = await out.line()
            assert said["id"] is None and said["error"]["code"] == -32700
            assert said["error"]["message"].startswith(
                "Parse error: the bridge got a line that is not JSON"
            )
            assert why in said["error"]["message"]
        await relay.aclose()
        assert gateway.requests == []


async def test_pipelined_requests_are_posted_at_once_so_a_slow_one_does_not_hold_up_the_next() -> (
    None
):
    second_arrived = asyncio.Event()

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.json()["id"] == 1:
            # Held until the next line's POST is in: the relay did not wait for us.
            await asyncio.wait_for(second_arrived.wait(), PROMPT)
        else:
            second_arrived.set()
        await send(writer, result(request, {"n": request.json()["id"]}))
        return True

    async with relay_to(answer) as (relay, _, out):
        relay.submit(rpc("tools/call", 1, name="slow"))
        relay.submit(rpc("tools/call", 2, name="fast"))

        assert (await out.line())["id"] == 2
        assert (await out.line())["id"] == 1


# ------------------------------------------------------------ identity


def test_bridge_identity_comes_from_the_mcp_tray_client_variables_when_set() -> None:
    environ = {
        CLIENT_NAME_ENV: "Claude Desktop",
        CLIENT_INSTANCE_ENV: "window-2",
        CLIENT_SESSION_ENV: "chat-42",
    }

    assert bridge_identity(environ, os.getpid()) == BridgeIdentity(
        "Claude Desktop", "window-2", "chat-42"
    )


async def test_bridge_identity_falls_back_to_the_parent_process_name_pid_and_start_time() -> None:
    parent = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        started = int(psutil.Process(parent.pid).create_time())

        who = bridge_identity({}, parent.pid)
        named = bridge_identity({CLIENT_NAME_ENV: "Claude Desktop"}, parent.pid)
    finally:
        parent.kill()
        await parent.wait()

    assert who == BridgeIdentity("sleep", str(parent.pid), f"sleep-{parent.pid}-{started}")
    # A name alone: the session is still keyed to this parent, under the normalised name.
    assert named == BridgeIdentity(
        "Claude Desktop",
        str(parent.pid),
        f"{normalize_client_name('Claude Desktop')}-{parent.pid}-{started}",
    )


def test_bridge_identity_of_a_parent_that_is_gone_is_unknown() -> None:
    assert not psutil.pid_exists(IMPOSSIBLE_PID)

    who = bridge_identity({}, IMPOSSIBLE_PID)

    assert who == BridgeIdentity(
        "unknown", str(IMPOSSIBLE_PID), f"{normalize_client_name('unknown')}-{IMPOSSIBLE_PID}-0"
    )


def test_empty_mcp_tray_client_variables_count_as_unset() -> None:
    environ = {CLIENT_NAME_ENV: "", CLIENT_INSTANCE_ENV: "", CLIENT_SESSION_ENV: ""}

    who = bridge_identity(environ, IMPOSSIBLE_PID)

    assert who.client == "unknown"
    assert who.instance == str(IMPOSSIBLE_PID)
