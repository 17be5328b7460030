"""Clients survive mcp-tray itself going away: a real bridge subprocess, a tray restarted under it.

Strategy: an SDK client talks to a real `mcp-tray connect` bridge over
stdio (or, for a handshake-era HTTP session, straight to the gateway's
configured port); between two of its calls the tray (a TrayService
in-process, or a `run --headless` subprocess) is stopped or SIGKILLed and
started again on another port. The client is never restarted: the second
call must be answered. With no tray for longer than the bridge's wait, the call gets an
error naming mcp-tray, and the bridge is still there for the next try.
"""

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.shared.exceptions import MCPError

from core.base.envvars import RECONNECT_SECONDS_ENV
from core.base.errors import NotRunning
from core.settings.paths import Paths
from core.settings.runtime import running_instance
from tests.conftest import ECHO, python_server, wait_until
from tests.support.gateway_support import (
    REPO,
    bridge_client,
    bridge_env,
    http_client,
    text,
    worker_row,
)
from tests.support.isolation_support import Seen, chatty, heard
from tests.support.trays import Trays

#: Every start on a new free port: the bridge must find the tray wherever it went.
ANY_PORT = {"port": 0}
SESSION = "restart-1"
BRIDGE_ENV = {"MCP_TRAY_CLIENT": "cursor", "MCP_TRAY_CLIENT_SESSION": SESSION}


def write_config(paths: Paths) -> None:
    paths.config_file.write_text(
        json.dumps({"gateway": ANY_PORT, "mcpServers": {"echo": python_server(ECHO)}})
    )


@pytest.fixture
async def trays(tray_home: Paths) -> AsyncIterator[Trays]:
    write_config(tray_home)
    holder = Trays(tray_home)
    yield holder
    await holder.stop()


async def test_a_bridge_client_survives_a_tray_restart_on_a_new_port(
    trays: Trays, tmp_path: Path
) -> None:
    first = await trays.start()
    errlog = (tmp_path / "bridge.err").open("w+")
    async with bridge_client(trays.paths, "echo", errlog=errlog, env=BRIDGE_ENV) as client:
        assert text(await client.call_tool("echo", {"text": "one"})) == "one"
        identity = (await worker_row(first, SESSION))["worker_identity"]
        old_port = first.info.port if first.info else None

        await trays.stop()
        second = await trays.start()
        assert second.info is not None and second.info.port != old_port

        # Same client session, no restart of anything on the client's side.
        assert text(await client.call_tool("echo", {"text": "two"})) == "two"
        # The new tray sees the bridge as the same worker, live.
        row = await worker_row(second, SESSION)
        assert row["worker_identity"] == identity and row["live"]
        # And it is a session of the new tray, under the client's name.
        assert [s["client_name"] for s in second.sessions_json()] == ["cursor"]
    errlog.close()
    assert "connected to mcp-tray again" in (tmp_path / "bridge.err").read_text()


async def test_without_a_tray_past_the_wait_a_call_fails_clearly_then_works_when_it_returns(
    trays: Trays,
) -> None:
    await trays.start()
    env = BRIDGE_ENV | {RECONNECT_SECONDS_ENV: "1"}
    async with bridge_client(trays.paths, "echo", env=env) as client:
        assert text(await client.call_tool("echo", {"text": "one"})) == "one"
        await trays.stop()

        with pytest.raises(MCPError) as failed:
            await client.call_tool("echo", {"text": "nobody home"})
        assert "mcp-tray" in str(failed.value)
        assert "not running" in str(failed.value)

        # The bridge is still there: the next call after the tray is back is answered.
        await trays.start()
        assert text(await client.call_tool("echo", {"text": "back"})) == "back"


async def test_a_ping_while_the_tray_is_away_is_answered_by_the_bridge(trays: Trays) -> None:
    await trays.start()
    async with bridge_client(trays.paths, "echo", env=BRIDGE_ENV) as client:
        await trays.stop()
        await client.send_ping()
        await trays.start()
        assert text(await client.call_tool("echo", {"text": "after"})) == "after"


# ------------------------------------------------------- a tray SIGKILLed


async def test_a_bridge_client_survives_the_tray_being_sigkilled_and_started_again(
    tray_home: Paths, headless: Any
) -> None:
    home = tray_home.state_dir.parent  # the bridge's MCP_TRAY_HOME too
    config = {"gateway": ANY_PORT, "mcpServers": {"echo": python_server(ECHO)}}
    first = headless(config, home)
    first_port = await wait_until(lambda: port_now(tray_home), what="the tray up", timeout=30)
    async with bridge_client(tray_home, "echo", env=BRIDGE_ENV) as client:
        assert text(await client.call_tool("echo", {"text": "one"})) == "one"

        first.proc.kill()
        first.proc.wait(timeout=10)
        headless(config, home)
        await wait_until(
            lambda: port_now(tray_home) not in (None, first_port),
            what="the new tray up",
            timeout=30,
        )

        assert text(await client.call_tool("echo", {"text": "two"})) == "two"


