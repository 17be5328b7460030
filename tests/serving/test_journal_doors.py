"""The call journal sees every door: each test runs a real tray (TrayService in-process) on
the real echo server and calls it the way a client does (the SDK's ClientSession over HTTP
in both eras, the aggregate ``/mcp`` and a profile, a real ``mcp-tray connect`` bridge, the
real ``mcp-tray call`` command); then reads the journal back through the control API's
reader (``calls_json``, what ``GET /api/v1/calls`` answers) and asserts the record."""

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import MCPError

from core.registry.journal import CallQuery
from core.serving.observe.call_journal import PID_RETRY_SECONDS
from core.serving.service import TrayService
from core.settings.paths import Paths
from tests.conftest import (
    CRASH_AT_START,
    ECHO,
    SERVERS,
    kill_hard,
    pid_of,
    python_server,
    wait_ready,
    wait_until,
)
from tests.support.cli_support import cli
from tests.support.fakes import FakeClock
from tests.support.gateway_support import (
    Services,
    bridge_client,
    http_client,
    journaled,
    sdk_bridge,
    sdk_client,
    text,
)
from tests.support.held import held_calls

REVIEWED = SERVERS / "reviewed.py"


async def echo_tray(services: Services, **document: Any) -> TrayService:
    service = await services.start({"echo": python_server(ECHO)}, **document)
    await wait_ready(service.supervisor.server("echo"))
    return service


async def test_a_handshake_era_http_call_is_one_record_with_its_client_door_and_result(
    services: Services,
) -> None:
    service = await echo_tray(services)
    async with http_client(service, "echo") as session:
        result = await session.call_tool("echo", {"text": "hello journal"})
    assert text(result) == "hello journal"
    record = await journaled(service, tool="echo")
    assert record["door"] == "/mcp/echo"
    assert record["server"] == "echo"
    assert record["method"] == "tools/call"
    assert record["outcome"] == "ok"
    assert record["arguments"] == {"text": "hello journal"}
    assert record["result_head"] == "hello journal"
    assert record["result_size"] == len("hello journal")  # the characters of its texts
    assert record["generation"] == service.supervisor.server("echo").generation
    assert record["client_name"] == "mcp"  # the SDK's clientInfo name
    assert "handshake" in record["identified_by"]
    assert record["session"]
    assert record["duration_ms"] > 0
    assert record["time"].endswith("+00:00")


async def test_a_2026_07_28_client_is_journaled_with_its_process(services: Services) -> None:
    service = await echo_tray(services)
    async with sdk_client(service, "echo") as client:
        await client.call_tool("echo", {"text": "modern"})
    record = await journaled(service, tool="echo")
    assert "2026-07-28" in record["identified_by"]
    assert record["outcome"] == "ok"
    assert record["arguments"] == {"text": "modern"}
    # The SDK client runs in this very process: the OS says so from the connection.
    assert record["pid"] == os.getpid()
    assert record["identified_by"].startswith("client process")


async def test_a_tool_error_and_a_child_that_exits_mid_call_are_told_apart(
    services: Services,
) -> None:
    service = await echo_tray(services)
    async with http_client(service, "echo") as session:
        await session.call_tool("fail", {"message": "nope"})
        await session.call_tool("crash", {"code": 3})
    failed = await journaled(service, tool="fail")
    assert failed["outcome"] == "tool-error"
    crashed = await journaled(service, tool="crash")
    assert crashed["outcome"] == "exited"
    assert "exited" in crashed["detail"]


async def test_the_aggregate_and_a_profile_are_doors_and_a_profile_refusal_is_recorded(
    services: Services,
) -> None:
    service = await echo_tray(
        services, profiles={"narrow": {"servers": ["echo"], "tools": ["echo__echo"]}}
    )
    async with http_client(service, "") as session:
        await session.call_tool("echo__echo", {"text": "via all"})
    record = await journaled(service, tool="echo")
    assert (record["door"], record["server"], record["outcome"]) == ("/mcp", "echo", "ok")
    async with http_client(service, "@narrow") as session:
        await session.call_tool("echo__echo", {"text": "via profile"})
        with pytest.raises(MCPError, match="not in profile 'narrow'"):
            await session.call_tool("echo__whoami", {})
    record = await journaled(service, door="/mcp/@narrow", outcome="ok")
    assert record["arguments"] == {"text": "via profile"}
    record = await journaled(service, outcome="refused")
    assert (record["refused_by"], record["door"], record["tool"]) == (
        "profile",
        "/mcp/@narrow",
        "echo__whoami",
    )


async def test_a_bridge_is_a_door_with_the_bridge_process(services: Services) -> None:
    service = await echo_tray(services)
    async with bridge_client(service.paths, "echo") as session:
        await session.call_tool("echo", {"text": "bridged"})
        record = await journaled(service, tool="echo")
        assert record["door"] == "bridge /mcp/echo"
        assert record["identified_by"].startswith("bridge worker")
        # Its pid is known once the tray's copy of the worker registry holds its row.
        assert service.workers is not None
        await service.workers.refresh()
        # The one row not held by this process (the tray holds direct HTTP sessions' rows).
        (row,) = [r for r in service.workers_json() if r["pid"] != os.getpid()]
        # The journal looks again once PID_RETRY_SECONDS passed (its clock, moved here).
        now = service.journal.clock()
        service.journal.clock = lambda: now + PID_RETRY_SECONDS
        await session.call_tool("echo", {"text": "bridged again"})
        record = await journaled(service, {"text": "bridged again"})
        assert record["pid"] == row["pid"]
    async with sdk_bridge(service.paths, "echo") as client:
        await client.call_tool("echo", {"text": "bridged, 2026-07-28"})
    record = await journaled(service, {"text": "bridged, 2026-07-28"})
    assert record["door"] == "bridge /mcp/echo"
    assert "2026-07-28" in record["identified_by"]


