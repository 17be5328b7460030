"""Time as a seam.

Budgets, breakers, backoffs, respawn windows and heartbeats read time through
a ``Clock`` so tests can move it by hand: no test sleeps to reach a TTL or a
cooldown. The fakes live in tests/support/fakes.py: ``FakeClock.sleep`` only
returns when a test advances the clock past its deadline, the way trio's
MockClock without autojump behaves.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: Wall-clock source for timestamps that leave the process (registry rows).
WallClock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Clock(Protocol):
    """Monotonic seconds plus a sleep that honours them."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until ``monotonic()`` reaches ``deadline``.

        Callers that start a timer as a task compute the deadline first, so
        the window is measured from the call, not from when the task runs.
        """
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def sleep_until(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))


SYSTEM_CLOCK = SystemClock()


async def wait_within(
    clock: Clock, awaitable: Awaitable[T], seconds: float
) -> tuple[bool, T | None]:
    """Await ``awaitable`` for at most ``seconds`` of ``clock`` time.

    Returns ``(True, result)`` when it finished, ``(False, None)`` when the
    window ran out first (the awaitable is then cancelled). Unlike
    ``asyncio.wait_for`` the window is measured on the injected clock.
    """
    deadline = clock.monotonic() + seconds
    task = asyncio.ensure_future(awaitable)
    # If our caller is cancelled while the task is failing, nobody awaits
    # the task: mark its exception seen so asyncio does not print it.
    task.add_done_callback(_retrieve)
    timer = asyncio.ensure_future(clock.sleep_until(deadline))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        return True, task.result()
    # Let the cancelled task unwind before the caller moves on.
    await asyncio.gather(task, return_exceptions=True)
    return False, None


def _retrieve(task: "asyncio.Future[Any]") -> None:
    if not task.cancelled():
        task.exception()
