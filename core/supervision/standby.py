"""The standby spare of a ``"standby": true`` server (docs/design.md §3.2).

One more child of the same entry, spawned while the active one is ready,
so that its own start (a cold Python, ``uvx``, ``npx``) is behind it when
the active one dies: the run loop then takes the spare instead of spawning
(``take``), the handshake runs on a child that is already up, and calls
waiting for a fresh session (the pre-call gate, a replay) get it at once.
A new spare is spawned in the background once the new run is ready. The
spare is no run: it has no session, takes no request, counts against no
budget; its stderr goes to the server's log marked ``[standby]``; it ends
by the stop contract with its server's run loop (stop, respawn, a config
edit).
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from core.base.clock import Clock
from core.base.errors import SpawnError
from core.supervision.child import ChildProcess, StopTiming


class Standby:
    def __init__(
        self,
        spawn: Callable[[], Awaitable[ChildProcess]],
        log: Callable[[str], None],
        stderr_line: Callable[[str], None],
        timing: StopTiming,
        clock: Clock,
    ) -> None:
        self._spawn = spawn
        self._timing = timing
        self._clock = clock
        #: Ends of spares that died unused (their group ended, their pipes closed).
        self._ending: set[asyncio.Task[None]] = set()
        self._log = log
        self._stderr_line = stderr_line
        self.spare: ChildProcess | None = None
        self._filling: asyncio.Task[None] | None = None
        self._pump: asyncio.Task[None] | None = None

    def fill(self) -> None:
        """Spawn a spare in the background unless one lives (or is on its way)."""
        if self._filling is not None and not self._filling.done():
            return
        if self.spare is not None and self.spare.is_alive():
            return
        self._filling = asyncio.ensure_future(self._fill())

    async def _fill(self) -> None:
        try:
            child = await self._spawn()
        except SpawnError as exc:
            self._log(f"standby: no spare ({exc.reason})")
            return
        self._pump = asyncio.ensure_future(self._drain(child))
        self.spare = child
        self._log(f"standby: spare pid {child.pid} started")

    async def _drain(self, child: ChildProcess) -> None:
        while line := await child.stderr.readline():
            self._stderr_line("[standby] " + line.decode("utf-8", errors="replace").rstrip("\r\n"))

    def take(self) -> ChildProcess | None:
        """The living spare, now the active child's (None: spawn as usual)."""
        spare, self.spare = self.spare, None
        if self._pump is not None:
            # Its stderr is the run's from here on (core.supervision.runloop pumps it).
            self._pump.cancel()
            self._pump = None
        if spare is None:
            return None
        if not spare.is_alive():
            self._log(f"standby: spare pid {spare.pid} had died unused")
            ending = asyncio.ensure_future(spare.end_group(self._timing, self._log, self._clock))
            self._ending.add(ending)
            ending.add_done_callback(self._ending.discard)
            return None
        self._log(f"standby: spare pid {spare.pid} takes over")
        return spare

    @property
    def ready(self) -> bool:
        return self.spare is not None and self.spare.is_alive()

    async def end(self) -> None:
        """Stop filling, and end the spare by the stop contract."""
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._filling
            self._filling = None
        spare = self.take_quietly()
        if spare is not None:
            if spare.is_alive():
                await spare.stop(self._timing, self._log, self._clock)
            else:
                await spare.end_group(self._timing, self._log, self._clock)
        await asyncio.gather(*self._ending, return_exceptions=True)

    def take_quietly(self) -> ChildProcess | None:
        spare, self.spare = self.spare, None
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        return spare