async def test_mcp_tray_call_and_the_api_are_doors_of_their_own(services: Services) -> None:
    service = await echo_tray(services)
    home = service.paths.state_dir.parent
    done = await asyncio.to_thread(cli, home, "call", "echo", "echo", "--args", '{"text": "cli"}')
    assert done.returncode == 0, done.stderr
    record = await journaled(service, tool="echo")
    assert (record["door"], record["client"], record["outcome"]) == ("cli", "mcp-tray", "ok")
    assert record["arguments"] == {"text": "cli"}
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(
            f"{service.url}/api/v1/servers/echo/call",
            headers={"Authorization": f"Bearer {service.token}"},
            json={"tool": "echo", "arguments": {"text": "api"}},
        )
    assert reply.status_code == 200
    record = await journaled(service, {"text": "api"})
    assert (record["door"], record["client"]) == ("api", "mcp-tray")


async def test_get_api_v1_calls_filters_and_refuses_a_bad_parameter(services: Services) -> None:
    service = await echo_tray(services)
    async with http_client(service, "echo") as session:
        await session.call_tool("echo", {"text": "one"})
        await session.call_tool("fail", {"message": "two"})
    await journaled(service, tool="fail")
    headers = {"Authorization": f"Bearer {service.token}"}
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(
            f"{service.url}/api/v1/calls", params={"outcome": "tool-error"}, headers=headers
        )
        assert [r["tool"] for r in reply.json()["calls"]] == ["fail"]
        reply = await http.get(
            f"{service.url}/api/v1/calls", params={"tool": "ec*"}, headers=headers
        )
        assert [r["tool"] for r in reply.json()["calls"]] == ["echo"]
        bad = await http.get(
            f"{service.url}/api/v1/calls", params={"outcome": "fine"}, headers=headers
        )
        assert bad.status_code == 400
        assert "outcome 'fine' is none of ok" in bad.json()["error"]
        unauthorised = await http.get(f"{service.url}/api/v1/calls")
        assert unauthorised.status_code == 401
    assert json.dumps(reply.json())  # plain JSON all the way


async def test_a_call_replayed_after_its_child_died_is_retried_with_the_new_generation(
    services: Services, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    service = await services.start({"echo": python_server(ECHO, ECHO_MARKER_DIR=str(markers))})
    server = service.supervisor.server("echo")
    await wait_ready(server)
    async with http_client(service, "echo") as session:
        call = asyncio.ensure_future(session.call_tool("slow_read", {"seconds": 0.5}))
        await wait_until((markers / "slow_read.started").exists, what="slow_read to start")
        await kill_hard(pid_of(server))
        assert text(await asyncio.wait_for(call, 30)) == "read after 0.5"
    record = await journaled(service, tool="slow_read")
    assert (record["outcome"], record["generation"]) == ("retried", 2)


async def test_calls_a_breaker_refuses_are_refused_by_the_breaker_in_the_journal(
    services: Services,
) -> None:
    service = await services.start({"broken": python_server(CRASH_AT_START)})
    async with http_client(service, "broken") as session:
        for _ in range(4):
            await session.call_tool("anything", {})
    refused = await journaled(service, outcome="refused")
    assert (refused["refused_by"], refused["server"], refused["tool"]) == (
        "breaker",
        "broken",
        "anything",
    )
    every = await service.calls_json(CallQuery())
    # Each death said so; then the server's breaker (its session's next) refused at once.
    assert [r["outcome"] for r in every] == ["exited", "exited", "exited", "refused"]
    assert "do NOT retry now" in every[-1]["detail"]


async def test_held_calls_are_journaled_as_the_person_answered_them(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    """A call an approve rule holds is one record, on /mcp/NAME and through a bridge: denied
    (by approval), timed out (by approval, on the approvals' clock), allowed (ok)."""
    effects = tmp_path / "effects.txt"
    entry = python_server(REVIEWED, REVIEWED_EFFECTS_FILE=str(effects))
    service = await services.start({"reviewed": {**entry, "approve": ["destructive"]}})
    await wait_ready(service.supervisor.server("reviewed"))
    clock = FakeClock()
    service.approvals.clock = clock

    async def held_one() -> str:
        [held] = await held_calls(service)
        return str(held["id"])

    async with http_client(service, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "denied"}))
        denied = await asyncio.to_thread(cli, tray_home.state_dir.parent, "deny", await held_one())
        assert denied.returncode == 0, denied.stderr
        assert (await call).is_error
        record = await journaled(service, {"thing": "denied"}, server="reviewed")
        assert (record["outcome"], record["refused_by"], record["door"]) == (
            "denied",
            "approval",
            "/mcp/reviewed",
        )
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "late"}))
        await held_one()
        await wait_until(lambda: clock.next_deadline is not None, what="the approval's timer")
        clock.advance(121.0)
        assert (await call).is_error
        record = await journaled(service, {"thing": "late"}, server="reviewed")
        assert (record["outcome"], record["refused_by"]) == ("timeout", "approval")
    async with bridge_client(tray_home, "reviewed") as bridged:
        call = asyncio.ensure_future(bridged.call_tool("delete_thing", {"thing": "allowed"}))
        await service.approvals.approve(await held_one())
        assert not (await call).is_error
        record = await journaled(service, {"thing": "allowed"}, server="reviewed")
        assert (record["outcome"], record["door"]) == ("ok", "bridge /mcp/reviewed")
    assert effects.read_text().splitlines() == ["deleted allowed"]
