"""The express lane (core.serving.http.express): plain calls skip the ASGI stack, nothing else does.

Strategy: a real tray serving a real echo child, driven by a plain HTTP
client (httpx) and, for pipelining, a raw socket. Which path a request took
is seen from the endpoint's full-path entry (``StreamableHttp.handle``),
wrapped to count its calls; what the client gets is compared between the
two paths: a request the lane refuses must get exactly the full path's
answer, and a call must be answered the same either way.
"""

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from core.protocol.headers import SESSION_HEADER
from core.protocol.streamable import StreamableHttp
from core.serving.http.express import EXPRESS_MAX_BODY_BYTES
from core.serving.service import TrayService
from core.settings.config import load_config
from tests.conftest import ECHO, python_server, wait_ready
from tests.support.gateway_support import Raw, Services, call, events, initialize


@pytest.fixture
def full_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each request the endpoint's full path handled, by method."""
    seen: list[str] = []
    handle = StreamableHttp.handle

    async def counted(self: StreamableHttp, scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["method"])
        await handle(self, scope, receive, send)

    monkeypatch.setattr(StreamableHttp, "handle", counted)
    yield seen


async def opened(echo: tuple[TrayService, httpx.AsyncClient], path: str = "/mcp/echo") -> Raw:
    raw = Raw(echo[1], echo[0], path)
    await raw.open()
    return raw


def text_of(reply: httpx.Response) -> str:
    return str(reply.json()["result"]["content"][0]["text"])


async def test_a_plain_call_of_an_open_session_takes_the_lane_and_is_answered_in_full(
    echo: tuple[TrayService, httpx.AsyncClient], full_path: list[str]
) -> None:
    raw = await opened(echo)
    full_path.clear()  # initialize and its notification took the full path
    replies = [await raw.post(call(n, "echo", {"text": f"hi {n}"})) for n in range(2, 7)]
    assert full_path == []
    for n, reply in enumerate(replies, start=2):
        assert reply.status_code == 200
        assert reply.headers["content-type"] == "application/json"
        assert reply.headers[SESSION_HEADER] == raw.session
        assert reply.json()["id"] == n
        assert text_of(reply) == f"hi {n}"
    # Both paths answer the same call alike (a query string sends it the full way).
    lane = await raw.post(call(40, "echo", {"text": "same"}))
    full = await raw.http.post(
        raw.url + "?full=1",
        content=json.dumps(call(40, "echo", {"text": "same"})).encode(),
        headers=raw.headers(),
    )
    assert full_path == ["POST"]
    assert (full.status_code, full.json()) == (lane.status_code, lane.json())
    assert full.headers[SESSION_HEADER] == lane.headers[SESSION_HEADER]


async def test_whatever_the_lane_does_not_take_gets_the_full_paths_answer(
    echo: tuple[TrayService, httpx.AsyncClient], full_path: list[str]
) -> None:
    raw = await opened(echo)
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    cases: list[tuple[str, Any, dict[str, str], int]] = [
        ("no token", ping, {"authorization": "Bearer wrong"}, 401),
        ("a browser's origin", ping, {"origin": "http://evil.example"}, 403),
        ("a foreign host", ping, {"host": "evil.example"}, 403),
        ("an unknown session", ping, {SESSION_HEADER: "nope"}, 404),
        ("another revision's header", ping, {"mcp-protocol-version": "1999-01-01"}, 400),
        ("not JSON by type", ping, {"content-type": "text/plain"}, 415),
        ("accepts no SSE", ping, {"accept": "application/json"}, 406),
        ("not JSON", b"{not json", {}, 400),
        ("not JSON-RPC", {"id": 3, "method": "ping"}, {}, 400),
        ("an id of the wrong kind", {"jsonrpc": "2.0", "id": [1], "method": "ping"}, {}, 400),
        ("a second initialize", initialize(request_id=4), {}, 400),
        ("a notification", {"jsonrpc": "2.0", "method": "notifications/x"}, {}, 202),
        ("a batch", [ping], {}, 400),
    ]
    for what, body, headers, status in cases:
        full_path.clear()
        reply = await raw.post(body, **headers)
        assert reply.status_code == status, (what, reply.text)
        # 401/403 are the guard's before the endpoint; every other one reached the full path.
        assert full_path == ([] if status in (401, 403) else ["POST"]), what
    # Refused ones changed nothing: the session still calls through the lane.
    full_path.clear()
    assert text_of(await raw.post(call(9, "echo", {"text": "still"}))) == "still"
    assert full_path == []


