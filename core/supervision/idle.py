"""When an on-demand server may go back to sleep (docs/design.md §3.2).

It may once it went ``idle_stop_s`` with nothing that needs it: no call in
flight (a call parked for its client's answer is one: it still holds the
child's request open), no request of the server waiting for a client, no
resource subscription. The count starts at the last moment something moved
(a call ended, a subscription went), on the server's injected clock.
A child made for one session or workspace (NAME@suffix) never sleeps: its
session needs it for as long as it lasts, and retires it when it ends.
"""

import asyncio
from collections.abc import Callable

from core.base.clock import Clock, wait_within
from core.supervision.routing import Routing


class IdleWatch:
    def __init__(self, clock: Clock, routing: Routing) -> None:
        self._clock = clock
        self._routing = routing
        #: The last moment something that needs the child began or ended.
        self.last_moved = clock.monotonic()
        self._moved = asyncio.Event()
        #: Replaced at every move: a waiter of its own, which nobody else clears.
        self._next_move = asyncio.Event()
        routing.on_activity = self.touch

    def touch(self) -> None:
        """Something began or ended (a call, a server request, a subscription, a config edit)."""
        self.last_moved = self._clock.monotonic()
        self._moved.set()
        moved, self._next_move = self._next_move, asyncio.Event()
        moved.set()

    async def until_no_call(self) -> None:
        """Until no call is in flight (unbounded: the caller bounds it)."""
        while self._routing.calls_open:
            await self._next_move.wait()

    def needed_by(self) -> str | None:
        """What needs the child now, in words; None when nothing does."""
        routing = self._routing
        if routing.calls_open:
            return "a call is in flight"
        if routing.server_requests:
            return "a request of the server waits for its client"
        if routing.subscriptions:
            return "a client is subscribed to its resources"
        return None

    async def until_idle(self, limit: Callable[[], float | None]) -> float:
        """Return once nothing needed the child for ``limit()`` seconds (None: never, for
        now: a config edit may change it); returns the limit that ran out."""
        while True:
            self._moved.clear()
            seconds = limit()
            if seconds is None or self.needed_by() is not None:
                await self._moved.wait()
                continue
            remaining = self.last_moved + seconds - self._clock.monotonic()
            if remaining <= 0:
                return seconds
            await wait_within(self._clock, self._moved.wait(), remaining)
