"""Work that may wait its turn: one waiter let through per turn of the event loop.

Opening a session costs the tray far more than a call does (a session, its
registry row, its saved row), and a client opening hundreds at once (a burst
of bridges, a test harness) would otherwise have every open that arrived
together run back to back, in one turn of the loop, while the calls of open
sessions that arrived with them wait behind all of it (docs/design.md §3.10).
Taking turns, an open lets the calls ready at the same time go first, and a
burst of opens costs a call at most one open's work.
"""

import asyncio
from collections import deque


class LoopTurns:
    """Lets through one waiter per turn of the running loop, in arrival order."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._releasing = False

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting.append(turn)
        if not self._releasing:
            self._releasing = True
            loop.call_soon(self._release, loop)
        await turn

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        waiting = self._waiting
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # a waiter cancelled meanwhile gives up its turn
                turn.set_result(None)
                break
        if waiting and not loop.is_closed():
            loop.call_soon(self._release, loop)
        else:
            self._releasing = False
