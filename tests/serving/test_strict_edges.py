"""Strict edges of the gateway: one Authorization, a Host parsed as host and port, short echoes.

Strategy: a real tray serving a real echo child. Requests are written by hand
on a raw socket (httpx cannot send a header twice, nor a Host it did not
choose), each twice: to ``/mcp/echo``, which the express lane
(core.serving.http.express) would take, and to ``/mcp/echo?full``, which only
the full path takes; both must give the same status. A real SDK client
sees the aggregate's refusal of a 5,000-character tool name cut short,
as the 404s of an unknown server and profile are. The Host and Origin
rules themselves are also checked value by value.
"""

import asyncio
import json

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from core.base.errors import SHOWN_CHARS
from core.serving.http.api import host_is_loopback, origin_is_loopback
from core.serving.service import TrayService
from tests.support.gateway_support import Raw, call, sdk_client

#: Both ways in: the lane's candidate and a target only the full path takes.
TARGETS = ("/mcp/echo", "/mcp/echo?full")
REFUSED_HOSTS = (
    "[::1]x",
    "[::1].evil.com",
    "127.0.0.1:abc",
    "127.0.0.1:",
    "127.0.0.1:99999",
    "127.0.0.1.evil.com",
    "localhost.evil.com:80",
    "localhost:80:80",
    "::1",
    "127.0.0.1:\u00b2",
)
ACCEPTED_HOSTS = ("127.0.0.1", "127.0.0.1:28729", "localhost", "LOCALHOST:1", "[::1]", "[::1]:80")


async def status_of(service: TrayService, target: str, head: list[tuple[str, str]]) -> int:
    """The status of a POST of one echo call, written on its own connection with ``head``."""
    body = json.dumps(call(7, "echo", {"text": "edge"})).encode()
    lines = "".join(f"{name}: {value}\r\n" for name, value in head)
    request = (
        f"POST {target} HTTP/1.1\r\n{lines}content-length: {len(body)}\r\n\r\n"
    ).encode() + body
    host, port = service.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    finally:
        writer.close()
    return int(answer.split(b" ", 2)[1])


def head_of(raw: Raw, host: str = "127.0.0.1") -> list[tuple[str, str]]:
    return [("host", host), *raw.headers().items()]


async def test_two_authorization_headers_are_a_400_on_both_paths_whichever_comes_last(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo
    raw = Raw(http, service, "/mcp/echo")
    await raw.open()
    good = f"Bearer {service.token}"
    for target in TARGETS:
        assert await status_of(service, target, head_of(raw)) == 200, target
        for pair in ((good, "Bearer wrong"), ("Bearer wrong", good), (good, good)):
            head = [*head_of(raw), ("authorization", pair[1])]
            head[head.index(("authorization", good))] = ("authorization", pair[0])
            assert await status_of(service, target, head) == 400, (target, pair)


async def test_a_host_that_only_starts_like_loopback_is_refused_on_both_paths(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo
    raw = Raw(http, service, "/mcp/echo")
    await raw.open()
    for target in TARGETS:
        for host in REFUSED_HOSTS:
            assert await status_of(service, target, head_of(raw, host)) == 403, (target, host)
        for host in ACCEPTED_HOSTS:
            assert await status_of(service, target, head_of(raw, host)) == 200, (target, host)


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_the_host_rule_takes_only_an_exact_loopback_name_and_a_numeric_port(host: str) -> None:
    assert not host_is_loopback(host)
    assert not origin_is_loopback(f"http://{host}")


@pytest.mark.parametrize("host", ACCEPTED_HOSTS)
def test_a_loopback_host_with_or_without_a_port_passes_as_host_and_as_origin(host: str) -> None:
    assert host_is_loopback(host)
    assert origin_is_loopback(f"http://{host}") and origin_is_loopback(f"https://{host}")
    assert not origin_is_loopback(f"http://{host}/path")
    assert not origin_is_loopback(f"ftp://{host}")


async def test_a_404_for_a_very_long_server_name_cuts_the_name_and_says_its_length(
    echo: tuple[TrayService, httpx.AsyncClient],
) -> None:
    service, http = echo
    name = "n" * 5000
    headers = Raw(http, service, "/mcp/echo").headers()
    for path in (f"/mcp/{name}", f"/mcp/@{name}"):
        reply = await http.post(
            service.url + path, content=json.dumps(call(1, "echo", {})), headers=headers
        )
        assert reply.status_code == 404
        message = reply.json()["error"]["message"]
        assert "n" * SHOWN_CHARS in message and "n" * (SHOWN_CHARS + 1) not in message
        assert "(5,000 characters)" in message
        assert len(reply.content) < 600
    api = await http.post(
        f"{service.url}/api/v1/servers/{name}/respawn",
        headers={"authorization": f"Bearer {service.token}"},
    )
    assert api.status_code == 404 and len(api.content) < 600
    assert "(5,000 characters)" in api.json()["error"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_aggregate_refuses_a_very_long_tool_name_without_echoing_it_whole(
    echo: tuple[TrayService, httpx.AsyncClient], mode: str
) -> None:
    service, _ = echo
    name = "echo__" + "t" * 5000
    async with sdk_client(service, "@all", mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool(name, {})
        assert (await client.call_tool("echo__echo", {"text": "after"})).content
    message = refused.value.error.message
    assert "(5,006 characters)" in message and len(message) < 400
