"""Roots and sharing modes: a child never works in one client's folders on another's behalf.

Strategy: a real tray (TrayService in-process) runs tests/servers/chatty.py,
which keeps the roots it was last given the way server-filesystem keeps
its allowed folders (``known_roots``), and, like it, asks for them as soon
as it is initialized (``CHATTY_ROOTS_AT_START``). Real SDK clients of both
eras, over HTTP and through the real stdio bridge, each list their own
roots; chatty records what it asked and got. Which child served a call is
its pid (``whoami``).
"""

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, MCPError

from core.serving.service import TrayService
from tests.conftest import wait_until
from tests.support.gateway_support import (
    Services,
    bridge_client,
    http_client,
    sdk_bridge,
    sdk_client,
    text,
)
from tests.support.isolation_support import Seen, heard, start_chatty

# Roots are deprecated at 2026-07-28 (the SDK warns); they are what is tested here.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


async def tray(services: Services, tmp_path: Path, sharing: str) -> tuple[TrayService, Path]:
    return await start_chatty(services, tmp_path, CHATTY_ROOTS_AT_START="1", sharing=sharing)


def roots_events(log: Path) -> list[dict[str, Any]]:
    return [e for e in heard(log) if e["event"].startswith("roots")]


async def answer(client: ClientSession | Client, tool: str) -> str:
    return text(await client.call_tool(tool, {}))


@contextlib.asynccontextmanager
async def modern(service: TrayService, seen: Seen) -> AsyncIterator[Client]:
    async with sdk_client(service, "chatty", list_roots_callback=seen.list_roots) as client:
        yield client


async def test_a_shared_childs_roots_come_from_its_only_session_and_follow_it_out(
    services: Services, tmp_path: Path
) -> None:
    service, log = await tray(services, tmp_path, "shared")
    # Asked at start with nobody attached: refused, never a guess.
    await wait_until(lambda: roots_events(log) != [], what="the child's first ask")
    assert roots_events(log)[0]["event"] == "roots-failed"
    a, b = Seen("A", roots=["file:///a"]), Seen("B", roots=["file:///b"])
    async with http_client(service, "chatty", **a.kwargs()) as client_a:
        # A attached: the child is told, asks again, and gets A's roots.
        await wait_until(lambda: roots_events(log)[-1].get("uris") == ["file:///a"], what="A's")
        assert await answer(client_a, "known_roots") == "file:///a"
    async with http_client(service, "chatty", **b.kwargs()) as client_b:
        await wait_until(lambda: roots_events(log)[-1].get("uris") == ["file:///b"], what="B's")
        mine = await answer(client_b, "known_roots")

    assert mine == "file:///b"
    assert b.roots_asked >= 1
    # A's roots were given while A was the one session, and never on B's behalf.
    assert [e.get("uris") for e in roots_events(log) if e["event"] == "roots"] == [
        ["file:///a"],
        ["file:///b"],
    ]


@pytest.mark.parametrize("path", ["http", "bridge"])
async def test_a_per_session_child_has_its_handshake_sessions_roots_from_the_first_request(
    services: Services, tmp_path: Path, path: str
) -> None:
    service, log = await tray(services, tmp_path, "per-session")
    a, b = Seen("A", roots=["file:///a"]), Seen("B", roots=["file:///b"])
    if path == "http":
        opened_a = http_client(service, "chatty", **a.kwargs())
        opened_b = http_client(service, "chatty", **b.kwargs())
    else:
        opened_a = bridge_client(service.paths, "chatty", session_kwargs=a.kwargs())
        opened_b = bridge_client(
            service.paths,
            "chatty",
            session_kwargs=b.kwargs(),
            env={"MCP_TRAY_CLIENT_SESSION": "second"},
        )
    async with opened_a as client_a, opened_b as client_b:
        first_a = await answer(client_a, "known_roots")
        first_b = await answer(client_b, "known_roots")
        pids = {await answer(client_a, "whoami"), await answer(client_b, "whoami")}

    assert (first_a, first_b) == ("file:///a", "file:///b")
    assert len(pids) == 2
    # Only the entry's own child, which no session uses, asked with nobody to answer.
    assert [e["event"] for e in roots_events(log)].count("roots-failed") == 1
    assert roots_events(log)[0]["event"] == "roots-failed"


