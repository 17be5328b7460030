"""The gateway's HTTP, as the streamable HTTP transport (2025-03-26 to 2025-11-25) says.

Strategy: a real tray serving a real echo child, driven by a plain HTTP
client (httpx) so every status, header and byte is the test's to see; and
the real stdio bridge (``mcp-tray connect``) as a subprocess fed pipelined
lines, the way a client writes them without waiting for answers. The
gateway's own dispatch of its paths is held to Starlette's routes for them,
and the joined write of a response's head and body to a transport that
records its writes.
"""

import asyncio
import json
import sys
from typing import Any

import httpx
import pytest
from starlette.routing import Match, Route

from core.protocol.headers import PROTOCOL_HEADER
from core.serving.http.api import gateway_server
from core.serving.http.http_guard import HeadWithBody
from core.serving.service import TrayService
from core.settings.config import load_config
from tests.conftest import ECHO, FAST_TIMING, python_server, wait_until
from tests.support.gateway_support import (
    BOTH,
    REPO,
    Raw,
    Services,
    bridge_env,
    call,
    events,
    initialize,
)


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


@pytest.mark.parametrize(
    "path",
    [
        "/mcp/echo",
        "/echo/mcp",
        "/mcp/mcp",
        "/mcp/x/mcp",
        "/a/b/mcp",
        "/mcp",
        "//mcp",
        "/mcp/",
        "/mcp//",
        "/mcp/echo/",
        "/mcp/a%2Fb",
        "/mcp/echo.v2-x_y",
        "/mcp/@coding",
        "/@coding/mcp",
        "/api/v1/status",
        "/metrics",
        "/",
    ],
)
def test_the_gateway_s_own_dispatch_names_the_server_starlette_s_routes_would(path: str) -> None:
    # An ASGI app, as the gateway is (a plain function would be a GET endpoint).
    # The service's gateway routes, in its order: /mcp itself is every server ("").
    routes = [
        Route("/mcp", _NeverCalled()),
        Route("/mcp/{server}", _NeverCalled()),
        Route("/{server}/mcp", _NeverCalled()),
    ]
    scope = {"type": "http", "path": path, "root_path": "", "method": "POST"}
    matched = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            matched = child["path_params"].get("server", "")
            break

    assert gateway_server(path) == matched


class _NeverCalled:
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("routes are only matched here")


