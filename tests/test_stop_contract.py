"""The stop contract and the orphan sweep, against real process groups.

Strategy: servers from tests/servers/ fork grandchildren into their process
group (as npx and uvx wrappers do); after a stop we look the group up with
psutil and require it to be empty. Leftovers of a "crashed" tray are made by
spawning tagged processes whose owner id names a dead process.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from core.base.envvars import OWNER_ENV
from core.base.states import ServerState
from core.settings.paths import Paths
from core.supervision.child import group_members
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor
from core.supervision.sweep import find_leftovers, new_owner_id, owner_alive, sweep_leftovers
from tests.conftest import (
    GRANDCHILD,
    ReadyFactory,
    pid_of,
    python_server,
    wait_ready,
    wait_until,
    wait_until_sync,
)
from tests.conftest import process_alive as alive


async def start_group(
    start_ready: ReadyFactory, tmp_path: Path, **env: str
) -> tuple[Supervisor, ManagedServer, int]:
    """The grandchild server (``env`` added to its own), ready, and its grandchild's pid."""
    pid_file = tmp_path / "grandchild.pid"
    entry = python_server(GRANDCHILD, GRANDCHILD_PID_FILE=str(pid_file), **env)
    supervisor, server = await start_ready("gc", entry)
    return supervisor, server, int(pid_file.read_text())


async def test_stop_leaves_no_process_of_the_group_even_when_the_leader_exits_cleanly(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    supervisor, server, grandchild = await start_group(start_ready, tmp_path)
    leader = pid_of(server)
    assert alive(grandchild)
    assert os.getpgid(grandchild) == leader

    await supervisor.stop_server("gc")

    assert server.state is ServerState.STOPPED
    assert not alive(grandchild)
    assert not alive(leader)
    assert group_members(leader) == []


async def test_a_grandchild_that_ignores_sigterm_is_killed_by_the_escalation(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    supervisor, server, grandchild = await start_group(
        start_ready, tmp_path, GRANDCHILD_STUBBORN="1"
    )
    leader = pid_of(server)

    started = time.monotonic()
    await supervisor.stop_server("gc")
    took = time.monotonic() - started

    assert not alive(grandchild)
    assert group_members(leader) == []
    # stdin grace ran out? no: the leader exits on EOF; SIGTERM grace did.
    assert took >= server.timing.stop.sigterm_grace
    log = server.log_path.read_text()
    assert "sending SIGKILL" in log


async def test_a_crashed_childs_grandchildren_are_ended_before_the_respawn(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    _, server, grandchild = await start_group(start_ready, tmp_path)
    leader = pid_of(server)

    os.kill(leader, 9)
    await wait_ready(server, generation=2)

    assert not alive(grandchild)
    assert group_members(leader) == []


async def test_a_grandchild_that_left_the_group_is_ended_by_its_tag(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    supervisor, server, grandchild = await start_group(
        start_ready, tmp_path, GRANDCHILD_SETSID="1", GRANDCHILD_STUBBORN="1"
    )
    leader = pid_of(server)
    assert os.getpgid(grandchild) != leader  # out of reach of killpg
    # Another child of the same tray, with its own tag: not this stop's business.
    sibling = spawn_tagged(f"{supervisor.owner}/another-child")
    try:
        await supervisor.stop_server("gc")

        assert not alive(grandchild)
        assert "left pgid" in server.log_path.read_text()
        assert sibling.poll() is None
    finally:
        sibling.kill()
        sibling.wait()


def spawn_tagged(owner: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, **{OWNER_ENV: owner})
    return subprocess.Popen(
        [sys.executable, "-c", "import signal; signal.pause()"], env=env, start_new_session=True
    )


def test_the_sweep_ends_leftovers_of_a_dead_owner_and_spares_a_live_ones() -> None:
    dead_owner = "999999-1-deadbeef"
    assert not owner_alive(dead_owner)
    live_owner = new_owner_id()
    assert owner_alive(live_owner)
    leftover = spawn_tagged(dead_owner)
    sibling = spawn_tagged(live_owner)
    try:
        # exec must finish before the tag is readable in /proc.
        wait_until_sync(
            lambda: leftover.pid in {item.pid for item in find_leftovers(own_owner="x")},
            what="the leftover's tag in /proc",
        )
        found = {item.pid for item in find_leftovers(own_owner="someone-else")}
        assert leftover.pid in found
        assert sibling.pid not in found

        swept = sweep_leftovers(own_owner="someone-else")

        assert leftover.pid in {item.pid for item in swept}
        assert leftover.wait(timeout=5) is not None
        assert sibling.poll() is None
    finally:
        for proc in (leftover, sibling):
            proc.kill()
            proc.wait()


async def test_the_supervisor_sweeps_at_start_up(tray_home: Paths) -> None:
    leftover = spawn_tagged("999998-1-cafef00d")
    try:
        await wait_until(
            lambda: OWNER_ENV in psutil.Process(leftover.pid).environ(), what="tag visible"
        )
        from core.settings.config import load_config

        tray_home.config_file.write_text('{"mcpServers": {}}')
        supervisor = Supervisor(load_config(tray_home.config_file), tray_home)
        await supervisor.start()
        try:
            assert leftover.pid in {item.pid for item in supervisor.swept}
            await wait_until(lambda: leftover.poll() is not None, what="leftover to end")
        finally:
            await supervisor.aclose()
    finally:
        leftover.kill()
        leftover.wait()
