"""Both eras of MCP on both sides of the gateway, in all four combinations.

Strategy: one real tray serves three real entries: ``modern`` (tests/servers/
echo.py, built with the SDK 2.3 server, which answers ``server/discover``, so
mcp-tray drives it in the 2026-07-28 era), ``pinned`` (the same server with
``"protocol": "2026-07-28"``) and ``old`` (tests/servers/legacy_2024.py,
hand-written, initialize only). Real SDK 2.3 clients reach them in
``mode="auto"`` (the client probes and speaks 2026-07-28 to the gateway) and
``mode="legacy"`` (initialize), over HTTP and through the real stdio bridge.
``pinned`` runs in a tray of its own.

A legacy client that may be asked things (it declared sampling or
elicitation) of the ``"auto"`` entry gets a second child of it, driven in the
handshake era (``modern@handshake``): a child's era is settled by its first
request. Everywhere else sampling and elicitation cross eras by translation,
both ways: a legacy child's mid-call request becomes an ``input_required``
result for a modern client, and a pinned 2026-07-28 child's
``input_required`` becomes mid-call requests for a legacy client.
"""

import contextlib
import json
import sys
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CreateMessageResult, InputRequiredResult, TextContent

from core.serving.service import TrayService
from tests.conftest import ECHO, SERVERS, kill_hard, python_server, wait_ready
from tests.support.gateway_support import (
    Services,
    elicitation,
    sampling,
    sdk_bridge,
    sdk_client,
    text,
)

LEGACY = SERVERS / "legacy_2024.py"
MODERN_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

# The SDK warns that sampling and elicitation are deprecated at 2026-07-28:
# these tests are about exactly that crossing.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture
async def tray(services: Services) -> TrayService:
    service = await services.start({"modern": python_server(ECHO), "old": python_server(LEGACY)})
    for name in ("modern", "old"):
        await wait_ready(service.supervisor.server(name))
    return service


CALLBACKS: dict[str, Any] = {"sampling_callback": sampling, "elicitation_callback": elicitation}


def http(
    service: TrayService, server: str, mode: str
) -> contextlib.AbstractAsyncContextManager[Client]:
    return sdk_client(service, server, mode, **CALLBACKS)


def bridged(
    service: TrayService, server: str, mode: str
) -> contextlib.AbstractAsyncContextManager[Client]:
    return sdk_bridge(service.paths, server, mode, **CALLBACKS)


def era(session: Client) -> str:
    return str(session.session.protocol_version)


