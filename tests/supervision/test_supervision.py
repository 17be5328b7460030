"""Supervision against real children: ready, respawn-and-retry, mid-call races, parking.

Strategy: every test runs real stdio MCP servers from tests/servers/ under a
real Supervisor and talks to them through the real call path. Budgets,
backoffs and respawn windows run on a FakeClock where a test needs to reach
them, so nothing sleeps to reach a window; process deaths are real kill -9s.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.base.errors import ExitedAgain, ExitedMidCall, ServerParked, SubprocessExited
from core.base.states import ServerState
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor
from tests.conftest import (
    CRASH_AT_START,
    ECHO,
    ReadyFactory,
    SupervisorFactory,
    kill_hard,
    pid_of,
    python_server,
    wait_ready,
    wait_state,
    wait_until,
)
from tests.support.fakes import FakeClock

#: Every test here runs under the native and the portable backend sets (conftest).
pytestmark = pytest.mark.usefixtures("backend")


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def test_a_healthy_server_becomes_ready_and_answers_a_call(
    start_ready: ReadyFactory,
) -> None:
    supervisor, server = await start_ready("echo", python_server(ECHO))
    assert server.pid is not None
    assert "echo" in server.catalog.tools

    result = await supervisor.call_tool("echo", "echo", {"text": "hello"})

    assert text_of(result) == "hello"
    assert result["isError"] is False
    assert server.generation == 1


async def test_a_call_after_kill_9_gets_its_result_through_exactly_one_respawn(
    start_ready: ReadyFactory, fake_clock: FakeClock
) -> None:
    supervisor, server = await start_ready("echo", python_server(ECHO), clock=fake_clock)
    old_pid = pid_of(server)

    await kill_hard(old_pid)
    result = await supervisor.call_tool("echo", "whoami", {})

    assert result["isError"] is False
    assert int(text_of(result)) not in (old_pid, 0)
    assert server.generation == 2
    assert server.respawn_requests == 1
    assert server.state is ServerState.READY


@dataclass
class CutCall:
    """A call whose child was killed mid-call, once its tool had started."""

    supervisor: Supervisor
    server: ManagedServer
    #: The child the call was cut in.
    pid: int
    call: asyncio.Future[dict[str, Any]]
    #: The tool's ``<tool>.started`` marker, holding the pid it ran in.
    marker: Path


async def cut_call(
    start_ready: ReadyFactory,
    clock: FakeClock,
    tmp_path: Path,
    tool: str,
    seconds: float,
    *,
    clear_marker: bool = True,
    **config: Any,
) -> CutCall:
    """Echo (with a marker dir, and ``config`` in its entry) ready on ``clock``, a
    call to ``tool`` in it, and kill -9 once the tool has started.

    The marker is cleared before the kill (unless told not to), so one found
    later was written by a replay.
    """
    markers = tmp_path / "markers"
    markers.mkdir()
    entry = python_server(ECHO, ECHO_MARKER_DIR=str(markers)) | config
    supervisor, server = await start_ready("echo", entry, clock=clock)
    pid = pid_of(server)
    call = asyncio.ensure_future(supervisor.call_tool("echo", tool, {"seconds": seconds}))
    marker = markers / f"{tool}.started"
    await wait_until(marker.exists, what=f"{tool} to start")
    if clear_marker:
        marker.unlink()
    await kill_hard(pid)
    return CutCall(supervisor, server, pid, call, marker)


async def test_a_read_only_call_cut_by_the_childs_death_is_retried_once_and_answered(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    cut = await cut_call(start_ready, fake_clock, tmp_path, "slow_read", 0.3)
    result = await asyncio.wait_for(cut.call, 20)

    assert text_of(result) == "read after 0.3"
    assert cut.server.generation == 2
    assert cut.server.respawn_requests == 1
    # The replay reached the new child.
    assert cut.marker.read_text() != str(cut.pid)


async def test_a_call_without_safety_hints_cut_by_the_childs_death_is_not_replayed(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    cut = await cut_call(start_ready, fake_clock, tmp_path, "slow_write", 5)
    with pytest.raises(ExitedMidCall) as caught:
        await asyncio.wait_for(cut.call, 10)

    message = str(caught.value)
    assert "exited mid-call" in message
    assert "may or may not have taken effect" in message
    assert "timed out" not in message
    # One respawn was asked for, and the call was never replayed on the new child.
    assert cut.server.respawn_requests == 1
    await wait_ready(cut.server, generation=2)
    # A round trip through the new child: it has read everything sent before.
    assert text_of(await cut.supervisor.call_tool("echo", "echo", {"text": "after"})) == "after"
    assert not cut.marker.exists()


async def test_retry_always_in_the_config_replays_a_call_without_hints(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    cut = await cut_call(
        start_ready, fake_clock, tmp_path, "slow_write", 0.2, clear_marker=False, retry="always"
    )

    assert text_of(await asyncio.wait_for(cut.call, 20)) == "wrote after 0.2"


async def kill_echo_whose_respawn_will(
    start_ready: ReadyFactory, clock: FakeClock, tmp_path: Path, on_restart: str
) -> tuple[Supervisor, ManagedServer]:
    """Echo ready on ``clock``, then kill -9'd: its respawn will ``on_restart`` (hang, crash)."""
    entry = python_server(ECHO, ECHO_STATE_FILE=str(tmp_path / "state"), ECHO_ON_RESTART=on_restart)
    supervisor, server = await start_ready("echo", entry, clock=clock)
    await kill_hard(pid_of(server))
    return supervisor, server


