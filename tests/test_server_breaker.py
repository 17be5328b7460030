"""The server breaker, driven by real transport failures of a real child.

Strategy: a real echo server whose `crash` tool kills the process gives
genuine "exited mid-call" failures; the cooldown runs on a FakeClock, so the
half-open probe is reached by moving the clock, not by waiting 60 s.
"""

import pytest

from core.base.errors import BreakerOpen, ExitedMidCall
from core.base.snapshot import EventKind
from core.base.states import BreakerState
from core.supervision.server import ManagedServer
from tests.conftest import ECHO, SupervisorFactory, python_server, wait_ready, wait_until
from tests.fakes import FakeClock


def breaker_state(server: ManagedServer) -> BreakerState:
    return server.breaker.state


async def test_three_transport_failures_open_the_breaker_which_fails_fast_then_half_opens(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"echo": python_server(ECHO)}, clock=fake_clock)
    server = supervisor.server("echo")
    await wait_ready(server)
    moves: list[BreakerState] = []
    supervisor.subscribe(
        lambda event: (
            moves.append(event.snapshot.breaker)
            if event.kind is EventKind.BREAKER and event.snapshot is not None
            else None
        )
    )

    for attempt in range(3):
        await wait_ready(server, generation=attempt + 1)
        with pytest.raises(ExitedMidCall):
            await supervisor.call_tool("echo", "crash", {})
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
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"echo": python_server(ECHO)}, clock=fake_clock)
    server = supervisor.server("echo")
    for attempt in range(3):
        await wait_ready(server, generation=attempt + 1)
        with pytest.raises(ExitedMidCall):
            await supervisor.call_tool("echo", "crash", {})
    fake_clock.advance(server.breaker.cooldown)
    await wait_ready(server, generation=4)

    with pytest.raises(ExitedMidCall):
        await supervisor.call_tool("echo", "crash", {})

    assert breaker_state(server) is BreakerState.OPEN
    assert round(server.breaker.retry_in()) == 60


async def test_tool_results_with_is_error_never_count_against_the_server(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"echo": python_server(ECHO)}, clock=fake_clock)
    server = supervisor.server("echo")
    await wait_ready(server)

    for _ in range(5):
        result = await supervisor.call_tool("echo", "fail", {"message": "file not found"})
        assert result["isError"] is True

    assert breaker_state(server) is BreakerState.CLOSED
    assert server.breaker.failures == 0
    assert server.generation == 1


async def test_a_success_between_failures_resets_the_count(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    supervisor = await make_supervisor({"echo": python_server(ECHO)}, clock=fake_clock)
    server = supervisor.server("echo")
    for generation in (1, 2):
        await wait_ready(server, generation=generation)
        with pytest.raises(ExitedMidCall):
            await supervisor.call_tool("echo", "crash", {})
    await wait_ready(server, generation=3)
    await supervisor.call_tool("echo", "echo", {"text": "ok"})
    with pytest.raises(ExitedMidCall):
        await supervisor.call_tool("echo", "crash", {})

    assert server.breaker.failures == 1
    assert breaker_state(server) is BreakerState.CLOSED
