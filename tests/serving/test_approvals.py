"""Approvals: calls an ``approve`` rule matches wait for the person, on every door.

Strategy: a real tray service in-process (tests/support/gateway_support.py) runs the
real server tests/servers/reviewed.py; real SDK clients call it over
streamable HTTP in both eras, through the aggregate ``/mcp``, a profile and
a real ``mcp-tray connect`` bridge. The person answers through the real
command line (``mcp-tray approvals/approve/deny`` subprocesses against the
running service) or the control API. Whether a call reached the server is
read from the file the server's ``delete_thing`` writes. The approval
timeout runs on a FakeClock given to the approvals (no test waits it out).
"""

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from tests.conftest import SERVERS, python_server, wait_ready, wait_until
from tests.support.cli_support import cli
from tests.support.fakes import FakeClock
from tests.support.gateway_support import (
    Services,
    bridge_client,
    http_client,
    sdk_client,
    text,
)
from tests.support.held import held_calls

REVIEWED = SERVERS / "reviewed.py"


def reviewed(tmp_path: Path, **keys: Any) -> dict[str, Any]:
    entry = python_server(REVIEWED, REVIEWED_EFFECTS_FILE=str(tmp_path / "effects.txt"))
    entry.update(keys)
    return entry


def effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


async def start(
    services: Services, tmp_path: Path, profiles: dict[str, Any] | None = None, **keys: Any
) -> TrayService:
    service = await services.start({"reviewed": reviewed(tmp_path, **keys)}, profiles)
    await wait_ready(service.supervisor.server("reviewed"))
    return service


async def mcp_tray(paths: Paths, *args: str) -> Any:
    """The real command line against the running service (off the event loop)."""
    return await asyncio.to_thread(cli, paths.state_dir.parent, *args)


async def test_a_destructive_call_waits_and_runs_once_allowed_from_the_command_line(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    service = await start(services, tmp_path, approve=["destructive"])
    async with http_client(service, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "repo"}))
        await held_calls(service)
        assert effects(tmp_path) == []  # held before it reached the server
        listed = await mcp_tray(tray_home, "approvals", "--json")
        assert listed.returncode == 0, listed.stderr
        [item] = json.loads(listed.stdout)
        assert item["kind"] == "call"
        assert (item["server"], item["tool"], item["arguments"]) == (
            "reviewed",
            "delete_thing",
            {"thing": "repo"},
        )
        assert item["client"] and item["since"] and item["id"].startswith("c-")
        answered = await mcp_tray(tray_home, "approve", item["id"])
        assert answered.returncode == 0, answered.stderr
        result = await call
        assert not result.is_error and text(result) == "deleted repo"
        assert effects(tmp_path) == ["deleted repo"]
        # Once: the next call is asked again; a read-only tool never is.
        peek = await session.call_tool("peek", {"thing": "repo"})
        assert text(peek) == "repo is there"
        again = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "two"}))
        [item] = await held_calls(service)
        assert (await mcp_tray(tray_home, "deny", item["id"])).returncode == 0
        assert (await again).is_error


async def test_a_denied_call_is_a_tool_error_naming_who_refused_and_no_breaker_counts_it(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    service = await start(services, tmp_path, approve=["delete_*"])
    async with http_client(service, "reviewed") as session:
        for attempt in range(4):  # past the session breaker's threshold of 3
            call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "x"}))
            [item] = await held_calls(service)
            denied = await mcp_tray(tray_home, "deny", item["id"])
            assert denied.returncode == 0, denied.stderr
            result = await call
            assert result.is_error
            assert "The person at mcp-tray denied this call of 'delete_thing'" in text(result)
            assert "Always allow" in text(result), attempt
        assert effects(tmp_path) == []
        [row] = service.sessions_json()
        assert row["consecutive_failures"] == 0 and row["breaker"] == "closed"
        assert text(await session.call_tool("peek", {"thing": "x"})) == "x is there"