def port_now(paths: Paths) -> int | None:
    """The running tray's port, None while there is none."""
    with contextlib.suppress(NotRunning):
        return running_instance(paths).port
    return None


@pytest.fixture
def markers(trays: Trays, tray_home: Paths, tmp_path: Path) -> Path:
    """Echo writes ``<tool>.started`` here when a tool begins (after ``trays`` wrote its config)."""
    folder = tmp_path / "markers"
    folder.mkdir()
    tray_home.config_file.write_text(
        json.dumps(
            {
                "gateway": ANY_PORT,
                "mcpServers": {"echo": python_server(ECHO, ECHO_MARKER_DIR=str(folder))},
            }
        )
    )
    return folder


async def call_cut_by_a_restart(
    trays: Trays, client: ClientSession, markers: Path, tool: str
) -> Any:
    await client.list_tools()  # the bridge learns which tools are safe to repeat
    call = asyncio.ensure_future(client.call_tool(tool, {"seconds": 1.0}))
    await wait_until((markers / f"{tool}.started").exists, what=f"{tool} under way")
    await trays.stop()
    await trays.start()
    return await asyncio.wait_for(call, 60)


async def test_a_read_only_call_in_flight_when_the_tray_went_away_is_repeated_and_answered(
    trays: Trays, markers: Path
) -> None:
    await trays.start()
    async with bridge_client(trays.paths, "echo", env=BRIDGE_ENV) as client:
        result = await call_cut_by_a_restart(trays, client, markers, "slow_read")
        assert text(result) == "read after 1.0"


async def test_a_call_with_effects_in_flight_when_the_tray_went_away_is_answered_honestly(
    trays: Trays, markers: Path
) -> None:
    await trays.start()
    async with bridge_client(trays.paths, "echo", env=BRIDGE_ENV) as client:
        with pytest.raises(MCPError) as cut:
            await call_cut_by_a_restart(trays, client, markers, "slow_write")
        assert "mcp-tray went away while this request was in flight" in str(cut.value)
        assert "may or may not have taken effect" in str(cut.value)
        # Never a timeout, and the session goes on.
        assert "timed out" not in str(cut.value)
        assert text(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_a_2026_07_28_client_through_the_bridge_survives_a_tray_restart(
    trays: Trays,
) -> None:
    await trays.start()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", "echo"],
        env=bridge_env(trays.paths, **BRIDGE_ENV),
        cwd=str(REPO),
    )
    async with Client(params, mode="auto", cache=None) as client:
        assert str(client.session.protocol_version) == "2026-07-28"
        assert text(await client.call_tool("echo", {"text": "one"})) == "one"
        await trays.stop()
        await trays.start()
        assert text(await client.call_tool("echo", {"text": "two"})) == "two"


# Subscriptions and log levels are handshake-era things (the SDK warns of 2026-07-28).
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_handshake_era_http_session_survives_a_tray_restart(
    tray_home: Paths, tmp_path: Path, free_tcp_port: int
) -> None:
    log = tmp_path / "chatty.jsonl"
    # A direct HTTP client comes back to the configured port, as its snippet says.
    tray_home.config_file.write_text(
        json.dumps({"gateway": {"port": free_tcp_port}, "mcpServers": {"chatty": chatty(log)}})
    )
    trays = Trays(tray_home)
    seen = Seen("A")
    try:
        first = await trays.start()
        async with http_client(first, "chatty", **seen.kwargs()) as client:
            await client.subscribe_resource("chatty://a")
            await client.set_logging_level("warning")
            (session_id,) = first.gateway.connections
            saved_file = tray_home.state_dir / "http-sessions.json"

            def saved_rows() -> list[Any] | None:
                # Written a moment after the change, once for the burst it belongs to.
                with contextlib.suppress(OSError, ValueError):
                    rows: list[Any] = json.loads(saved_file.read_text())["sessions"]
                    return rows if rows and rows[-1].get("log_level") == "warning" else None
                return None

            saved = await wait_until(saved_rows, what="the session saved with its level")
            assert saved_file.stat().st_mode & 0o777 == 0o600

            await trays.stop()
            second = await trays.start()
            # The same Mcp-Session-Id goes on: no "Session not found", no new initialize.
            answered = await client.call_tool("touch", {"uri": "chatty://a"})
            assert list(second.gateway.connections) == [session_id]
            await wait_until(lambda: seen.updated() == ["chatty://a"], what="its subscription")
    finally:
        await trays.stop()

    assert text(answered) == "touched"
    (row,) = saved
    assert row["id"] == session_id and row["subscriptions"] == ["chatty://a"]
    # The new child was told what the session had set.
    events = [(e["event"], e.get("uri") or e.get("level")) for e in heard(log)]
    assert events.count(("subscribe", "chatty://a")) == 2
    assert events.count(("setLevel", "warning")) == 2