async def test_a_forwarded_for_header_does_not_rename_the_peer_the_tray_trusts(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo
    guard = service.connections
    assert guard is not None

    reply = await http.get(
        f"{service.url}/api/v1/status",
        headers={"authorization": f"Bearer {service.token}", "x-forwarded-for": "10.9.8.7"},
    )

    assert reply.status_code == 200
    assert guard.trusted and all(host == "127.0.0.1" for host, _ in guard.trusted)


class RecordedWrites:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True


SIZED_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"


def test_a_sized_response_leaves_in_one_write_and_a_streamed_head_at_once() -> None:
    recorded = RecordedWrites()
    writes = HeadWithBody(recorded)  # type: ignore[arg-type]

    writes.write(SIZED_HEAD)
    writes.write(b"{}")
    streamed = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    writes.write(streamed)

    assert recorded.writes == [SIZED_HEAD + b"{}", streamed]


def test_a_held_head_leaves_when_released_or_closed_and_never_after_its_body() -> None:
    recorded = RecordedWrites()
    writes = HeadWithBody(recorded)  # type: ignore[arg-type]

    writes.write(SIZED_HEAD)
    writes.release()  # a HEAD request's response: no body comes
    writes.write(SIZED_HEAD)
    writes.close()

    assert recorded.writes == [SIZED_HEAD, SIZED_HEAD] and recorded.closed


async def test_a_head_request_gets_its_head(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo

    reply = await http.head(
        f"{service.url}/api/v1/status", headers={"authorization": f"Bearer {service.token}"}
    )
    again = await http.get(
        f"{service.url}/api/v1/status", headers={"authorization": f"Bearer {service.token}"}
    )

    assert reply.status_code == 200 and int(reply.headers["content-length"]) > 0
    assert again.status_code == 200 and again.json()["servers"]


class Bridge:
    """``mcp-tray connect echo`` as a subprocess, written to and read from as raw lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout

    @classmethod
    async def start(cls, service: TrayService) -> "Bridge":
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "core.cli.main",
            "connect",
            "echo",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=bridge_env(service.paths),
            cwd=str(REPO),
            limit=16 * 1024 * 1024,
        )
        return cls(process)

    async def write(self, *lines: Any) -> None:
        self.stdin.write(
            b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)
        )
        await self.stdin.drain()

    async def read(self, timeout: float = 30) -> Any:
        line = await asyncio.wait_for(self.stdout.readline(), timeout)
        assert line, "the bridge closed its stdout"
        return json.loads(line)

    async def close(self) -> list[Any]:
        """Close its stdin; what it still wrote before it exited (0, checked)."""
        self.stdin.close()
        rest = await asyncio.wait_for(self.stdout.read(), 30)
        assert await asyncio.wait_for(self.process.wait(), 30) == 0
        return [json.loads(line) for line in rest.splitlines()]


async def test_the_bridge_answers_a_ping_pipelined_before_the_initialize_reply(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    bridge = await Bridge.start(echo[0])
    await bridge.write(
        initialize(),
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(3, "echo", {"text": "third"}),
        {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"},
    )
    answers: dict[Any, dict[str, Any]] = {}
    while len(answers) < 4:
        message = await bridge.read()
        answers[message.get("id")] = message
    assert await bridge.close() == []

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


# ------------------------------------------- bad lines through the real bridge


def bad_lines(version: str) -> list[tuple[bytes, Any, int | None, str]]:
    """Lines that are not one well-formed request, and the answer each must get at once:
    (line, its id, its error code or None for a batch's answers, words of the answer)."""
    batch = json.dumps([{"jsonrpc": "2.0", "id": f"b{n}", "method": "ping"} for n in (1, 2)])
    too_large = json.dumps(call(0, "echo", {"text": "x" * (4 * 1024 * 1024)})).replace(
        '"id": 0', '"id": "big"'
    )
    if version == "2025-03-26":
        batches = [
            (b"[]", None, -32600, "an empty JSON-RPC batch"),
            (batch.encode(), None, None, "b1 b2"),
        ]
    else:
        no_batches = f"JSON-RPC batches are not part of MCP {version}"
        batches = [(b"[]", None, -32600, no_batches), (batch.encode(), None, -32600, no_batches)]
    return [
        *batches,
        (b"null", None, -32600, "not a JSON-RPC 2.0 message"),
        (b"42", None, -32600, "not a JSON-RPC 2.0 message"),
        (b'"x"', None, -32600, "not a JSON-RPC 2.0 message"),
        (b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}', None, -32600, "an id must be"),
        (b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}', None, -32600, "an id must be"),
        (b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', None, -32700, "NaN is not JSON"),
        (too_large.encode(), "big", -32600, "Payload Too Large"),
    ]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
async def test_the_bridge_answers_every_bad_line_at_once_and_the_next_request_is_not_delayed(
    echo: tuple[TrayService, httpx.AsyncClient], version: str
) -> None:
    bridge = await Bridge.start(echo[0])
    await bridge.write(initialize(version))
    assert (await bridge.read())["result"]["protocolVersion"] == version
    await bridge.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for n, (line, request_id, code, words) in enumerate(bad_lines(version)):
        quiet = {"jsonrpc": "2.0", "method": "notifications/quiet"}  # answered by nobody
        await bridge.write(line, quiet, {"jsonrpc": "2.0", "id": n, "method": "ping"})
        # Both answers well within the 10 s a numbered message waits for a missing one.
        answers = [await bridge.read(timeout=5), await bridge.read(timeout=5)]
        assert {"jsonrpc": "2.0", "id": n, "result": {}} in answers, (line[:60], answers)
        answer = next(a for a in answers if a != {"jsonrpc": "2.0", "id": n, "result": {}})
        if code is None:  # a 2025-03-26 batch: its answers, in one line
            assert sorted(a["id"] for a in answer) == words.split()
            assert all(a["result"] == {} for a in answer)
            continue
        assert answer["id"] == request_id, (line[:60], answer)
        assert answer["error"]["code"] == code, (line[:60], answer)
        assert words in answer["error"]["message"], (line[:60], answer)
    assert await bridge.close() == []  # a notification is never answered, not even late


# ------------------------------------------------------------ gateway details


async def test_an_id_json_cannot_carry_is_refused_with_id_null_in_valid_json(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    for request_id, code in [
        (b"NaN", -32700),
        (b"Infinity", -32700),
        (b"-Infinity", -32700),
        (b"1e400", -32600),  # JSON, but Python reads it as infinity
    ]:
        reply = await raw.post(b'{"jsonrpc": "2.0", "id": %s, "method": "ping"}' % request_id)

        assert reply.status_code == 400, request_id
        strict = json.loads(reply.content, parse_constant=lambda name: pytest.fail(name))
        assert strict["id"] is None and strict["error"]["code"] == code, request_id


async def raw_http(service: TrayService, head: str) -> tuple[int, str]:
    """One request written by hand (what httpx would never send); its status and body."""
    port = int(service.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = json.dumps(initialize()).encode()
        writer.write(
            head.replace("\n", "\r\n").encode()
            + f"authorization: Bearer {service.token}\r\n".encode()
            + f"content-type: application/json\r\naccept: {BOTH}\r\n".encode()
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        reply = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    status_line, _, rest = reply.decode().partition("\r\n")
    return int(status_line.split()[1]), rest.partition("\r\n\r\n")[2]


async def test_two_host_headers_are_refused_whichever_comes_first(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service = echo[0]
    loopback = service.url.removeprefix("http://")
    for hosts in (["evil.example", loopback], [loopback, "evil.example"]):
        head = "POST /mcp/echo HTTP/1.1\n" + "".join(f"host: {h}\n" for h in hosts)

        status, body = await raw_http(service, head)

        assert status == 400, hosts
        assert "more than one Host header" in body


async def test_an_absolute_form_target_is_judged_by_the_host_it_names(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service = echo[0]
    loopback = service.url.removeprefix("http://")

    hostile = await raw_http(
        service, f"POST http://evil.example/mcp/echo HTTP/1.1\nhost: {loopback}\n"
    )
    sneaky = await raw_http(
        service, f"POST http://{loopback}@evil.example/mcp/echo HTTP/1.1\nhost: {loopback}\n"
    )
    ours = await raw_http(service, f"POST {service.url}/mcp/echo HTTP/1.1\nhost: evil.example\n")

    assert hostile[0] == 403 and "Host header is not a loopback address" in hostile[1]
    assert sneaky[0] == 403
    assert ours[0] == 200 and json.loads(ours[1])["result"]["serverInfo"]


async def test_a_bad_protocol_version_on_a_handshake_session_gets_the_handshake_era_error(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()

    reply = await raw.post(
        {"jsonrpc": "2.0", "id": 2, "method": "ping"}, **{PROTOCOL_HEADER: "2099-01-01"}
    )

    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == -32600  # not the stateless era's -32022
    assert "unsupported MCP-Protocol-Version '2099-01-01'" in error["message"]
    assert "2025-06-18" in error["message"]


# ------------------------------------------------------------ large results


async def test_a_result_of_several_mebibytes_arrives_whole_over_http_and_through_the_bridge(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    size = 3 * 1024 * 1024  # a dozen slices once JSON escapes its quotes and newlines
    raw = Raw(echo[1], echo[0], "/mcp/echo")
    await raw.open()
    bridge = await Bridge.start(echo[0])
    await bridge.write(initialize(), {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert "result" in await bridge.read()

    reply = await raw.post(call(2, "blob", {"size": size}))
    await bridge.write(call(3, "blob", {"size": size}))
    relayed = await bridge.read()

    assert int(reply.headers["content-length"]) == len(reply.content)
    over_http = reply.json()["result"]["content"][0]["text"]
    assert len(over_http) == size and over_http.startswith('{"row": ')
    assert relayed["result"]["content"][0]["text"] == over_http
    assert await bridge.close() == []
