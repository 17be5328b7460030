"""The stop contract and the orphan sweep, against real process groups.

Strategy: servers from tests/servers/ fork grandchildren into their process
group (as npx and uvx wrappers do), or out of it (``setsid``, ``env -i``,
a double fork); after a stop we look the group up with psutil and require
it to be empty and the grandchild gone. Leftovers of a "crashed" tray are
made by spawning tagged processes whose owner id names a dead process.
Every test runs under the native and the portable backend sets; the one
that needs the Linux subreaper runs a real headless tray.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.base.envvars import OWNER_ENV
from core.base.states import ServerState
from core.platform.backends import Backends
from core.settings.paths import Paths
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

assert sys.platform != "win32", "process groups and signals: POSIX only (conftest.POSIX_ONLY)"

from core.platform.trees import group_members  # noqa: E402 - POSIX only, as this module

pytestmark = pytest.mark.usefixtures("backend")


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


async def test_a_grandchild_that_left_the_group_is_ended_with_its_server(
    start_ready: ReadyFactory, tmp_path: Path, backend: Backends
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
        if backend.name == "native":
            assert f"ending processes that left pgid {leader}" in server.log_path.read_text()
        assert sibling.poll() is None
    finally:
        sibling.kill()
        sibling.wait()


async def test_a_setsid_env_i_grandchild_that_ignores_sigterm_is_gone_after_a_clean_stop(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    supervisor, server, grandchild = await start_group(
        start_ready, tmp_path, GRANDCHILD_SCRUB="1", GRANDCHILD_STUBBORN="1"
    )
    leader = pid_of(server)
    # Neither the group nor the tag names it: only its parent link does, while it lasts.
    assert os.getpgid(grandchild) != leader
    assert OWNER_ENV not in psutil.Process(grandchild).environ()

    await supervisor.stop_server("gc")

    assert server.state is ServerState.STOPPED
    assert not alive(grandchild)


async def test_a_grandchild_orphaned_by_its_servers_crash_is_ended_by_its_tag(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    _, server, grandchild = await start_group(
        start_ready, tmp_path, GRANDCHILD_SETSID="1", GRANDCHILD_STUBBORN="1"
    )
    await wait_until(
        lambda: OWNER_ENV in psutil.Process(grandchild).environ(), what="the tag visible"
    )
    os.kill(pid_of(server), 9)  # the parent link is gone; the tag is all that is left
    await wait_ready(server, generation=2)

    assert not alive(grandchild)


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


@pytest.mark.skipif(sys.platform != "linux", reason="the subreaper is Linux's (docs/platforms.md)")
def test_a_detached_setsid_env_i_grandchild_is_gone_after_the_trays_clean_stop(
    headless: Any, tmp_path: Path, backend: Backends
) -> None:
    """No group, tag or parent names it; the tray, its subreaper, adopted it."""
    pid_file = tmp_path / "gc.pid"
    entry = python_server(
        GRANDCHILD,
        GRANDCHILD_PID_FILE=str(pid_file),
        GRANDCHILD_SCRUB="1",
        GRANDCHILD_DETACH="1",
        GRANDCHILD_STUBBORN="1",
    )
    tray = headless({"mcpServers": {"gc": entry}})
    tray.wait_state("gc", "ready")
    grandchild = int(pid_file.read_text())
    try:
        orphan = psutil.Process(grandchild)
        assert OWNER_ENV not in orphan.environ()
        if backend.name == "portable":
            # No subreaper in the portable set: the orphan went to init, out of reach.
            assert orphan.ppid() != tray.proc.pid
            return
        assert orphan.ppid() == tray.proc.pid  # adopted by the tray

        tray.proc.send_signal(signal.SIGTERM)
        assert tray.proc.wait(timeout=20) == 0

        wait_until_sync(lambda: not alive(grandchild), timeout=5, what="the escapee to end")
    finally:
        if alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
