"""The express lane can only speed a request up, never change its answer (core.serving.http.express).

Strategy: hypothesis generates whole HTTP requests (target, every header the
lane or the full path reads, present, absent, repeated or wrong, and bodies
from a plain call to garbage) and sends each one twice to one real tray
serving a real echo child, as raw bytes on a socket: once with the lane on,
once with it off (the lane's judge answering None to everything, as it does
on a uvicorn without its hook). Each send gets a session of its own, opened
the same way, so both see the same state. The two answers must have the same
status, the same body (the session ids put back to one name) and leave their
sessions in the same state.
"""

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import h11
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.protocol.headers import PROTOCOL_HEADER, SEQUENCE_HEADER, SESSION_HEADER
from core.protocol.streamable import StreamableHttp
from core.serving.http import http_guard
from core.serving.http.http_guard import lane_hook_missing
from core.serving.service import TrayService
from tests.conftest import ECHO, python_server, wait_ready
from tests.support.gateway_support import Services

BOTH = "application/json, text/event-stream"
ABSENT = "<absent>"
TWICE = "<twice>"

#: What stands for a session's id in a request before it is sent, and in a body compared.
MINE = "<mine>"


def call(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "same"}},
    }


BODY_LIST = [
    json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}).encode(),
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
    json.dumps([call(7), call(8)]).encode(),
    json.dumps({"jsonrpc": "2.0", "id": 9, "result": {}}).encode(),
    json.dumps({"jsonrpc": "1.0", "id": 10, "method": "ping"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": 11, "method": 3}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": 12, "method": "initialize"}).encode(),
    json.dumps({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": 4}).encode(),
    b'{"jsonrpc": "2.0", "id": 14, "method": "ping", "id": 15}',
    b'{"jsonrpc": "2.0", "id": 16, "method": "ping", "x": NaN}',
    b"[]",
    b"{}",
    b"",
    b"not json",
    b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}',
]
BODIES = st.one_of(
    st.builds(lambda i: json.dumps(call(i)).encode(), st.integers(-(2**53), 2**53)),
    st.builds(lambda i: json.dumps(call(i)).encode(), st.text(max_size=8)),
    st.sampled_from(BODY_LIST),
    st.binary(max_size=40),
)

#: The plain call's headers: what a real client sends in an open session.
PLAIN: dict[str, str] = {
    "host": "127.0.0.1",
    "authorization": "<token>",
    SESSION_HEADER: MINE,
    "content-type": "application/json",
    "accept": BOTH,
}
#: What a header may be instead (``MINE`` becomes the session's id): the lane must
#: tell each from the plain value exactly as the full path does.
VARIANTS: dict[str, list[str]] = {
    "host": ["localhost", "[::1]", "127.0.0.1:1", "example.com", ABSENT, TWICE],
    "authorization": ["Bearer nope", "bearer <raw>", "Bearer <raw> ", ABSENT, TWICE],
    SESSION_HEADER: ["unknown-session", ABSENT, TWICE],
    PROTOCOL_HEADER: ["2025-06-18", "2025-03-26", "2026-07-28", "x"],
    "content-type": ["application/json; charset=utf-8", "text/plain", ABSENT, TWICE],
    "accept": ["application/json", "*/*", "text/html", ABSENT, TWICE],
    "origin": ["http://localhost", "https://evil.example"],
    SEQUENCE_HEADER: ["1", "²", "-1", "x"],
    "transfer-encoding": ["identity"],
}
TARGETS_LIST = [
    "/mcp/echo?x=1",
    "/mcp/ech%6F",
    "/mcp/nope",
    "/echo/mcp",
    "/mcp/@none",
    "/mcp/echo/",
]
TARGETS = st.sampled_from(TARGETS_LIST)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]], bytes]:
    """The plain call with a few of its parts changed: the lane's edge is near it."""
    chosen = dict(PLAIN)
    changed = draw(st.lists(st.sampled_from(sorted(VARIANTS)), min_size=1, max_size=2, unique=True))
    for name in changed:
        chosen[name] = draw(st.sampled_from(VARIANTS[name]))
    headers: list[tuple[str, str]] = []
    for name, value in chosen.items():
        if value == TWICE:
            headers += [(name, PLAIN[name]), (name, PLAIN[name])]
        elif value != ABSENT:
            headers.append((name, value))
    # Mostly the plain target and body, so the headers' changes are judged on their own.
    target = draw(st.sampled_from([*["/mcp/echo"] * 3, None])) or draw(TARGETS)
    body = draw(st.sampled_from([*[json.dumps(call(2)).encode()] * 3, None])) or draw(BODIES)
    return target, headers, body


@pytest.fixture
def full_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each request the endpoint's full path handled (so a test knows the lane was used)."""
    seen: list[str] = []
    handle = StreamableHttp.handle

    async def counted(self: StreamableHttp, scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await handle(self, scope, receive, send)

    monkeypatch.setattr(StreamableHttp, "handle", counted)
    yield seen


async def open_session(service: TrayService, http: httpx.AsyncClient) -> str:
    headers = {"authorization": f"Bearer {service.token}", "accept": BOTH}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "property", "version": "1"},
        },
    }
    reply = await http.post(f"{service.url}/mcp/echo", json=initialize, headers=headers)
    assert reply.status_code == 200, reply.text
    session = reply.headers[SESSION_HEADER]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers[SESSION_HEADER] = session
    await http.post(f"{service.url}/mcp/echo", json=done, headers=headers)
    return session