async def test_allow_for_this_session_covers_that_session_only(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    service = await start(services, tmp_path, approve=["delete_thing"])
    async with http_client(service, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "a"}))
        [item] = await held_calls(service)
        assert (await mcp_tray(tray_home, "approve", item["id"], "--session")).returncode == 0
        assert not (await call).is_error
        second = await session.call_tool("delete_thing", {"thing": "b"})  # not asked
        assert not second.is_error
        async with http_client(service, "reviewed") as other:
            asked = asyncio.ensure_future(other.call_tool("delete_thing", {"thing": "c"}))
            [item] = await held_calls(service)
            service.approvals.deny(item["id"])
            assert (await asked).is_error
    assert effects(tmp_path) == ["deleted a", "deleted b"]


async def test_always_allow_is_kept_in_the_state_folder_listed_and_revocable(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    service = await start(services, tmp_path, approve=["any"])
    async with http_client(service, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("peek", {"thing": "a"}))
        [item] = await held_calls(service)
        assert (await mcp_tray(tray_home, "approve", item["id"], "--always")).returncode == 0
        assert not (await call).is_error
    kept = json.loads((tray_home.state_dir / "approvals.json").read_text())
    assert [(r["server"], r["tool"]) for r in kept["always"]] == [("reviewed", "peek")]
    listed = await mcp_tray(tray_home, "approvals", "--always", "--json")
    assert [(g["server"], g["tool"]) for g in json.loads(listed.stdout)] == [("reviewed", "peek")]
    async with http_client(service, "reviewed") as other:  # another session: not asked
        assert text(await other.call_tool("peek", {"thing": "b"})) == "b is there"
        revoked = await mcp_tray(tray_home, "approvals", "--revoke", "reviewed", "peek")
        assert revoked.returncode == 0, revoked.stderr
        asked = asyncio.ensure_future(other.call_tool("peek", {"thing": "c"}))
        [item] = await held_calls(service)
        service.approvals.deny(item["id"])
        assert (await asked).is_error
    gone = await mcp_tray(tray_home, "approvals", "--revoke", "reviewed", "peek")
    assert gone.returncode != 0 and "is not always allowed" in gone.stderr


async def test_an_unanswered_call_is_refused_after_approval_timeout_s_of_the_clock(
    services: Services, tmp_path: Path
) -> None:
    service = await start(services, tmp_path, approve=["destructive"])
    clock = FakeClock()
    service.approvals.clock = clock
    async with http_client(service, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "a"}))
        await held_calls(service)
        await wait_until(lambda: clock.next_deadline is not None, what="the approval's timer")
        assert clock.next_deadline == pytest.approx(1000.0 + 120.0)  # the default
        clock.advance(119.0)
        await asyncio.sleep(0.05)
        assert not call.done()
        clock.advance(1.0)
        result = await call
    assert result.is_error
    assert "nobody answered within 120 s" in text(result)
    assert service.approvals.pending == {} and effects(tmp_path) == []


async def test_a_held_call_holds_no_other_call_of_its_session_and_server(
    services: Services, tmp_path: Path
) -> None:
    service = await start(services, tmp_path, approve=["delete_thing"])
    async with http_client(service, "reviewed") as session:
        held = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "a"}))
        [item] = await held_calls(service)
        for n in range(3):
            peek = await asyncio.wait_for(session.call_tool("peek", {"thing": str(n)}), 20)
            assert text(peek) == f"{n} is there"
        assert not held.done()
        await service.approvals.approve(item["id"])
        assert text(await held) == "deleted a"


async def test_a_2026_07_28_client_is_held_and_allowed_through_the_control_api(
    services: Services, tmp_path: Path
) -> None:
    service = await start(services, tmp_path, approve=["destructive"])
    async with sdk_client(service, "reviewed") as client:
        call = asyncio.ensure_future(client.call_tool("delete_thing", {"thing": "m"}))
        [item] = await held_calls(service)
        headers = {"Authorization": f"Bearer {service.token}"}
        async with httpx.AsyncClient(timeout=30, headers=headers) as api:
            listed = (await api.get(f"{service.url}/api/v1/approvals")).json()
            assert [p["id"] for p in listed["pending"]] == [item["id"]]
            reply = await api.post(
                f"{service.url}/api/v1/approvals/{item['id']}/approve", json={"scope": "once"}
            )
            assert reply.status_code == 200, reply.text
        assert text(await call) == "deleted m"
        denied = asyncio.ensure_future(client.call_tool("delete_thing", {"thing": "n"}))
        [item] = await held_calls(service)
        service.approvals.deny(item["id"])
        result = await denied
        assert result.is_error and "denied" in text(result)
    assert effects(tmp_path) == ["deleted m"]


