"""Remote servers (``"url"`` entries) served like local ones: through /mcp/NAME, /mcp, a
profile and the bridge, with both client eras; down and back; their secret header kept out of
every record (issue 31). The remote is the SDK's own streamable-HTTP server in a process of
its own (tests/servers/remote_http.py), asking for an API key as a hosted service would."""

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from core.base.states import ServerState
from core.serving.service import TrayService
from core.settings.config import TrayConfig, load_config
from tests.conftest import ECHO, python_server, wait_ready, wait_state, wait_until
from tests.support.fake_keyring import FileKeyring
from tests.support.gateway_support import (
    Services,
    bridge_client,
    elicitation,
    http_client,
    journaled,
    sampling,
    sdk_bridge,
    sdk_client,
    text,
)
from tests.support.isolation_support import Seen
from tests.support.remote_server import Remote

pytestmark = [
    pytest.mark.skipif(
        sys.platform == "win32", reason="the remote is handed its listening socket as an fd"
    ),
    pytest.mark.timeout(120),
]

KEY = "sk-remote-0123456789abcdef"


@pytest.fixture
def keyed_remote() -> Iterator[Remote]:
    server = Remote(api_key=KEY)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def far(services: Services, keyed_remote: Remote, fake_keyring: FileKeyring) -> TrayService:
    fake_keyring.set_password("mcp-tray", "far-key", KEY)
    service = await services.start(
        {
            "far": {"url": keyed_remote.url, "headers": {"X-Api-Key": "${keyring:far-key}"}},
            "echo": python_server(ECHO),
        },
        profiles={"both": {"servers": ["far", "echo"]}},
    )
    await wait_ready(service.supervisor.server("far"))
    await wait_ready(service.supervisor.server("echo"))
    return service


async def test_a_remote_is_called_through_its_own_endpoint_in_both_eras(
    far: TrayService,
) -> None:
    async with http_client(far, "far") as session:
        listed = await session.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names == ["echo", "big", "ask", "confirm", "roots", "touch"]
        # Megabytes in one answer, as a file read brings: one line of the session, whole.
        assert len(text(await session.call_tool("big", {"size": 3_000_000}))) == 3_000_000
        assert text(await session.call_tool("echo", {"text": "far away"})) == "far away"
    async with sdk_client(far, "far") as client:  # the 2026-07-28 era to the gateway
        assert text(await client.call_tool("echo", {"text": "modern"})) == "modern"


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_remotes_own_sampling_and_elicitation_reach_the_client_that_called(
    far: TrayService,
) -> None:
    """The remote asks on its call's stream; the tray hands it to that client, in its era,
    and posts the answer back to the remote."""
    callbacks: dict[str, Any] = {"sampling_callback": sampling, "elicitation_callback": elicitation}
    async with http_client(far, "far", **callbacks) as session:
        assert text(await session.call_tool("ask", {"question": "42?"})) == "model says 42?"
        assert text(await session.call_tool("confirm", {"question": "ok?"})) == "confirmed"
    async with sdk_client(far, "far", **callbacks) as client:  # 2026-07-28: input_required
        assert text(await client.call_tool("ask", {"question": "new?"})) == "model says new?"
        assert text(await client.call_tool("confirm", {"question": "ok?"})) == "confirmed"


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_remotes_roots_request_and_a_subscription_to_it_reach_the_client(
    far: TrayService,
) -> None:
    """Roots: asked on the call's stream, answered by the client that called. The update:
    sent outside any call, on the remote's own GET stream, to the subscribed client."""
    seen = Seen("A", roots=["file:///project-a"])
    async with http_client(far, "far", **seen.kwargs()) as session:
        assert text(await session.call_tool("roots", {})) == "file:///project-a"
        await session.subscribe_resource("remote://note")
        touched = text(await session.call_tool("touch", {"uri": "remote://note"}))
        assert touched == "touched; subscribed: remote://note"
        await wait_until(lambda: seen.updated() == ["remote://note"], what="the update")
        await session.unsubscribe_resource("remote://note")
        touched = text(await session.call_tool("touch", {"uri": "remote://note"}))
        assert touched == "touched; subscribed: none"


async def test_a_remote_is_a_member_of_mcp_and_of_a_profile_and_of_the_bridge(
    far: TrayService,
) -> None:
    for endpoint in ("", "@both"):
        async with http_client(far, endpoint) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"far__echo", "far__big", "echo__echo"} <= names
            result = await session.call_tool("far__echo", {"text": f"via {endpoint or '/mcp'}"})
            assert text(result) == f"via {endpoint or '/mcp'}"
    async with bridge_client(far.paths, "far") as session:
        assert text(await session.call_tool("echo", {"text": "bridged"})) == "bridged"
    async with sdk_bridge(far.paths, "far") as client:  # the 2026-07-28 era, bridged
        assert text(await client.call_tool("echo", {"text": "modern bridge"})) == "modern bridge"


