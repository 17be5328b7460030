"""The small policy pieces on their own: transitions, budget, backoff, breakers, clock.

Strategy: pure objects on a FakeClock; bounds asserted on both sides.
"""

import asyncio
import gc
import random

import pytest

from core.base.clock import wait_within
from core.base.errors import ConnectionLost
from core.base.states import ALLOWED_TRANSITIONS, BreakerState, ServerState
from core.supervision.breakers import ServerBreaker, SessionBreaker
from core.supervision.restart_policy import Backoff, RapidDropBudget
from tests.support.fakes import FakeClock


def test_every_state_has_a_row_and_stopped_leaves_only_to_start_or_to_sleep() -> None:
    # An on-demand server leaves STOPPED for SLEEPING (its kept catalog answers
    # lists); every other way out of STOPPED goes through STARTING.
    assert set(ALLOWED_TRANSITIONS) == set(ServerState)
    assert ALLOWED_TRANSITIONS[ServerState.STOPPED] == {ServerState.STARTING, ServerState.SLEEPING}
    assert ServerState.READY not in ALLOWED_TRANSITIONS[ServerState.SLEEPING]
    assert ServerState.READY not in ALLOWED_TRANSITIONS[ServerState.PARKED]
    assert ServerState.PARKED in ALLOWED_TRANSITIONS[ServerState.EXITED]


def test_the_budget_parks_on_the_sixth_consecutive_unproven_drop() -> None:
    budget = RapidDropBudget()
    assert [budget.dropped() for _ in range(6)] == [False] * 5 + [True]


def test_a_proven_run_starts_the_count_over() -> None:
    budget = RapidDropBudget()
    for _ in range(5):
        budget.dropped()
    budget.proven()
    assert [budget.dropped() for _ in range(6)] == [False] * 5 + [True]


def test_an_unparked_server_gets_a_budget_of_exactly_one() -> None:
    budget = RapidDropBudget()
    budget.grant_one()
    assert budget.dropped() is True


def test_backoff_doubles_from_one_second_capped_at_sixty_with_twenty_percent_jitter() -> None:
    backoff = Backoff(rng=random.Random(7))
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0)):
        for _ in range(50):
            delay = backoff.delay(attempt)
            assert base * 0.8 <= delay <= base * 1.2
    assert all(backoff.delay(20) <= 60.0 for _ in range(50))
    assert min(backoff.delay(20) for _ in range(50)) >= 60.0 * 0.8


def test_the_server_breaker_opens_at_three_and_half_opens_after_the_cooldown() -> None:
    clock = FakeClock()
    breaker = ServerBreaker(clock)
    assert not breaker.failure("x")
    assert not breaker.failure("x")
    assert breaker.failure("x")
    assert breaker.state is BreakerState.OPEN
    assert not breaker.admit().allowed
    clock.advance(59.9)
    assert breaker.admit().retry_in == pytest.approx(0.1)
    clock.advance(0.1)
    probe = breaker.admit()
    assert probe.allowed and probe.probe
    # Only one probe at a time.
    assert not breaker.admit().allowed
    breaker.success()
    assert breaker.state.value == "closed"


def test_a_neutral_probe_outcome_keeps_the_breaker_half_open() -> None:
    clock = FakeClock()
    breaker = ServerBreaker(clock, threshold=1)
    breaker.failure("x")
    clock.advance(60)
    assert breaker.admit().probe
    breaker.neutral()
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.admit().probe


def test_the_session_breaker_trips_at_three_and_a_success_resets_it() -> None:
    breaker = SessionBreaker()
    assert [breaker.failure(), breaker.failure()] == [False, False]
    breaker.success()
    assert [breaker.failure(), breaker.failure(), breaker.failure()] == [False, False, True]
    assert breaker.tripped
    assert breaker.failure() is False  # tripping is reported once
    breaker.reset()
    assert not breaker.tripped


async def test_wait_within_measures_its_window_on_the_injected_clock() -> None:
    clock = FakeClock()
    never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(wait_within(clock, never, 15))
    await asyncio.sleep(0)
    assert not waiting.done()
    clock.advance(14.9)
    await asyncio.sleep(0)
    assert not waiting.done()
    clock.advance(0.1)
    assert await waiting == (False, None)
    assert never.cancelled()

    assert await wait_within(clock, asyncio.sleep(0, result=5), 1) == (True, 5)


async def test_wait_within_cancelled_while_its_task_fails_leaves_nothing_unretrieved() -> None:
    """What printed "Task exception was never retrieved" when a child died mid-handshake."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))

    async def fails_when_cancelled() -> None:
        # As asyncio.wait_for does when its future failed as it was cancelled.
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise ConnectionLost("the connection to the child closed") from None

    try:
        waiting = asyncio.ensure_future(wait_within(FakeClock(), fails_when_cancelled(), 15))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        del waiting
        await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(previous)

    assert reported == []