async def test_the_aggregate_holds_by_the_server_rule_and_a_profile_by_its_own(
    services: Services, tmp_path: Path
) -> None:
    service = await start(
        services,
        tmp_path,
        {"careful": {"approve": ["reviewed__peek"]}},
        approve=["delete_thing"],
    )
    async with http_client(service, "@all") as everything:
        call = asyncio.ensure_future(everything.call_tool("reviewed__delete_thing", {"thing": "a"}))
        [item] = await held_calls(service)
        assert item["tool"] == "delete_thing" and item["server"] == "reviewed"
        await service.approvals.approve(item["id"])
        assert text(await call) == "deleted a"
        # The profile's rule is its own: /mcp does not ask for peek.
        assert text(await everything.call_tool("reviewed__peek", {"thing": "p"})) == "p is there"
    async with http_client(service, "@careful") as careful:
        asked = asyncio.ensure_future(careful.call_tool("reviewed__peek", {"thing": "q"}))
        [item] = await held_calls(service)
        assert "profile" in item["reason"]
        service.approvals.deny(item["id"])
        result = await asked
        assert result.is_error and "denied" in text(result)


async def test_a_call_through_the_bridge_is_held_and_denied(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    service = await start(services, tmp_path, approve=["destructive"])
    async with bridge_client(tray_home, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "b"}))
        [item] = await held_calls(service)
        assert (await mcp_tray(tray_home, "deny", item["id"])).returncode == 0
        result = await call
        assert result.is_error and "denied" in text(result)
    assert effects(tmp_path) == []


async def test_answers_to_what_does_not_wait_are_refused_by_name(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    await start(services, tmp_path, approve=["destructive"])
    unknown = await mcp_tray(tray_home, "approve", "c-abcdef")
    assert unknown.returncode != 0 and "no approval 'c-abcdef' is waiting" in unknown.stderr
    malformed = await mcp_tray(tray_home, "deny", "../status")
    assert malformed.returncode != 0 and "is not an approval id" in malformed.stderr


async def test_an_approve_rule_added_by_a_config_edit_holds_the_next_call_without_a_restart(
    services: Services, tmp_path: Path, tray_home: Paths
) -> None:
    service = await start(services, tmp_path)
    server = service.supervisor.server("reviewed")
    async with http_client(service, "reviewed") as session:
        assert text(await session.call_tool("delete_thing", {"thing": "a"})) == "deleted a"
        edited = {"mcpServers": {"reviewed": reviewed(tmp_path, approve=["delete_thing"])}}
        tray_home.config_file.write_text(json.dumps(edited))
        result = await service.supervisor.apply_config(load_config(tray_home.config_file))
        assert result.restarted == () and server.generation == 1
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "b"}))
        [item] = await held_calls(service)
        service.approvals.deny(item["id"])
        assert (await call).is_error
    assert effects(tmp_path) == ["deleted a"]


async def test_allow_for_this_session_ends_with_its_session(
    services: Services, tmp_path: Path
) -> None:
    service = await start(services, tmp_path, approve=["delete_thing"])
    async with http_client(service, "reviewed") as session:
        call = asyncio.ensure_future(session.call_tool("delete_thing", {"thing": "a"}))
        [item] = await held_calls(service)
        await service.approvals.approve(item["id"], "session")
        await call
        [row] = service.sessions_json()
        granted = row["id"]
        assert any(g[0] == granted for g in service.approvals._session_grants)
    await wait_until(lambda: not service.sessions_json(), what="the session closed")
    assert not any(g[0] == granted for g in service.approvals._session_grants)
