"""Time as a seam.

Budgets, breakers, backoffs, respawn windows and heartbeats read time through
a ``Clock`` so tests can move it by hand: no test sleeps to reach a TTL or a
cooldown. ``FakeClock.sleep`` only returns when a test advances the clock
past its deadline, the way trio's MockClock without autojump behaves.
"""

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

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


class FakeClock:
    """A clock that only moves when ``advance`` is called."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + seconds)

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._order), future))
        await future

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    def advance(self, seconds: float) -> None:
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


class FakeWallClock:
    """A wall clock for registry tests; ``advance`` moves it."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now = self.now + timedelta(seconds=seconds)
        return self.now


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