async def send_raw(
    service: TrayService, target: str, headers: list[tuple[str, str]], body: bytes, session: str
) -> tuple[int, bytes]:
    """One request as raw bytes on a connection of its own; its status and whole body."""
    port = int(service.url.rsplit(":", 1)[1])
    lines = [f"POST {target} HTTP/1.1"]
    for name, value in headers:
        value = value.replace(MINE, session).replace("<token>", f"Bearer {service.token}")
        lines.append(f"{name}: {value.replace('<raw>', service.token)}")
    lines += [f"content-length: {len(body)}", "connection: close"]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 20)
    finally:
        writer.close()
    parser = h11.Connection(h11.CLIENT)
    parser.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    parser.send(h11.EndOfMessage())
    parser.receive_data(data)
    parser.receive_data(b"")
    status, chunks = 0, []
    while True:
        event = parser.next_event()
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed) or event is h11.NEED_DATA:
            break
    return status, b"".join(chunks).replace(session.encode(), MINE.encode())


def session_state(service: TrayService, session: str) -> tuple[bool, bool]:
    endpoint = service.gateway.served_endpoint("echo")
    assert endpoint is not None
    held = endpoint.sessions.get(session)
    return held is not None, held is not None and held.closed


async def both_ways(
    service: TrayService, http: httpx.AsyncClient, request: tuple[str, list[tuple[str, str]], bytes]
) -> list[tuple[int, Any, tuple[bool, bool]]]:
    """The request's answer and its session's state with the lane on, then off."""
    target, headers, body = request
    answers = []
    real_ticket = service.express.ticket
    try:
        for lane in (True, False):
            service.express.ticket = real_ticket if lane else (lambda url, raw: None)  # type: ignore[method-assign]
            session = await open_session(service, http)
            status, reply = await send_raw(service, target, headers, body, session)
            answers.append((status, _comparable(reply), session_state(service, session)))
    finally:
        service.express.ticket = real_ticket  # type: ignore[method-assign]
    return answers


@pytest.mark.timeout(300)
@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
async def test_every_request_is_answered_the_same_with_the_lane_on_and_off(
    echo: tuple[TrayService, httpx.AsyncClient],
    request: tuple[str, list[tuple[str, str]], bytes],
) -> None:
    lane, full = await both_ways(*echo, request)
    assert lane == full, request


def single_changes() -> Iterator[tuple[str, list[tuple[str, str]], bytes]]:
    """The plain call with exactly one of its parts changed, for every change there is."""
    plain_body = json.dumps(call(2)).encode()
    for name, variants in VARIANTS.items():
        for value in variants:
            headers = [(k, v) for k, v in PLAIN.items() if k != name]
            if value == TWICE:
                headers += [(name, PLAIN[name])] * 2
            elif value != ABSENT:
                headers.append((name, value))
            yield "/mcp/echo", headers, plain_body
    for target in TARGETS_LIST:
        yield target, list(PLAIN.items()), plain_body
    for body in BODY_LIST:
        yield "/mcp/echo", list(PLAIN.items()), body


@pytest.mark.timeout(300)
async def test_each_single_change_of_a_plain_call_is_answered_the_same_both_ways(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    """Hypothesis explores combinations; every edge of its own is tried here, each once."""
    differing = []
    for request in single_changes():
        lane, full = await both_ways(*echo, request)
        if lane != full:
            differing.append((request, lane, full))
    assert differing == []


def _comparable(reply: bytes) -> Any:
    """A body as JSON where it is JSON, an SSE stream as its messages, else its bytes."""
    text = reply.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        pass
    events = re.findall(r"^data: (.*)$", text, flags=re.MULTILINE)
    return [json.loads(event) for event in events] if events else reply


async def test_the_generated_requests_reach_the_lane_too(
    echo: tuple[TrayService, httpx.AsyncClient], full_path: list[str]
) -> None:
    """The property above is no vacuous truth: the plainest generated request takes the lane."""
    service, http = echo
    session = await open_session(service, http)
    full_path.clear()
    headers = list(PLAIN.items())
    status, reply = await send_raw(
        service, "/mcp/echo", headers, json.dumps(call(3)).encode(), session
    )
    assert status == 200
    assert json.loads(reply)["result"]["content"][0]["text"] == "same"
    assert full_path == []


async def test_a_uvicorn_without_the_lanes_hook_serves_every_call_the_full_way(
    services: Services, monkeypatch: pytest.MonkeyPatch, full_path: list[str]
) -> None:
    """uvicorn releases before 0.45 lack the hook: the lane stays off instead of failing."""
    # What the check reads stands for an older uvicorn's protocol (uvicorn's own, which
    # itself uses the hook in these releases, stays as it is).
    monkeypatch.setattr(http_guard, "HttpToolsProtocol", type("HttpToolsProtocol", (), {}))
    lane_hook_missing.cache_clear()
    try:
        assert "_start_asgi_task" in (lane_hook_missing() or "")
        service = await services.start({"echo": python_server(ECHO)})
        await wait_ready(service.supervisor.server("echo"))
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(service, http)
            full_path.clear()
            status, reply = await send_raw(
                service, "/mcp/echo", list(PLAIN.items()), json.dumps(call(3)).encode(), session
            )
        assert status == 200
        assert json.loads(reply)["result"]["content"][0]["text"] == "same"
        assert full_path == ["/mcp/echo"]
    finally:
        lane_hook_missing.cache_clear()
