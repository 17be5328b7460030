"""Test doubles for the core's seams: clocks that move only when a test says so.

``FakeClock`` stands in for ``core.base.clock.Clock`` (monotonic time and
sleeps); ``FakeWallClock`` for a ``WallClock`` (registry timestamps).
"""

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

#: While ``FakeClock.ticking`` runs, fake seconds that pass per real tick.
TICK_SECONDS = 0.25
TICK_REAL_SECONDS = 0.005


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
    def next_deadline(self) -> float | None:
        """When the earliest pending sleep ends (cancelled ones excluded)."""
        pending = [deadline for deadline, _, future in self._sleepers if not future.done()]
        return min(pending, default=None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    @contextlib.asynccontextmanager
    async def ticking(self) -> AsyncIterator[None]:
        """Let fake time run on by itself for a while (trio's autojump, coarsely).

        For code a test does not time, such as a teardown that runs the stop
        contract's graces on this clock.
        """

        async def tick() -> None:
            while True:
                await asyncio.sleep(TICK_REAL_SECONDS)
                self.advance(TICK_SECONDS)

        ticker = asyncio.ensure_future(tick())
        try:
            yield
        finally:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)

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