async def test_a_body_too_large_for_the_lane_goes_the_full_way_and_is_served(
    echo: tuple[TrayService, httpx.AsyncClient], full_path: list[str]
) -> None:
    raw = await opened(echo)
    full_path.clear()
    big = "x" * (EXPRESS_MAX_BODY_BYTES + 10)
    reply = await raw.post(call(2, "echo", {"text": big}))
    assert reply.status_code == 200
    assert text_of(reply) == big
    assert full_path == ["POST"]


async def test_a_call_whose_server_sends_progress_first_becomes_a_stream_on_the_lane(
    echo: tuple[TrayService, httpx.AsyncClient], full_path: list[str]
) -> None:
    raw = await opened(echo)
    full_path.clear()
    reply = await raw.post(call(2, "count", {"steps": 2}, progressToken="t"))
    assert full_path == []
    assert reply.headers["content-type"].startswith("text/event-stream")
    sent = events(reply.text)
    assert [m["params"]["progress"] for m in sent if "method" in m] == [1, 2]
    assert sent[-1]["id"] == 2 and "result" in sent[-1]


async def test_pipelined_calls_on_one_connection_are_answered_in_order(
    echo: tuple[TrayService, httpx.AsyncClient], full_path: list[str]
) -> None:
    """Written in one go, each waits for the answer before it (uvicorn's pipelining)."""
    service, _ = echo
    raw = await opened(echo)
    full_path.clear()

    def request(n: int, target: str = "/mcp/echo") -> bytes:
        body = json.dumps(call(n, "echo", {"text": f"p{n}"})).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in raw.headers().items())
        return (
            f"POST {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body

    host, port = service.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request(1) + request(2, "/mcp/echo?full") + request(3))
        await writer.drain()
        answers = []
        for _ in range(3):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200 "), head
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            answers.append(json.loads(await reader.readexactly(length)))
    finally:
        writer.close()
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert [a["result"]["content"][0]["text"] for a in answers] == ["p1", "p2", "p3"]
    # The first took the lane; the others came while one was being answered, so they
    # queued the full way (uvicorn's pipelining), as every request did before the lane.
    assert full_path == ["POST", "POST"]


async def test_a_server_removed_from_the_config_is_refused_as_before(
    services: Services, full_path: list[str]
) -> None:
    service = await services.start({"echo": python_server(ECHO), "other": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(http, service, "/mcp/other")
        await raw.open()
        services.paths.config_file.write_text(
            json.dumps({"mcpServers": {"echo": python_server(ECHO)}})
        )
        await service.supervisor.apply_config(load_config(services.paths.config_file))
        full_path.clear()
        reply = await raw.post(call(2, "echo", {"text": "gone"}))
    assert reply.status_code == 404
    assert "other" in reply.json()["error"]["message"]
    assert full_path == []  # the gateway itself answered: the lane left it alone


async def test_a_sequence_number_in_other_digits_is_no_number_on_either_path(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    """``x-mcp-tray-seq: ²`` (a digit to str.isdigit, not to int) numbers nothing."""
    service, _ = echo
    raw = await opened(echo)
    host, port = service.url.removeprefix("http://").split(":")
    for target in ("/mcp/echo", "/mcp/echo?full"):
        body = json.dumps(call(5, "echo", {"text": target})).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in raw.headers().items()).encode()
        request = (
            f"POST {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n".encode()
            + head
            + b"x-mcp-tray-seq: \xb2\r\ncontent-length: %d\r\n\r\n" % len(body)
            + body
        )
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(request)
            head_back = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        finally:
            writer.close()
        assert head_back.startswith(b"HTTP/1.1 200 "), (target, head_back)
