"""On-demand servers: asleep with their kept catalog, woken by a request, asleep again when idle.

Strategy: real children (tests/servers/echo.py, a 2026-07-28 server to mcp-tray's
probe, and legacy_2024.py, a handshake-era one) under a real Supervisor or a real
TrayService in this process, asked through real SDK clients over HTTP. A first
tray learns a server's catalog and keeps it on disk; a second tray on the same
home must answer lists from it with no child started. The idle timer runs on a
FakeClock: a test moves the clock past ``idle_stop_s`` and looks at what the
server did, never sleeps to reach it.
"""

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.base.states import ServerState
from core.serving.calls.translate import Parking
from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from core.supervision.catalog import Catalog
from core.supervision.catalog_store import (
    CATALOGS_DIR,
    catalog_file,
    catalog_key,
    load_catalog,
    save_catalog,
)
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer
from tests.conftest import (
    ECHO,
    SupervisorFactory,
    process_gone,
    python_server,
    wait_ready,
    wait_state,
    wait_until,
)
from tests.support.cli_support import cli
from tests.support.fakes import FakeClock
from tests.support.gateway_support import Services, http_client, text
from tests.support.isolation_support import LEGACY

S = ServerState
IDLE = 30.0

#: (entry script, a tool it has, that tool's arguments, the era mcp-tray speaks to it)
ERAS = {
    "2026-07-28": (ECHO, "echo", {"text": "awake"}),
    "handshake": (LEGACY, "hello", {}),
}


def on_demand(script: Path, **extra: Any) -> dict[str, Any]:
    return {**python_server(script), "start": "on-demand", "idle_stop_s": IDLE, **extra}


async def settle() -> None:
    """Let the server's tasks run what a clock move made due (a few loop turns, no waiting
    for a window)."""
    for _ in range(20):
        await asyncio.sleep(0)


def awake(server: ManagedServer) -> bool:
    """A child is up (a health ping the fake clock timed out may have called it degraded)."""
    return server.state in (S.READY, S.DEGRADED) and server.pid is not None


async def falls_asleep(server: ManagedServer, clock: FakeClock, seconds: float) -> None:
    """Move the clock ``seconds``; the server goes to sleep and its child is gone (the stop
    contract's graces run on this clock)."""
    pid = server.pid
    assert pid is not None
    async with clock.ticking():
        clock.advance(seconds)
        await wait_state(server, S.SLEEPING)
        await wait_until(lambda: process_gone(pid) and server.pid is None, what="child gone")


async def learn_and_close(services: Services, name: str, entry: dict[str, Any]) -> None:
    """A first tray starts the on-demand server once, which keeps its catalog; then it quits."""
    service = await services.start({name: entry})
    await wait_ready(service.supervisor.server(name))
    await service.aclose()
    services.started.remove(service)


async def second_tray(services: Services, name: str, entry: dict[str, Any]) -> TrayService:
    service = await services.start({name: entry}, profiles={"lean": {"servers": [name]}})
    await wait_state(service.supervisor.server(name), S.SLEEPING)
    return service


@pytest.mark.parametrize("era", list(ERAS))
async def test_after_a_tray_restart_a_sleeping_server_lists_from_its_catalog_and_a_call_wakes_it(
    services: Services, era: str
) -> None:
    script, tool, arguments = ERAS[era]
    entry = on_demand(script)
    await learn_and_close(services, "lazy", entry)

    service = await second_tray(services, "lazy", entry)
    server = service.supervisor.server("lazy")
    assert (server.pid, server.generation) == (None, 0)
    for target, name in (("lazy", tool), ("@all", f"lazy__{tool}"), ("@lean", f"lazy__{tool}")):
        async with http_client(service, target) as client:
            listed = await client.list_tools()
        assert name in [t.name for t in listed.tools], target
    # Listed three ways, and still no child: the lists came from the kept catalog.
    assert (server.state, server.pid, server.generation) == (S.SLEEPING, None, 0)
    assert server.catalog.version is not None
    assert server.catalog.modern is (era == "2026-07-28")

    async with http_client(service, "lazy") as client:
        result = await client.call_tool(tool, arguments)

    assert not result.is_error, text(result)
    assert (era != "2026-07-28") or text(result) == "awake"
    assert server.state is S.READY
    assert server.generation == 1
    assert server.pid is not None


async def test_with_no_catalog_yet_it_starts_once_to_learn_it_then_sleeps_after_its_idle_time(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock, tray_home: Paths
) -> None:
    supervisor = await make_supervisor({"lazy": on_demand(ECHO)}, clock=fake_clock)
    server = supervisor.server("lazy")
    await wait_ready(server)
    pid = server.pid
    assert pid is not None
    kept = load_catalog(tray_home.state_dir / CATALOGS_DIR, server.config)
    assert kept.catalog is not None
    assert "echo" in [t["name"] for t in kept.catalog.listed_tools]

    fake_clock.advance(IDLE - 1)
    await settle()
    assert awake(server)

    await falls_asleep(server, fake_clock, 1)
    assert "nothing needed it for 30 s" in server.log_path.read_text()

    result = await supervisor.call_tool("lazy", "whoami", {})
    assert result["isError"] is False
    assert server.generation == 2
    assert server.state is S.READY
    assert server.respawn_requests == 0  # woken, not respawned: no breaker, no budget


