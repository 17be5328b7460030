"""Each bridge is a client session of its own; only one that replaces a dead bridge takes its row.

Strategy: real `mcp-tray connect` bridges (subprocesses of this process, so
all of them have one parent, as a client's bridges do) under real SDK stdio
clients, in front of a real TrayService in this process, with a heartbeat of
0.2 s (TTL 3 s) so a bridge fenced by a newer one would hear it at its next
beat. "Nobody was knocked out" is judged after every row has beaten again
since the last bridge attached (read from the registry: an event, not a
sleep), and by calls answered afterwards. The dead predecessor is a bridge
SIGKILLed by the test (the raw line client, tests/support/bridge_lines.py, holds its
process).
"""

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from core.serving.service import TrayService
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.support.bridge_lines import LineClient, hello
from tests.support.gateway_support import Services, bridge_client, bridge_env, text

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the bridge tests run on POSIX")

FAST_BEATS = {"MCP_TRAY_HEARTBEAT_TTL": "3", "MCP_TRAY_HEARTBEAT_INTERVAL": "0.2"}


async def echo_tray(services: Services) -> TrayService:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    return service


async def bridge_rows(service: TrayService) -> list[dict[str, Any]]:
    assert service.workers is not None
    await service.workers.refresh()
    # The rows the tray registers itself (direct HTTP sessions) carry this process's pid.
    return [r for r in service.workers_json() if r["pid"] != os.getpid()]


async def all_beat_since(service: TrayService, seen: dict[str, str], count: int) -> bool:
    """``count`` live bridge rows, each with a heartbeat newer than the one in ``seen``."""
    rows = await bridge_rows(service)
    fresh = [
        r for r in rows if r["live"] and r["last_heartbeat_at"] != seen.get(r["worker_identity"])
    ]
    return len(fresh) == count


async def test_three_bridges_of_one_client_process_to_one_server_all_stay_and_answer(
    services: Services, tmp_path: Path
) -> None:
    service = await echo_tray(services)
    with contextlib.ExitStack() as files:
        logs = [files.enter_context((tmp_path / f"bridge-{n}.err").open("w+")) for n in range(3)]
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    bridge_client(service.paths, "echo", errlog=log, env=FAST_BEATS)
                )
                for log in logs
            ]
            for n, client in enumerate(clients):
                said = text(await client.call_tool("echo", {"text": f"hello {n}"}))
                assert said == f"hello {n}"
            rows = await bridge_rows(service)
            seen = {r["worker_identity"]: r["last_heartbeat_at"] for r in rows}
            # Three client sessions: three rows, one identity each, under one parent.
            assert len(seen) == 3
            await wait_until(
                lambda: all_beat_since(service, seen, 3), what="every bridge to beat again"
            )

            for n, client in enumerate(clients):
                said = text(await client.call_tool("echo", {"text": f"again {n}"}))
                assert said == f"again {n}"
            assert all(r["fencing_epoch"] == 1 for r in await bridge_rows(service))
            assert len(service.sessions_json()) == 3
        for log in logs:
            log.seek(0)
            assert "took over" not in log.read()


async def test_two_bridges_given_one_client_session_by_name_both_stay(
    services: Services,
) -> None:
    service = await echo_tray(services)
    env = {"MCP_TRAY_CLIENT": "cursor", "MCP_TRAY_CLIENT_SESSION": "shared-sess", **FAST_BEATS}
    async with bridge_client(service.paths, "echo", env=env) as first:
        await first.call_tool("echo", {"text": "one"})
        async with bridge_client(service.paths, "echo", env=env) as second:
            await second.call_tool("echo", {"text": "two"})
            rows = await bridge_rows(service)
            seen = {r["worker_identity"]: r["last_heartbeat_at"] for r in rows}
            assert len(seen) == 2
            await wait_until(lambda: all_beat_since(service, seen, 2), what="both to beat again")
            assert text(await first.call_tool("echo", {"text": "first"})) == "first"
            assert text(await second.call_tool("echo", {"text": "second"})) == "second"


async def test_a_bridge_that_replaces_a_killed_one_takes_its_row_over(
    services: Services,
) -> None:
    service = await echo_tray(services)
    env = bridge_env(
        service.paths,
        MCP_TRAY_CLIENT="cursor",
        MCP_TRAY_CLIENT_SESSION="restarted-sess",
        **FAST_BEATS,
    )
    async with LineClient.start(env, "echo") as dead:
        assert "result" in await dead.ask(hello(1))
        (row,) = await bridge_rows(service)
        assert row["pid"] == dead.proc.pid
        dead.proc.kill()
        await dead.exit_code()

    async with LineClient.start(env, "echo") as successor:
        assert "result" in await successor.ask(hello(1))
        (taken,) = await bridge_rows(service)
        # The same worker, now held by the new process, one epoch on.
        assert taken["worker_identity"] == row["worker_identity"]
        assert taken["pid"] == successor.proc.pid
        assert taken["fencing_epoch"] == row["fencing_epoch"] + 1
        assert taken["live"]
