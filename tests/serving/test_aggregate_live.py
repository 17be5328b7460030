"""The aggregate endpoints through the bridge, and kept current while clients are connected.

Strategy: a real tray with real echo children; clients are the SDK 2.3
``Client`` through a real ``mcp-tray connect @all`` / ``@NAME`` bridge
process (both eras), or over HTTP. Profile edits are written to the config
file on disk and reach the tray through its own watcher, as a person's edit
would; list changes are what the SDK client receives (a handshake-era
session's GET stream, a 2026-07-28 ``subscriptions/listen`` stream).
"""

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError

from core.base.states import ServerState
from core.serving.service import TrayService
from tests.conftest import ECHO, kill_hard, python_server, wait_ready, wait_until
from tests.support.gateway_support import Services, http_client, sdk_bridge, sdk_client, text
from tests.support.isolation_support import Seen, start_chatty

BOTH_ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])
#: Several SDK servers start per test: a busy 2-core machine needs more than the default
#: (and less than the 60 s a test may take in all).
STARTING = 40.0


def rewrite_profiles(service: TrayService, profiles: dict[str, Any]) -> None:
    """Edit the config on disk, as a person would: only its profiles change."""
    path = service.paths.config_file
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "profiles": profiles}))


def collector(seen: list[str]) -> Any:
    """A message handler that records the method of each notification the client gets."""

    async def handler(message: IncomingMessage) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            seen.append(method)

    return handler


async def streams_open(service: TrayService) -> None:
    """Until every handshake-era session of the aggregate holds its GET stream open."""
    parents = service.gateway.aggregate.parents
    await wait_until(
        lambda: all(p.http and p.http.streaming for p in parents.values()),
        what="the GET stream open",
    )