async def test_a_stopped_remote_is_unreachable_calls_fail_fast_and_it_comes_back_alone(
    far: TrayService, keyed_remote: Remote
) -> None:
    server = far.supervisor.server("far")
    async with http_client(far, "far") as session:
        assert text(await session.call_tool("echo", {"text": "before"})) == "before"
        keyed_remote.stop()

        began = time.perf_counter()
        result = await session.call_tool("echo", {"text": "while down"})
        took = time.perf_counter() - began

        assert result.is_error
        assert "far" in text(result) and "unreachable" in text(result), text(result)
        assert "session with the remote server ended" in text(result)  # no subprocess
        assert took < 5, took  # answered at once, never a client-side timeout
        await wait_state(server, ServerState.UNREACHABLE)
        began = time.perf_counter()
        again = await session.call_tool("echo", {"text": "still down"})
        assert again.is_error and "unreachable" in text(again)
        assert time.perf_counter() - began < 1  # refused without trying

        keyed_remote.start()
        await wait_ready(server, timeout=30)  # by itself: nobody pressed anything
        assert text(await session.call_tool("echo", {"text": "back"})) == "back"


async def test_the_secret_header_is_in_no_log_journal_or_status(
    far: TrayService, keyed_remote: Remote
) -> None:
    async with http_client(far, "far") as session:
        await session.call_tool("echo", {"text": "journaled"})
    record = await journaled(far, {"text": "journaled"}, server="far")
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.get(
            far.url + "/api/v1/status", headers={"Authorization": f"Bearer {far.token}"}
        )
    status = answer.text
    written = b"".join(
        path.read_bytes()
        for folder in (far.paths.log_dir, far.paths.state_dir)
        for path in folder.rglob("*")
        if path.is_file()
    )

    assert record["tool"] == "echo"
    row = next(s for s in json.loads(status)["servers"] if s["name"] == "far")
    assert row["remote"] is True and row["pid"] is None
    assert row["latency_ms"] is not None and row["latency_ms"] > 0  # the Servers tab's Latency
    assert keyed_remote.url in status  # its command, as the Servers tab shows it
    assert KEY not in status and KEY not in json.dumps(record)
    assert KEY.encode() not in written


async def test_a_wrong_key_is_a_start_failure_naming_the_http_status(
    services: Services, keyed_remote: Remote
) -> None:
    service = await services.start(
        {"far": {"url": keyed_remote.url, "headers": {"X-Api-Key": "wrong"}}}
    )
    server = service.supervisor.server("far")
    await wait_state(server, ServerState.PARKED, timeout=30)
    assert "401" in (server.parked_reason or ""), server.parked_reason


@pytest.fixture
def sse_remote() -> Iterator[Remote]:
    server = Remote(api_key=KEY, sse=True)
    server.start()
    yield server
    server.stop()


async def test_a_remote_of_the_older_sse_transport_is_served_and_seen_down_and_back(
    services: Services, sse_remote: Remote
) -> None:
    service = await services.start(
        {"old": {"url": sse_remote.url, "transport": "sse", "headers": {"X-Api-Key": KEY}}}
    )
    server = service.supervisor.server("old")
    await wait_ready(server)
    async with http_client(service, "old") as session:
        assert text(await session.call_tool("echo", {"text": "over sse"})) == "over sse"
        sse_remote.stop()
        # The stream's end is the session's end: unreachable once the reconnect fails.
        await wait_state(server, ServerState.UNREACHABLE)
        down = await session.call_tool("echo", {"text": "down"})
        assert down.is_error and "unreachable" in text(down), text(down)
        sse_remote.start()
        await wait_ready(server, timeout=30)
        assert text(await session.call_tool("echo", {"text": "again"})) == "again"


async def test_an_sse_remote_that_refuses_the_key_is_parked_naming_the_status(
    services: Services, sse_remote: Remote
) -> None:
    service = await services.start(
        {"old": {"url": sse_remote.url, "transport": "sse", "headers": {"X-Api-Key": "no"}}}
    )
    server = service.supervisor.server("old")
    await wait_state(server, ServerState.PARKED, timeout=30)
    assert "HTTP 401" in (server.parked_reason or ""), server.parked_reason


async def test_a_remote_added_edited_and_removed_by_a_config_edit_leaves_echo_running(
    services: Services, keyed_remote: Remote, fake_keyring: FileKeyring
) -> None:
    fake_keyring.set_password("mcp-tray", "far-key", KEY)
    service = await services.start({"echo": python_server(ECHO)})
    echo = service.supervisor.server("echo")
    await wait_ready(echo)
    pid = echo.pid
    entry = {"url": keyed_remote.url, "headers": {"X-Api-Key": "${keyring:far-key}"}}

    await service.supervisor.apply_config(config_of(service, {"far": entry}))
    far = service.supervisor.server("far")
    await wait_ready(far)
    # A header edit is a new launch: the remote's next session carries it.
    edited = {**entry, "headers": {"X-Api-Key": "wrong"}}
    await service.supervisor.apply_config(config_of(service, {"far": edited}))
    await wait_state(far, ServerState.PARKED, timeout=30)
    await service.supervisor.apply_config(config_of(service, {}))

    assert "far" not in {s.name for s in service.supervisor.snapshot().servers}
    assert echo.state is ServerState.READY and echo.pid == pid


def config_of(service: TrayService, remotes: dict[str, Any]) -> TrayConfig:
    path = service.paths.config_file
    path.write_text(json.dumps({"mcpServers": {"echo": python_server(ECHO), **remotes}}))
    return load_config(path)
