"""The server breaker, driven by real transport failures of a real child.

Strategy: a real echo server whose `crash` tool kills the process gives
genuine "exited mid-call" failures; the cooldown runs on a FakeClock, so the
half-open probe is reached by moving the clock, not by waiting 60 s.
"""

import asyncio
from pathlib import Path

import pytest

from core.base.errors import BreakerOpen, ExitedAgain, ExitedMidCall
from core.base.snapshot import EventKind
from core.base.states import BreakerState, ServerState
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor
from tests.conftest import (
    ECHO,
    ReadyFactory,
    kill_hard,
    pid_of,
    python_server,
    wait_ready,
    wait_until,
)
from tests.support.fakes import FakeClock


def breaker_state(server: ManagedServer) -> BreakerState:
    return server.breaker.state


@pytest.fixture
async def echo(
    start_ready: ReadyFactory, fake_clock: FakeClock
) -> tuple[Supervisor, ManagedServer]:
    """The echo server, ready, on the test's fake clock."""
    return await start_ready("echo", python_server(ECHO), clock=fake_clock)


async def crash(supervisor: Supervisor) -> None:
    """One transport failure: a call whose child dies mid-call."""
    with pytest.raises(ExitedMidCall):
        await supervisor.call_tool("echo", "crash", {})


async def crash_each_generation(supervisor: Supervisor, server: ManagedServer, times: int) -> None:
    """``times`` transport failures in a row, each in the next generation once it is ready."""
    for attempt in range(times):
        await wait_ready(server, generation=attempt + 1)
        await crash(supervisor)


async def test_three_transport_failures_open_the_breaker_which_fails_fast_then_half_opens(
    echo: tuple[Supervisor, ManagedServer], fake_clock: FakeClock
) -> None:
    supervisor, server = echo
    moves: list[BreakerState] = []
    supervisor.subscribe(
        lambda event: (
            moves.append(event.snapshot.breaker)
            if event.kind is EventKind.BREAKER and event.snapshot is not None
            else None
        )
    )

    await crash_each_generation(supervisor, server, 3)
    assert breaker_state(server) is BreakerState.OPEN
    generation = server.generation

    with pytest.raises(BreakerOpen) as caught:
        await supervisor.call_tool("echo", "echo", {"text": "x"})
    message = str(caught.value)
    assert "do NOT retry" in message
    assert "60 s" in message
    assert server.generation == generation  # failing fast spawned nothing

    fake_clock.advance(server.breaker.cooldown - 10)
    with pytest.raises(BreakerOpen) as again:
        await supervisor.call_tool("echo", "echo", {"text": "x"})
    assert "10 s" in str(again.value)

    fake_clock.advance(10)
    assert breaker_state(server) is BreakerState.HALF_OPEN
    # The cooldown's end is an event like every other move of the breaker.
    await wait_until(lambda: moves[-1:] == [BreakerState.HALF_OPEN], what="the half-open event")
    await wait_ready(server, generation=4)
    result = await supervisor.call_tool("echo", "echo", {"text": "probe"})
    assert result["content"][0]["text"] == "probe"
    assert breaker_state(server) is BreakerState.CLOSED
    assert server.breaker.failures == 0
    assert moves == [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED]


async def test_a_failed_half_open_probe_reopens_the_breaker(
    echo: tuple[Supervisor, ManagedServer], fake_clock: FakeClock
) -> None:
    supervisor, server = echo
    await crash_each_generation(supervisor, server, 3)
    fake_clock.advance(server.breaker.cooldown)
    await wait_ready(server, generation=4)

    await crash(supervisor)

    assert breaker_state(server) is BreakerState.OPEN
    assert round(server.breaker.retry_in()) == 60


async def test_tool_results_with_is_error_never_count_against_the_server(
    echo: tuple[Supervisor, ManagedServer],
) -> None:
    supervisor, server = echo

    for _ in range(5):
        result = await supervisor.call_tool("echo", "fail", {"message": "file not found"})
        assert result["isError"] is True

    assert breaker_state(server) is BreakerState.CLOSED
    assert server.breaker.failures == 0
    assert server.generation == 1


async def test_a_success_between_failures_resets_the_count(
    echo: tuple[Supervisor, ManagedServer],
) -> None:
    supervisor, server = echo
    await crash_each_generation(supervisor, server, 2)
    await wait_ready(server, generation=3)
    await supervisor.call_tool("echo", "echo", {"text": "ok"})
    await crash(supervisor)

    assert server.breaker.failures == 1
    assert breaker_state(server) is BreakerState.CLOSED


