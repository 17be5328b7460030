"""Lifecycle holes of a whole tray: what a config edit, a shutdown or a crash loop leaves behind.

Strategy: a real TrayService in-process (its gateway, its config watcher)
with real SDK clients over HTTP, and a real `mcp-tray run --headless`
subprocess whose console output is read for what asyncio prints about
exceptions nobody looked at.
"""

import json
import os
from pathlib import Path
from typing import Any

import psutil

from core.settings.paths import Paths
from tests.conftest import (
    CRASH_AT_START,
    ECHO,
    process_alive,
    python_server,
    wait_ready,
    wait_until,
)
from tests.support.cli_support import api_status, cli
from tests.support.gateway_support import Services, http_client, text


def save(paths: Paths, servers: dict[str, object]) -> None:
    tmp = paths.config_file.with_name(".config.json.tmp")
    tmp.write_text(json.dumps({"mcpServers": servers}))
    os.replace(tmp, paths.config_file)


async def test_a_server_removed_and_added_back_is_reachable_through_the_gateway(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    watcher = service.watcher
    async with http_client(service, "echo") as before:
        assert text(await before.call_tool("echo", {"text": "first"})) == "first"

        save(service.paths, {})
        await wait_until(lambda: "echo" not in service.supervisor.servers, what="echo removed")
        save(service.paths, {"echo": python_server(ECHO)})
        await wait_until(lambda: watcher.reloads >= 2, what="echo added back")
        await wait_ready(service.supervisor.server("echo"))

        # The session opened before the edit reaches the new server...
        assert text(await before.call_tool("echo", {"text": "again"})) == "again"
    # ...and so does a new one.
    async with http_client(service, "echo") as after:
        assert text(await after.call_tool("echo", {"text": "fresh"})) == "fresh"


async def test_shutdown_stops_per_session_children_of_sessions_still_open(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    async with http_client(service, "echo") as a, http_client(service, "echo") as b:
        pids = [int(text(await s.call_tool("whoami", {}))) for s in (a, b)]
        shared = service.supervisor.server("echo").pid
        assert len(service.supervisor.private) == 2

        # The tray quits while both clients are still connected.
        await service.aclose()
        services.started.remove(service)

        assert [pid for pid in [*pids, shared] if pid and process_alive(pid)] == []
        assert service.supervisor.private == {}


def test_no_task_exception_goes_unretrieved_in_the_trays_output(
    headless: Any, tmp_path: Path
) -> None:
    """Crash-looping servers and a server killed mid-call print nothing asyncio had to guess at."""
    tray = headless(
        {
            "mcpServers": {
                "crashing": python_server(CRASH_AT_START),
                "missing": {"command": str(tmp_path / "no-such-program")},
                "echo": python_server(ECHO),
            }
        }
    )

    def servers() -> dict[str, dict[str, Any]]:
        status = api_status(tray.paths) or {"servers": []}
        return {s["name"]: s for s in status["servers"]}

    def crash_looped() -> bool:
        now = servers()
        return (
            bool(now)
            # Three children died during their handshake (one line each, before the fix).
            and int(now["crashing"]["generation"]) >= 3
            and now["missing"]["state"] == "parked"
            and now["echo"]["state"] == "ready"
        )

    tray.wait_for(crash_looped, "a crash loop under way and echo ready", timeout=60)
    # A call whose child dies under it, twice (the second time, a new child).
    for generation in (2, 3):
        cli(tray.home, "call", "echo", "crash")
        tray.wait_state("echo", "ready", generation=generation)
    stderr = tray.stop()

    assert tray.proc.returncode == 0, stderr
    assert "never retrieved" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid != tray.proc.pid]