async def test_no_fresh_session_in_the_window_is_reported_as_an_exit_never_a_timeout(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    supervisor, server = await kill_echo_whose_respawn_will(
        start_ready, fake_clock, tmp_path, "hang"
    )

    call = asyncio.ensure_future(supervisor.call_tool("echo", "echo", {"text": "x"}, timeout=300))
    # The respawned child hangs before its handshake: let the window run out.
    await wait_until(lambda: server.generation == 2 and server.pid is not None, what="the respawn")
    await wait_until(
        lambda: fake_clock.sleepers >= 2, what="the call and the start to wait on the clock"
    )
    fake_clock.advance(server.timing.respawn_wait)
    with pytest.raises(SubprocessExited) as caught:
        await asyncio.wait_for(call, 10)

    # The message names the log file under tmp_path, whose name is pytest's own and may
    # hold any number ("pytest-300" on a machine's 300th run): judged without it.
    message = str(caught.value).replace(str(tmp_path), "<tmp>")
    assert "exited" in message
    assert "not a timeout" in message
    assert "15 s" in message
    for forbidden in ("timed out", "TimeoutError", "300"):
        assert forbidden not in message
    assert server.respawn_requests == 1


async def test_a_child_that_dies_again_after_the_respawn_fails_the_call_without_a_loop(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    supervisor, server = await kill_echo_whose_respawn_will(
        start_ready, fake_clock, tmp_path, "crash"
    )

    with pytest.raises(ExitedAgain) as caught:
        await asyncio.wait_for(supervisor.call_tool("echo", "echo", {"text": "x"}), 20)

    message = str(caught.value)
    assert "exited again" in message
    assert "do NOT retry" in message
    assert str(server.log_path) in message
    assert server.respawn_requests == 1
    assert server.generation == 2
    # Nothing more is spawned on behalf of the call: the backoff waits on the clock.
    await wait_until(
        lambda: server.state is ServerState.EXITED and fake_clock.sleepers >= 1,
        what="the run loop to wait out its backoff",
    )
    assert server.generation == 2


async def advance_backoffs_until(
    clock: FakeClock, server: ManagedServer, predicate: Callable[[], bool]
) -> None:
    """Drive a server through its backoffs: whenever it waits out one, end it.

    The clock moves only while the server sits in ``exited``, so no run
    looks longer (and so proven) than it really was.
    """

    def end_a_backoff() -> None:
        if server.state is ServerState.EXITED and clock.sleepers:
            clock.advance(server.backoff.cap * 2)

    await wait_until(
        predicate,
        timeout=30,
        what=f"the target; server is {server.state.value} gen {server.generation}",
        between=end_a_backoff,
    )


async def test_a_server_that_exits_at_start_is_parked_after_the_budget_and_stays_down(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"bad": python_server(CRASH_AT_START)}, clock=fake_clock)
    server = supervisor.server("bad")

    await advance_backoffs_until(fake_clock, server, lambda: server.state is ServerState.PARKED)

    assert server.generation == 6
    assert server.parked_reason is not None
    assert "6 runs in a row" in server.parked_reason
    assert "exit code 1" in server.parked_reason
    # Parked: nothing more spawns, short of the slow self-probe.
    fake_clock.advance(server.timing.self_probe - 1)
    # The only thing scheduled is the self-probe, a second away on the clock.
    assert fake_clock.next_deadline == fake_clock.monotonic() + 1
    assert server.generation == 6
    assert server.state is ServerState.PARKED
    with pytest.raises(ServerParked) as caught:
        await supervisor.call_tool("bad", "anything", {})
    assert "mcp-tray respawn bad" in str(caught.value)
    assert server.generation == 6


async def test_respawn_wakes_a_parked_server_with_a_budget_of_one(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("1")
    supervisor = await make_supervisor(
        {"echo": python_server(ECHO, ECHO_FAIL_WHILE=str(broken))}, clock=fake_clock
    )
    server = supervisor.server("echo")
    await advance_backoffs_until(fake_clock, server, lambda: server.state is ServerState.PARKED)
    assert server.generation == 6

    # Still broken: respawn tries once and re-parks on the first drop.
    await supervisor.respawn("echo")
    await wait_until(
        lambda: server.generation == 7 and server.state is ServerState.PARKED, what="re-park"
    )

    broken.unlink()
    await supervisor.respawn("echo")
    await wait_ready(server, generation=8)
    result = await supervisor.call_tool("echo", "echo", {"text": "back"})
    assert text_of(result) == "back"
    assert server.budget.unproven == 0


async def test_a_command_that_does_not_exist_parks_at_once_naming_it(
    make_supervisor: SupervisorFactory,
) -> None:
    supervisor = await make_supervisor(
        {"ghost": {"command": "mcp-tray-no-such-command", "args": []}}
    )
    server = supervisor.server("ghost")

    await wait_state(server, ServerState.PARKED)

    assert server.generation == 1
    assert "mcp-tray-no-such-command" in (server.parked_reason or "")
    assert "not found" in (server.parked_reason or "")


async def test_a_missing_working_folder_parks_at_once_naming_it(
    make_supervisor: SupervisorFactory, tmp_path: Path
) -> None:
    entry = python_server(ECHO) | {"cwd": str(tmp_path / "nowhere")}
    supervisor = await make_supervisor({"echo": entry})
    server = supervisor.server("echo")

    await wait_state(server, ServerState.PARKED)

    assert str(tmp_path / "nowhere") in (server.parked_reason or "")


async def test_a_living_child_that_stops_answering_pings_is_degraded_then_ready_again(
    start_ready: ReadyFactory, fake_clock: FakeClock
) -> None:
    _, server = await start_ready("echo", python_server(ECHO), clock=fake_clock)
    pid = pid_of(server)
    keepalive = server.config.keepalive_seconds

    psutil.Process(pid).suspend()  # alive, but silent (SIGSTOP; SuspendThread on Windows)
    try:
        await wait_until(lambda: fake_clock.sleepers >= 1, what="the health loop to wait")
        fake_clock.advance(keepalive)  # the next ping goes out...
        # The health loop's sleep ended; the ping's own timer now waits.
        await wait_until(lambda: fake_clock.sleepers >= 1, what="the ping to wait for its answer")
        fake_clock.advance(server.timing.ping_timeout)  # ...and gets none
        await wait_state(server, ServerState.DEGRADED)
        assert server.pid == pid and server.budget.unproven == 0  # up a keepalive: proven
    finally:
        psutil.Process(pid).resume()
    await wait_until(lambda: fake_clock.sleepers >= 1, what="the health loop to wait again")
    fake_clock.advance(keepalive)
    await wait_state(server, ServerState.READY)
    assert server.generation == 1