async def test_a_manual_respawn_closes_an_open_breaker(
    echo: tuple[Supervisor, ManagedServer],
) -> None:
    supervisor, server = echo
    await crash_each_generation(supervisor, server, 3)
    assert breaker_state(server) is BreakerState.OPEN

    await supervisor.respawn("echo")

    # A person asked for a fresh child: no cooldown stands between it and calls.
    assert breaker_state(server) is BreakerState.CLOSED
    assert server.breaker.failures == 0
    await wait_ready(server, generation=4)
    result = await supervisor.call_tool("echo", "echo", {"text": "after respawn"})
    assert result["content"][0]["text"] == "after respawn"


async def _four_calls_cut_by_one_kill(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path, tool: str
) -> tuple[ManagedServer, list[object]]:
    markers = tmp_path / "markers"
    markers.mkdir()
    supervisor, server = await start_ready(
        "echo", python_server(ECHO, ECHO_MARKER_DIR=str(markers)), clock=fake_clock
    )
    calls = [
        asyncio.ensure_future(supervisor.call_tool("echo", tool, {"seconds": 0.5}))
        for _ in range(4)
    ]
    await wait_until((markers / f"{tool}.started").exists, what=f"{tool} to start")
    await kill_hard(pid_of(server))
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 30)
    return server, list(outcomes)


async def test_one_death_cutting_four_calls_is_one_breaker_failure(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    server, outcomes = await _four_calls_cut_by_one_kill(
        start_ready, fake_clock, tmp_path, "slow_write"
    )

    # Not safe to repeat: each call is told the truth...
    assert all(isinstance(outcome, ExitedMidCall) for outcome in outcomes), outcomes
    # ...but the server had one incident, so its breaker counts one.
    assert server.breaker.failures == 1
    assert breaker_state(server) is BreakerState.CLOSED
    assert not any(isinstance(o, ExitedMidCall) and o.contained for o in outcomes)


async def test_calls_failing_together_as_the_breaker_opens_move_it_once(
    echo: tuple[Supervisor, ManagedServer],
) -> None:
    supervisor, server = echo
    moves: list[BreakerState] = []
    supervisor.subscribe(
        lambda event: (
            moves.append(event.snapshot.breaker)
            if event.kind is EventKind.BREAKER and event.snapshot is not None
            else None
        )
    )
    await crash_each_generation(supervisor, server, 2)
    await wait_ready(server, generation=3)
    calls = [
        asyncio.ensure_future(supervisor.call_tool("echo", "slow_write", {"seconds": 5}))
        for _ in range(3)
    ]
    crashing = asyncio.ensure_future(supervisor.call_tool("echo", "crash", {}))
    outcomes = await asyncio.gather(*calls, crashing, return_exceptions=True)

    assert breaker_state(server) is BreakerState.OPEN
    assert moves == [BreakerState.OPEN]  # once, not once per call
    # These calls were inside the child that died (one of them killed it):
    # their sessions count them, breaker or not.
    assert all(isinstance(o, ExitedMidCall) and not o.contained for o in outcomes), outcomes


async def test_a_call_that_kills_the_child_respawned_for_it_counts_for_its_session_as_the_breaker_opens(
    echo: tuple[Supervisor, ManagedServer],
) -> None:
    supervisor, server = echo
    await crash_each_generation(supervisor, server, 2)
    await wait_ready(server, generation=3)
    await kill_hard(pid_of(server))
    await wait_until(lambda: server.state is ServerState.EXITED, what="the death seen")

    # The call finds the child dead, has it respawned, and kills the new one.
    with pytest.raises(ExitedAgain) as caught:
        await supervisor.call_tool("echo", "crash", {})

    assert breaker_state(server) is BreakerState.OPEN
    # It was inside the child that died (it killed it): not the server's alone.
    assert caught.value.inside
    assert not caught.value.contained


async def test_four_read_only_calls_cut_by_one_kill_are_answered_and_the_breaker_stays_closed(
    start_ready: ReadyFactory, fake_clock: FakeClock, tmp_path: Path
) -> None:
    server, outcomes = await _four_calls_cut_by_one_kill(
        start_ready, fake_clock, tmp_path, "slow_read"
    )

    assert [outcome["content"][0]["text"] for outcome in outcomes] == ["read after 0.5"] * 4  # type: ignore[index]
    assert breaker_state(server) is BreakerState.CLOSED
    assert server.breaker.failures == 0
    assert server.generation == 2
