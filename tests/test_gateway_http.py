"""The gateway's HTTP, as the streamable HTTP transport (2025-03-26 to 2025-11-25) says.

Strategy: a real tray serving a real echo child, driven by a plain HTTP
client (httpx) so every status, header and byte is the test's to see; and
the real stdio bridge (``mcp-tray connect``) as a subprocess fed pipelined
lines, the way a client writes them without waiting for answers.
"""

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from core.protocol.headers import SESSION_HEADER
from core.serving.service import TrayService
from core.settings.config import load_config
from tests.conftest import ECHO, FAST_TIMING, python_server, wait_ready, wait_until
from tests.gateway_support import REPO, Services, bridge_env

BOTH = "application/json, text/event-stream"


def initialize(version: str = "2025-06-18", request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


def call(request_id: int, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class Raw:
    """A hand-held HTTP client for one gateway endpoint."""

    def __init__(self, http: httpx.AsyncClient, service: TrayService, path: str) -> None:
        self.http = http
        self.url = f"{service.url}{path}"
        self.token = service.token
        self.session: str | None = None

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "accept": BOTH,
        }
        if self.session:
            headers[SESSION_HEADER] = self.session
        headers.update(extra)
        return headers

    async def post(self, body: Any, **headers: str) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.http.post(self.url, content=content, headers=self.headers(**headers))

    async def open(self, version: str = "2025-06-18") -> None:
        reply = await self.post(initialize(version))
        assert reply.status_code == 200, reply.text
        self.session = reply.headers[SESSION_HEADER]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, in order."""
    return [
        json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")
    ]


@pytest.fixture
async def echo(services: Services) -> AsyncIterator[tuple[TrayService, httpx.AsyncClient]]:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    async with httpx.AsyncClient(timeout=30) as http:
        yield service, http


async def test_a_post_that_does_not_accept_both_json_and_sse_is_406(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    for accept in ("application/json", "text/event-stream", "text/html"):
        reply = await raw.post(initialize(), accept=accept)
        assert reply.status_code == 406, accept
        assert "Not Acceptable" in reply.json()["error"]["message"]
    assert (await raw.post(initialize(), accept="*/*")).status_code == 200


async def test_a_body_that_is_not_json_by_its_content_type_is_415(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    reply = await raw.post(initialize(), **{"content-type": "text/plain"})
    assert reply.status_code == 415
    assert "Unsupported Media Type" in reply.json()["error"]["message"]
    ok = await raw.post(initialize(), **{"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200


async def test_a_body_over_the_configured_limit_is_413(services: Services) -> None:
    services.paths.config_file.write_text(
        json.dumps(
            {
                "mcpServers": {"echo": python_server(ECHO)},
                "gateway": {"port": 0, "max_body_bytes": 2048},
            }
        )
    )
    service = TrayService(
        load_config(services.paths.config_file), services.paths, timing=FAST_TIMING
    )
    services.started.append(service)
    await service.start()
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(http, service, "/mcp/echo")
        await raw.open()
        big = await raw.post(call(2, "echo", {"text": "x" * 4096}))
        small = await raw.post(call(3, "echo", {"text": "x" * 100}))
    assert big.status_code == 413
    assert "max_body_bytes" in big.json()["error"]["message"]
    assert small.status_code == 200


async def test_a_batch_is_answered_in_a_2025_03_26_session_and_refused_in_later_ones(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo
    old = Raw(http, service, "/mcp/echo")
    await old.open("2025-03-26")
    batch = [call(2, "echo", {"text": "one"}), {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    reply = await old.post(batch)
    assert reply.status_code == 200
    answers = {item["id"]: item for item in reply.json()}
    assert answers[2]["result"]["content"][0]["text"] == "one"
    assert answers[3]["result"] == {}

    new = Raw(http, service, "/mcp/echo")
    await new.open("2025-06-18")
    refused = await new.post(batch)
    assert refused.status_code == 400
    assert "batches are not part of MCP 2025-06-18" in refused.json()["error"]["message"]


async def test_a_second_initialize_in_a_session_is_refused_with_its_id(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    reply = await raw.post(initialize(request_id=9))
    assert reply.status_code == 400
    assert reply.json()["id"] == 9
    assert "already initialized" in reply.json()["error"]["message"]


async def test_a_cancelled_request_is_not_answered(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    slow = asyncio.ensure_future(raw.post(call(5, "slow_read", {"seconds": 30})))
    server = echo[0].supervisor.server("echo")
    await wait_until(server.routing.sessions_in_flight, what="the call in flight")
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    assert (await raw.post(cancel)).status_code == 202
    reply = await asyncio.wait_for(slow, 10)
    assert reply.status_code == 200
    assert events(reply.text) == []  # the stream ends without an answer


async def test_progress_and_logs_of_a_call_travel_on_its_own_stream_as_sent(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    reply = await raw.post(call(2, "count", {"steps": 2}, progressToken="tok"))
    assert reply.headers["content-type"].startswith("text/event-stream")
    sent = events(reply.text)
    progress = [m["params"] for m in sent if m.get("method") == "notifications/progress"]
    assert progress == [
        {"progressToken": "tok", "progress": 1, "total": 2, "message": "step 1"},
        {"progressToken": "tok", "progress": 2, "total": 2, "message": "step 2"},
    ]
    # Byte-faithful: an integer the server sent stays an integer.
    assert '"progress":1,' in reply.text
    assert sent[-1]["id"] == 2 and sent[-1]["result"]["content"][0]["text"] == "counted 2"


async def test_the_inspector_s_url_shape_reaches_the_same_server(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/echo/mcp")
    await raw.open()
    reply = await raw.post(call(2, "echo", {"text": "via /echo/mcp"}))
    assert reply.json()["result"]["content"][0]["text"] == "via /echo/mcp"


async def test_the_bridge_answers_a_ping_pipelined_before_the_initialize_reply(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service = echo[0]
    bridge = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        "connect",
        "echo",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=bridge_env(service.paths),
        cwd=str(REPO),
    )
    assert bridge.stdin is not None and bridge.stdout is not None
    lines = [
        initialize(),
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(3, "echo", {"text": "third"}),
        {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"},
    ]
    bridge.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    await bridge.stdin.drain()
    answers: dict[Any, dict[str, Any]] = {}
    while len(answers) < 4:
        line = await asyncio.wait_for(bridge.stdout.readline(), 30)
        assert line, "the bridge closed its stdout"
        message = json.loads(line)
        answers[message.get("id")] = message
    bridge.stdin.close()
    assert await asyncio.wait_for(bridge.wait(), 30) == 0

    assert set(answers) == {1, 2, 3, 4}  # every answer carries its own id
    assert answers[2]["result"] == {}
    assert answers[3]["result"]["content"][0]["text"] == "third"
    assert answers[4]["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"[" * 100_000 + b"]" * 100_000, -32700),
        (b'{"a":' * 500 + b"1" + b"}" * 500, -32600),
        (json.dumps(call(2, "echo", {"text": [[[[[[[[[[[["x"]]]]]]]]]]]] * 1})).encode(), None),
    ],
    ids=["past-the-parser", "just-under-the-parser", "ordinary-nesting"],
)
async def test_deep_nesting_is_a_json_rpc_error_with_400_never_a_500(
    echo: tuple[TrayService, httpx.AsyncClient], body: bytes, code: int | None
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    reply = await raw.post(body)
    if code is None:
        assert reply.status_code == 200  # an ordinary tool's arguments nest a little
        return
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == code
    assert "nested deeper than 128 levels" in reply.json()["error"]["message"]


async def test_a_lone_surrogate_is_refused_not_passed_to_a_server_that_would_drop_it(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    # Legal JSON, not Unicode: the SDK's servers never answer such a request.
    body = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call",'
        b'"params":{"name":"echo","arguments":{"text":"a\\ud800b"}}}'
    )

    reply = await raw.post(body)

    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == -32600
    assert "lone UTF-16 surrogate" in reply.json()["error"]["message"]
    # A surrogate pair is fine: it is one character.
    paired = await raw.post(body.replace(b"\\ud800", b"\\ud83d\\ude00"))
    assert paired.status_code == 200
    assert "a\U0001f600b" in paired.text or "a\\ud83d\\ude00b" in paired.text


async def test_the_control_api_answers_hostile_call_bodies_with_400(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo
    url = f"{service.url}/api/v1/servers/echo/call"
    auth = {"authorization": f"Bearer {service.token}"}
    hostile = [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"tool": "echo", "arguments": ' + b'{"a":' * 500 + b"1" + b"}" * 500 + b"}",
        b'{"tool": "echo", "arguments": {"text": "x"}, "timeout": NaN}',
        b'{"tool": "echo", "arguments": {"text": "x"}, "timeout": true}',
        b'{"tool": "echo", "arguments": {"text": "x"}, "timeout": 1e308}',
        b'{"tool": "echo", "arguments": {"text": "x"}, "timeout": 5e-130}',
        b"\xff\xfe not json",
    ]
    for body in hostile:
        reply = await http.post(url, content=body, headers=auth)
        assert reply.status_code == 400, (body[:60], reply.text)
        assert reply.json()["kind"] == "bad-request"
    too_big = await http.post(url, content=b" " * (5 * 1024 * 1024), headers=auth)
    assert too_big.status_code == 413
