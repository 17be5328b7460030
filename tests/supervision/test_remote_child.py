"""A remote server's session with a child's face (core.supervision.remote), against the SDK's
own streamable-HTTP server in a process of its own, on a loopback socket the test binds.

The transport alone (issue 31's first piece): config entries, the supervisor's
choice of it, states and sign-in come next.
"""

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from core.supervision.remote import HTTP_REFUSED_CODE, RemoteChild
from core.supervision.remote_sse import LegacySseChild
from tests.support.bridge_lines import hello
from tests.support.remote_server import Remote

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="the server is handed its listening socket as an inherited fd"
)


@pytest.fixture
async def child(remote: Remote) -> AsyncIterator[RemoteChild]:
    opened = RemoteChild(remote.url, {"x-test": "yes"})
    yield opened
    await opened.stop()


async def send(child: RemoteChild, message: dict[str, Any]) -> None:
    await child.write(json.dumps(message).encode() + b"\n")


async def answer(child: RemoteChild, timeout: float = 20) -> dict[str, Any]:
    line = await asyncio.wait_for(child.stdout.readline(), timeout)
    assert line, f"stdout ended: {child.end_text}"
    message: dict[str, Any] = json.loads(line)
    return message


def echo_call(request_id: int, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }


async def handshake(child: RemoteChild) -> dict[str, Any]:
    """Initialize and its answer, then the notification that ends the handshake."""
    await send(child, hello(1, "2025-11-25"))
    reply = await answer(child)
    await send(child, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return reply


async def call(child: RemoteChild, request_id: int, text: str) -> dict[str, Any]:
    await send(child, echo_call(request_id, text))
    return await answer(child)


async def up(remote: Remote) -> RemoteChild:
    """A child whose handshake was answered (the server process takes a moment to listen:
    the socket is bound, so connections wait in its backlog meanwhile)."""
    child = RemoteChild(remote.url)
    await handshake(child)
    return child


async def test_a_remote_answers_the_handshake_and_a_call_through_its_session(
    child: RemoteChild,
) -> None:
    reply = await handshake(child)

    assert reply["id"] == 1
    assert reply["result"]["serverInfo"]["name"] == "remote-echo"
    assert child.session_id  # the server named its session
    assert child.protocol_version == reply["result"]["protocolVersion"]
    result = await call(child, 2, "over http")
    assert result["id"] == 2
    assert result["result"]["content"][0]["text"] == "over http"
    assert child.is_alive()


async def test_calls_in_flight_together_each_get_their_own_answer(child: RemoteChild) -> None:
    await handshake(child)
    for n in range(2, 8):
        await send(child, echo_call(n, f"call {n}"))
    answers = [await answer(child) for _ in range(6)]

    assert {a["id"]: a["result"]["content"][0]["text"] for a in answers} == {
        n: f"call {n}" for n in range(2, 8)
    }


async def test_a_stopped_remote_ends_the_session_at_once_naming_what_failed(
    remote: Remote, child: RemoteChild
) -> None:
    await handshake(child)
    remote.stop()

    began = time.perf_counter()
    await send(
        child,
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo"}},
    )
    await asyncio.wait_for(child.exited, 10)

    assert time.perf_counter() - began < 5  # at once, never a call's timeout
    assert child.end_text is not None
    # Refused, or cut off in an exchange still open when it died (the handshake's
    # notification may be in flight yet): either way, unreachable and why.
    assert child.end_text.startswith(
        ("unreachable: could not connect", "unreachable: the server broke the HTTP exchange")
    ), child.end_text
    assert remote.url in child.end_text
    assert await child.stdout.readline() == b""  # what waits on it fails now
    with pytest.raises(BrokenPipeError):
        await send(child, {"jsonrpc": "2.0", "id": 10, "method": "ping"})


async def test_a_remote_started_again_is_reached_by_a_new_session(remote: Remote) -> None:
    first = await up(remote)
    remote.stop()
    await send(first, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    await asyncio.wait_for(first.exited, 10)
    await first.stop()

    remote.start()
    again = await up(remote)
    try:
        assert (await call(again, 2, "back"))["result"]["content"][0]["text"] == "back"
    finally:
        await again.stop()


async def test_a_forgotten_session_ends_the_run_and_a_refused_request_is_its_error(
    child: RemoteChild,
) -> None:
    await handshake(child)
    # A session id the server never gave: it answers 404, which ends this session.
    real = child.session_id
    child.session_id = "not-a-session"
    await send(child, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    await asyncio.wait_for(child.exited, 10)
    assert child.end_text is not None and "ended the session (HTTP 404" in child.end_text
    assert real != "not-a-session"


async def test_an_http_refusal_of_a_request_is_a_json_rpc_error_naming_the_status(
    remote: Remote,
) -> None:
    # No session yet and no initialize: the SDK refuses the request (400).
    child = RemoteChild(remote.url)
    try:
        await send(child, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        reply = await answer(child)
        assert reply["id"] == 5
        assert reply["error"]["code"] == HTTP_REFUSED_CODE
        assert "answered HTTP 400" in reply["error"]["message"]
        assert child.is_alive()  # a refusal is the request's, not the session's end
    finally:
        await child.stop()


async def test_an_sse_remote_naming_another_host_to_post_to_gets_nothing_sent_there() -> None:
    posted: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            body = b"event: endpoint\ndata: https://elsewhere.example/messages?s=1\n\n"
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        posted.append(str(request.url))
        return httpx2.Response(202)

    child = LegacySseChild(
        "https://remote.example/sse",
        {"X-Api-Key": "secret"},
        transport=httpx2.MockTransport(handler),
    )
    await send(child, hello(1, "2024-11-05"))
    await asyncio.wait_for(child.exited, 10)

    assert posted == []
    assert child.end_text is not None and "https://elsewhere.example" in child.end_text
    assert not child.unreachable  # a refusal of ours: it is not tried as if the network failed
    await child.stop()


@pytest.mark.parametrize("sse", [False, True])
async def test_a_401_asking_for_a_bearer_token_ends_the_session_as_needing_a_sign_in(
    sse: bool,
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        challenge = 'Bearer resource_metadata="https://remote.example/.well-known/x"'
        return httpx2.Response(401, headers={"www-authenticate": challenge})

    kind = LegacySseChild if sse else RemoteChild
    child = kind("https://remote.example/mcp", transport=httpx2.MockTransport(handler))
    await send(child, hello(1, "2025-11-25"))
    await asyncio.wait_for(child.exited, 10)

    assert child.needs_sign_in and not child.unreachable
    assert child.end_text is not None and child.end_text.startswith("needs sign-in: ")
    await child.stop()


async def test_with_an_api_key_of_its_own_a_401_is_the_request_refused_not_a_sign_in() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(401, headers={"www-authenticate": "Bearer"}, text="bad key")

    child = RemoteChild(
        "https://remote.example/mcp",
        {"Authorization": "Bearer wrong"},
        transport=httpx2.MockTransport(handler),
    )
    await send(child, hello(1, "2025-11-25"))
    refused = await answer(child)
    await child.stop()

    assert refused["error"]["code"] == HTTP_REFUSED_CODE
    assert "HTTP 401 Unauthorized: bad key" in refused["error"]["message"]
    assert not child.needs_sign_in