@pytest.mark.parametrize("server", ["modern", "old"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_lists_calls_resources_and_prompts_work_in_all_four_combinations(
    tray: TrayService, server: str, mode: str
) -> None:
    tool, answer = ("echo", "hi") if server == "modern" else ("hello", "hello from 2024-11-05")
    uri, prompt = ("note://hello", "greet") if server == "modern" else ("note://old", "old_prompt")
    async with http(tray, server, mode) as session:
        legacy = "2025-11-25" if server == "modern" else "2024-11-05"  # what both speak
        assert era(session) == ("2026-07-28" if mode == "auto" else legacy)
        names = [t.name for t in (await session.list_tools()).tools]
        arguments = {"text": "hi"} if server == "modern" else {}
        called = await session.call_tool(tool, arguments)
        resources = [str(r.uri) for r in (await session.list_resources()).resources]
        read = await session.read_resource(uri)
        prompts = [p.name for p in (await session.list_prompts()).prompts]
        got = await session.get_prompt(prompt, {"name": "x"} if server == "modern" else None)

    assert tool in names
    assert text(called) == answer
    assert uri in resources
    assert read.contents[0].text  # type: ignore[union-attr]
    assert prompt in prompts
    assert got.messages


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("server", ["modern", "old"])
async def test_sampling_and_elicitation_cross_eras_both_ways(
    tray: TrayService, server: str, mode: str
) -> None:
    async with http(tray, server, mode) as session:
        sampled = await session.call_tool("ask", {"question": "capital?"})
        confirmed = await session.call_tool("confirm", {"question": "sure?"})

    assert "model says capital?" in text(sampled)
    if (server, mode) == ("old", "legacy"):
        # Both speak 2024-11-05, which has no elicitation: the client says so.
        assert text(confirmed) == "the client refused: Method not found"
    else:
        assert text(confirmed) in ("confirmed", 'accept: {"ok": true}')
    # Only the "auto" entry grows a child in the legacy client's era; the rest translate.
    twins = ["modern@handshake"] if (server, mode) == ("modern", "legacy") else []
    assert list(tray.supervisor.private) == twins


async def test_a_pinned_2026_07_28_childs_input_required_reaches_a_legacy_client_mid_call(
    services: Services,
) -> None:
    service = await services.start({"pinned": python_server(ECHO) | {"protocol": "2026-07-28"}})
    await wait_ready(service.supervisor.server("pinned"))
    async with http(service, "pinned", "legacy") as session:
        sampled = await session.call_tool("ask", {"question": "capital?"})
        confirmed = await session.call_tool("confirm", {"question": "sure?"})

    assert "model says capital?" in text(sampled)
    assert text(confirmed) == "confirmed"
    assert service.supervisor.private == {}  # translated, not a child of its own


async def test_a_legacy_client_that_cannot_be_asked_shares_the_2026_07_28_child(
    tray: TrayService,
) -> None:
    async with sdk_client(tray, "modern", "legacy") as session:
        assert era(session) == "2025-11-25"
        echoed = await session.call_tool("echo", {"text": "plain"})

    assert text(echoed) == "plain"
    assert tray.supervisor.private == {}


async def test_a_modern_client_through_the_bridge(tray: TrayService) -> None:
    async with bridged(tray, "old", "auto") as session:
        assert era(session) == "2026-07-28"
        hello = await session.call_tool("hello", {})
        sampled = await session.call_tool("ask", {"question": "via the bridge?"})
    async with bridged(tray, "modern", "auto") as session:
        echoed = await session.call_tool("echo", {"text": "bridged"})

    assert text(hello) == "hello from 2024-11-05"
    assert "model says via the bridge?" in text(sampled)
    assert text(echoed) == "bridged"


async def test_kill_9_between_two_calls_of_a_modern_client_is_answered_with_one_respawn(
    tray: TrayService,
) -> None:
    server = tray.supervisor.server("modern")
    async with http(tray, "modern", "auto") as session:
        first = await session.call_tool("whoami", {})
        pid = server.pid
        assert pid is not None
        await kill_hard(pid)
        second = await session.call_tool("whoami", {})

    assert int(text(first)) == pid
    assert int(text(second)) not in (pid, 0)
    assert server.respawn_requests == 1
    assert server.generation == 2


async def test_an_unsupported_version_is_answered_with_the_supported_ones(
    tray: TrayService,
) -> None:
    envelope = {**MODERN_ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": envelope}}
    async with httpx.AsyncClient() as client:
        reply = await client.post(
            f"{tray.url}/mcp/modern",
            content=json.dumps(body),
            headers={
                "authorization": f"Bearer {tray.token}",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2099-01-01",
                "mcp-method": "tools/list",
            },
        )

    assert reply.status_code == 400
    error = reply.json()["error"]
    assert reply.json()["id"] == 7
    assert error["code"] == -32022
    # What this era serves per request; the handshake ones go through initialize.
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}


async def test_discover_through_the_gateway_is_the_childs_own(tray: TrayService) -> None:
    async with Client(
        StdioServerParameters(command=sys.executable, args=[str(ECHO)]), mode="auto", cache=None
    ) as direct:
        own = direct.session
        own_caps = own.server_capabilities
        own_info = own.server_info
    async with http(tray, "modern", "auto") as through:
        theirs = through.session

        assert theirs.server_capabilities == own_caps
        assert theirs.server_info == own_info


async def test_status_and_metrics_say_which_era_each_child_speaks(tray: TrayService) -> None:
    snapshot = tray.supervisor.snapshot()
    assert snapshot.server("modern").protocol == "2026-07-28"
    assert snapshot.server("old").protocol == "2024-11-05"
    assert tray.metrics().decode().count("mcp_tray_server_protocol{") == 2


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "initialize"])
async def test_a_method_2026_07_28_removed_is_not_found(tray: TrayService, method: str) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": MODERN_ENVELOPE}}
    async with httpx.AsyncClient() as client:
        reply = await client.post(
            f"{tray.url}/mcp/modern",
            content=json.dumps(body),
            headers={
                "authorization": f"Bearer {tray.token}",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": method,
            },
        )
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == -32601


async def test_a_parked_call_whose_child_died_is_answered_honestly_on_retry(
    tray: TrayService,
) -> None:
    old = tray.supervisor.server("old")
    async with http(tray, "old", "auto") as client:
        session = client.session
        asked = await session.call_tool("ask", {"question": "then?"}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        pid = old.pid
        assert pid is not None
        await kill_hard(pid)
        answers = {
            key: CreateMessageResult(
                role="assistant", content=TextContent(type="text", text="late"), model="m"
            )
            for key in asked.input_requests or {}
        }
        retried = await session.call_tool(
            "ask",
            {"question": "then?"},
            input_responses=answers,  # type: ignore[arg-type]
            request_state=asked.request_state,
        )

    # The call died with its child, and the client is told so, not sent a guess.
    assert retried.is_error
    assert "exited mid-call" in text(retried)


async def test_a_stateless_clients_session_trips_after_three_failures_in_a_row(
    services: Services,
) -> None:
    # A server that can never start parks at once: each call fails non-retryably.
    # (One that crashes at start opens its server breaker instead, which holds
    # that incident: sessions do not count it.)
    service = await services.start({"bad": {"command": "/nonexistent/mcp-server"}})
    bad = service.supervisor.server("bad")
    async with http(service, "bad", "2026-07-28") as client:
        for _ in range(3):
            failed = await client.call_tool("anything", {})
            assert failed.is_error
        fourth = await client.call_tool("anything", {})
        generation = bad.generation
        fifth = await client.call_tool("anything", {})

    assert "⚠️ This session has failed 3 times in a row" in text(fourth)
    assert "⚠️" in text(fifth) and bad.generation == generation  # nothing spawned for it
    (session,) = [s for s in service.sessions.all() if s.server == "bad"]
    assert session.tripped