async def test_a_call_in_flight_keeps_it_awake_and_the_idle_time_counts_from_its_end(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    entry = on_demand(ECHO, env={"ECHO_MARKER_DIR": str(tmp_path)})
    supervisor = await make_supervisor({"lazy": entry}, clock=fake_clock)
    server = supervisor.server("lazy")
    await wait_ready(server)

    call = asyncio.ensure_future(supervisor.call_tool("lazy", "slow_read", {"seconds": 1.0}))
    await wait_until(lambda: (tmp_path / "slow_read.started").exists(), what="the call to start")
    fake_clock.advance(IDLE * 3)
    await settle()
    assert awake(server)
    assert server.idle.needed_by() == "a call is in flight"

    assert (await call)["isError"] is False
    fake_clock.advance(IDLE - 1)
    await settle()
    assert awake(server)
    await falls_asleep(server, fake_clock, 1)


async def test_a_resource_subscription_keeps_it_awake_until_it_is_dropped(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"lazy": on_demand(ECHO)}, clock=fake_clock)
    server = supervisor.server("lazy")
    await wait_ready(server)

    await server.watch("note://hello", Caller())
    fake_clock.advance(IDLE * 3)
    await settle()
    assert awake(server)
    assert server.idle.needed_by() == "a client is subscribed to its resources"

    await server.unwatch("note://hello", Caller())
    fake_clock.advance(IDLE - 1)
    await settle()
    assert awake(server)
    await falls_asleep(server, fake_clock, 1)


async def test_a_parked_call_keeps_a_handshake_era_child_awake_while_it_waits_for_its_client(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"old": on_demand(LEGACY)}, clock=fake_clock)
    server = supervisor.server("old")
    await wait_ready(server)
    parking = Parking()

    # A 2026-07-28 client's call, parked: the child asked mid-call, the client holds the question.
    asked = await parking.through(
        server,
        "s1",
        "tools/call",
        {"name": "confirm", "arguments": {"question": "go?"}},
        {"elicitation": {}},
        Caller(session="s1"),
        None,
    )
    assert asked["resultType"] == "input_required"
    fake_clock.advance(IDLE * 3)
    await settle()
    assert awake(server)
    assert server.idle.needed_by() is not None

    parking.aclose()  # the client went away: the parked call goes with it
    await wait_until(lambda: server.idle.needed_by() is None, what="the parked call to end")
    await falls_asleep(server, fake_clock, IDLE)


async def test_a_changed_entry_finds_no_catalog_and_starts_to_learn_again(
    services: Services, tray_home: Paths
) -> None:
    entry = on_demand(ECHO)
    await learn_and_close(services, "lazy", entry)
    folder = tray_home.state_dir / CATALOGS_DIR
    assert load_catalog(folder, load_config(tray_home.config_file).servers["lazy"]).catalog

    changed = {**entry, "env": {"ECHO_EXTRA_TOOL_FILE": str(tray_home.state_dir / "extra")}}
    service = await services.start({"lazy": changed})
    server = service.supervisor.server("lazy")

    # Not asleep on the old catalog: started, and its catalog kept under the new key.
    await wait_ready(server)
    assert server.generation == 1
    assert "its entry changed since" in server.log_path.read_text()
    assert load_catalog(folder, server.config).catalog is not None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("not json", "invalid JSON"),
        ('{"format": 1, "key": "KEY", "catalog": {"modern": "yes"}}', "catalog.modern"),
        ('{"format": 99}', "not a catalog of format 1"),
    ],
)
def test_a_damaged_catalog_file_is_no_catalog_and_says_why(
    tmp_path: Path, content: str, why: str
) -> None:
    config = load_config(_config_file(tmp_path)).servers["lazy"]
    path = catalog_file(tmp_path, "lazy")
    path.write_text(content.replace("KEY", catalog_key(config)))

    loaded = load_catalog(tmp_path, config)

    assert loaded.catalog is None
    assert why in loaded.why_not and str(path) in loaded.why_not


def test_a_link_where_the_catalog_should_be_is_refused_not_followed(tmp_path: Path) -> None:
    config = load_config(_config_file(tmp_path)).servers["lazy"]
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    os.symlink(target, catalog_file(tmp_path, "lazy"))

    loaded = load_catalog(tmp_path, config)

    assert loaded.catalog is None
    assert "symbolic link" in loaded.why_not


def test_the_kept_catalog_holds_env_names_never_their_values(
    tmp_path: Path, tray_home: Paths
) -> None:
    config = load_config(_config_file(tmp_path, env={"TOKEN": "s3cret-value"})).servers["lazy"]
    save_catalog(tmp_path, config, Catalog())

    written = catalog_file(tmp_path, "lazy").read_text()
    assert "s3cret-value" not in written
    assert oct(catalog_file(tmp_path, "lazy").stat().st_mode & 0o777) == "0o600"


def _config_file(folder: Path, **extra: Any) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps({"mcpServers": {"lazy": on_demand(ECHO, **extra)}}))
    return path


def test_mcp_tray_tools_and_status_answer_for_a_sleeping_server_after_a_tray_restart(
    headless: Any,
) -> None:
    config = {"mcpServers": {"lazy": on_demand(ECHO)}}
    first = headless(config)
    first.wait_state("lazy", "ready")
    first.stop()

    second = headless(config, home=first.home)
    row = second.wait_state("lazy", "sleeping")
    result = cli(second.home, "tools", "lazy", "--json")

    assert result.returncode == 0, result.stderr
    assert "echo" in [tool["name"] for tool in json.loads(result.stdout)["tools"]]
    assert (row["pid"], row["generation"]) == (None, 0)
    status = cli(second.home, "status")
    assert "sleeping" in status.stdout
    # Still asleep: listing its tools started nothing.
    assert second.wait_state("lazy", "sleeping")["generation"] == 0