@pytest.mark.parametrize("path", ["http", "bridge"])
async def test_a_per_session_child_has_its_2026_07_28_clients_roots_from_the_first_request(
    services: Services, tmp_path: Path, path: str
) -> None:
    service, log = await tray(services, tmp_path, "per-session")
    a = Seen("A", roots=["file:///modern-a"])
    if path == "http":
        opened = modern(service, a)
    else:
        opened = sdk_bridge(service.paths, "chatty", list_roots_callback=a.list_roots)
    async with opened as client:
        assert client.protocol_version == "2026-07-28"
        first = await answer(client, "known_roots")
        again = await answer(client, "known_roots")

    assert first == again == "file:///modern-a"
    assert a.roots_asked == 1  # asked once for the session, as part of its first request
    # (The entry's own child, which no session uses, asked at start with nobody to answer.)
    assert [e.get("uris") for e in roots_events(log)][1:] == [["file:///modern-a"]]


async def test_per_workspace_gives_one_child_per_project_whatever_the_clients_era(
    services: Services, tmp_path: Path
) -> None:
    service, _ = await tray(services, tmp_path, "per-workspace")
    one, also_one, other = (
        Seen("A", roots=["file:///one"]),
        Seen("B", roots=["file:///one"]),
        Seen("C", roots=["file:///other"]),
    )
    async with (
        http_client(service, "chatty", **one.kwargs()) as a,
        bridge_client(service.paths, "chatty", session_kwargs=other.kwargs()) as c,
        modern(service, also_one) as b,
    ):
        pid_a, pid_b, pid_c = [await answer(x, "whoami") for x in (a, b, c)]
        roots_a, roots_b, roots_c = [await answer(x, "known_roots") for x in (a, b, c)]
        children = sorted(service.supervisor.private)

    assert pid_a == pid_b != pid_c
    assert (roots_a, roots_b, roots_c) == ("file:///one", "file:///one", "file:///other")
    assert len(children) == 2 and all(name.startswith("chatty@ws-") for name in children)


async def test_a_session_whose_roots_change_moves_to_the_matching_workspace(
    services: Services, tmp_path: Path
) -> None:
    service, _ = await tray(services, tmp_path, "per-workspace")
    a, b = Seen("A", roots=["file:///one"]), Seen("B", roots=["file:///two"])
    async with (
        http_client(service, "chatty", **a.kwargs()) as client_a,
        http_client(service, "chatty", **b.kwargs()) as client_b,
    ):
        before = await answer(client_a, "whoami")
        b_pid = await answer(client_b, "whoami")
        a.roots = ["file:///two"]
        await client_a.send_roots_list_changed()
        await wait_until(
            lambda: len(service.supervisor.private) == 1, what="A's old workspace to go"
        )
        after = await answer(client_a, "whoami")
        roots = await answer(client_a, "known_roots")

    assert before != b_pid
    assert after == b_pid
    assert roots == "file:///two"


async def test_a_tripped_session_of_a_per_session_server_gets_no_child_of_its_own(
    services: Services,
) -> None:
    service = await services.start(
        {"ghost": {"command": "mcp-tray-no-such-command", "sharing": "per-session"}}
    )
    async with http_client(service, "ghost") as client:
        for _ in range(3):
            assert (await client.call_tool("anything", {})).is_error  # its child parks
        await wait_until(lambda: not service.supervisor.private, what="its child retired")
        tripped = await client.call_tool("anything", {})
        with pytest.raises(MCPError) as listing:
            await client.list_tools()
        spawned = dict(service.supervisor.private)  # while the session is still open

    assert text(tripped).startswith("⚠️ This session has failed 3 times in a row")
    assert "⚠️ This session has failed 3 times in a row" in str(listing.value)
    assert spawned == {}  # nothing was spawned for it