@BOTH_ERAS
async def test_a_bridge_to_all_and_to_a_profile_lists_calls_refuses_and_retries(
    services: Services, tmp_path: Path, mode: str
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    service = await services.start(
        {"a": python_server(ECHO), "b": python_server(ECHO, ECHO_MARKER_DIR=str(markers))},
        profiles={"coding": {"servers": ["b"], "exclude": ["b__crash"]}},
    )
    a, b = (service.supervisor.server(name) for name in ("a", "b"))
    await wait_ready(a, timeout=STARTING)
    await wait_ready(b, timeout=STARTING)

    async with sdk_bridge(service.paths, "@all", mode) as everything:
        names = {tool.name for tool in (await everything.list_tools()).tools}
        pids = [int(text(await everything.call_tool(f"{s}__whoami", {}))) for s in "ab"]
    async with sdk_bridge(service.paths, "@coding", mode) as coding:
        offered = {tool.name for tool in (await coding.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await coding.call_tool("a__whoami", {})
        first = b.pid
        call = asyncio.ensure_future(coding.call_tool("b__slow_read", {"seconds": 1}))
        await wait_until((markers / "slow_read.started").exists, what="slow_read in flight")
        assert first is not None
        await kill_hard(first)
        retried = await call

    assert {"a__echo", "b__echo"} <= names
    assert pids == [a.pid, first]
    assert offered and all(name.startswith("b__") for name in offered)
    assert "b__crash" not in offered
    assert "not in profile 'coding'" in refused.value.error.message
    assert text(retried) == "read after 1.0"
    assert b.generation >= 2  # the kill respawned it (a busy machine may need two tries)


async def test_a_profile_edit_tells_a_handshake_era_client_its_tools_changed(
    services: Services,
) -> None:
    service = await services.start(
        {"a": python_server(ECHO), "b": python_server(ECHO)},
        profiles={"coding": {"servers": ["a"], "tools": ["a__echo"]}},
    )
    await wait_ready(service.supervisor.server("a"), timeout=STARTING)
    await wait_ready(service.supervisor.server("b"), timeout=STARTING)
    seen: list[str] = []
    handler = collector(seen)

    async with http_client(service, "@coding", message_handler=handler) as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        await streams_open(service)
        rewrite_profiles(service, {"coding": {"servers": ["a", "b"], "tools": ["*__echo"]}})
        await wait_until(
            lambda: "notifications/tools/list_changed" in seen, what=f"list_changed (seen {seen})"
        )
        after = [tool.name for tool in (await client.list_tools()).tools]

    assert before == ["a__echo"]
    assert after == ["a__echo", "b__echo"]
    assert seen.count("notifications/tools/list_changed") == 1  # one edit, one notice


async def test_a_profile_edit_reaches_a_2026_07_28_client_on_its_listen_stream(
    services: Services,
) -> None:
    service = await services.start(
        {"a": python_server(ECHO)}, profiles={"coding": {"tools": ["a__echo"]}}
    )
    await wait_ready(service.supervisor.server("a"), timeout=STARTING)

    async with sdk_client(service, "@coding", "auto") as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        async with client.listen(tools_list_changed=True) as changes:
            rewrite_profiles(service, {"coding": {"tools": ["a__echo", "a__whoami"]}})
            event = await asyncio.wait_for(anext(aiter(changes)), timeout=20)
        after = [tool.name for tool in (await client.list_tools()).tools]

    assert before == ["a__echo"]
    assert "tools" in repr(event).lower()
    assert after == ["a__echo", "a__whoami"]


async def test_a_profile_removed_from_the_config_refuses_its_clients_next_request(
    services: Services,
) -> None:
    service = await services.start({"a": python_server(ECHO)}, profiles={"coding": {}})
    await wait_ready(service.supervisor.server("a"), timeout=STARTING)

    async with sdk_client(service, "@coding", "legacy") as client:
        assert (await client.call_tool("a__echo", {"text": "x"})).content
        reloads = service.watcher.reloads
        rewrite_profiles(service, {})
        await wait_until(lambda: service.watcher.reloads > reloads, what="the edit applied")
        with pytest.raises(MCPError) as gone:
            await client.call_tool("a__echo", {"text": "x"})

    assert "profile 'coding' is no longer in the config" in gone.value.error.message


async def test_a_member_restart_that_changes_its_tools_tells_aggregate_clients_once(
    services: Services, tmp_path: Path
) -> None:
    marker = tmp_path / "extra"
    service = await services.start(
        {"a": python_server(ECHO, ECHO_EXTRA_TOOL_FILE=str(marker)), "b": python_server(ECHO)}
    )
    a = service.supervisor.server("a")
    await wait_ready(a, timeout=STARTING)
    await wait_ready(service.supervisor.server("b"), timeout=STARTING)
    seen: list[str] = []
    handler = collector(seen)

    async with http_client(service, "@all", message_handler=handler) as client:
        await client.call_tool("a__echo", {"text": "x"})  # a link to a, seated in its share
        await streams_open(service)
        marker.write_text("1")
        await service.supervisor.respawn("a")
        # Generation 2, or 3 when 2 missed its start deadline on a busy machine.
        await wait_until(
            lambda: a.state is ServerState.READY and a.generation >= 2, what="a respawned"
        )
        await wait_until(
            lambda: "notifications/tools/list_changed" in seen, what=f"list_changed (seen {seen})"
        )
        await asyncio.sleep(0.3)  # anything else of the burst would have come by now
        names = [tool.name for tool in (await client.list_tools()).tools]

    assert "a__extra_tool" in names
    assert seen.count("notifications/tools/list_changed") == 1


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_per_workspace_members_give_each_project_its_own_child_through_the_aggregate(
    services: Services, tmp_path: Path
) -> None:
    service, _ = await start_chatty(
        services, tmp_path, CHATTY_ROOTS_AT_START="1", sharing="per-workspace"
    )
    one, also_one, other = (
        Seen("A", roots=["file:///one"]),
        Seen("B", roots=["file:///one"]),
        Seen("C", roots=["file:///other"]),
    )
    async with (
        http_client(service, "@all", **one.kwargs()) as a,
        sdk_bridge(service.paths, "@all", "legacy", **other.kwargs()) as c,
        sdk_client(service, "@all", "auto", list_roots_callback=also_one.list_roots) as b,
    ):
        pids = [text(await x.call_tool("chatty__whoami", {})) for x in (a, b, c)]
        roots = [text(await x.call_tool("chatty__known_roots", {})) for x in (a, b, c)]
        children = sorted(service.supervisor.private)

    assert pids[0] == pids[1] != pids[2]
    assert roots == ["file:///one", "file:///one", "file:///other"]
    assert len(children) == 2 and all(name.startswith("chatty@ws-") for name in children)
