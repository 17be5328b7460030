"""The standby spare of a ``"standby": true`` server (docs/design.md §3.2, docs/lean.md).

One more child of the same entry, spawned while the active one is ready
and brought all the way to a usable session in the background: its own
start (a cold Python, ``uvx``, ``npx``), the handshake (``server/discover``
or ``initialize`` + ``initialized``) and its lists. When the active child
dies the run loop takes the spare (``take``) instead of spawning, so the
new run is ready as soon as the catalog has adopted what the spare learnt,
and calls waiting for a fresh session (the pre-call gate, a replay) get it
at once. Only a spare whose session is ready is handed over: one still on
its way stays the spare, and the run loop spawns as it would without one.

Until it takes over the spare is no run: it takes no call and counts
against no budget. A request of its own (roots, sampling) waits until it
is the active child, since only then is there a session it belongs to; a
``list_changed`` re-lists what it learnt; other notifications are nobody's.
Its stderr goes to the server's log marked ``[standby]``. It ends by the
stop contract with its server's run loop (stop, respawn, a config edit).
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.base.clock import Clock, wait_within
from core.base.errors import ConnectionLost, RpcError, SpawnError
from core.supervision.catalog import LIST_KINDS, Catalog
from core.supervision.child import Child, StopTiming
from core.supervision.upstream import Handshake, ServerRequestHandler, Upstream

#: Opens a spare's session: its handshake (the server's pinned era or the probe).
SessionOpener = Callable[[Upstream], Awaitable[Handshake]]
#: At most this long a new spare waits for the calls in flight when the run became
#: ready (those a take-over was waiting for): its own start, a whole interpreter
#: importing its SDK, would otherwise compete with their answers for the CPU.
SETTLE_SECONDS = 1.0


@dataclass
class Spare:
    """A spare child and its session, ready once ``handshake`` and ``learnt`` are."""

    child: Child
    upstream: Upstream
    pump: "asyncio.Task[None]"
    handshake: Handshake | None = None
    #: Its lists as it gave them, unscreened (the server's catalog screens them).
    learnt: Catalog = field(default_factory=Catalog)
    #: Set when it takes over: the requests it made as a spare may go on.
    taken: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def pid(self) -> int | None:
        return self.child.pid

    def usable(self) -> bool:
        return (
            self.handshake is not None
            and self.child.is_alive()
            and not self.upstream.closed.is_set()
        )


class Standby:
    def __init__(
        self,
        spawn: Callable[[], Awaitable[Child]],
        open_session: SessionOpener,
        route_request: ServerRequestHandler,
        log: Callable[[str], None],
        stderr_line: Callable[[str], None],
        start_timeout: Callable[[], float],
        timing: StopTiming,
        clock: Clock,
    ) -> None:
        self._spawn = spawn
        self._open_session = open_session
        self._route_request = route_request
        self._start_timeout = start_timeout
        self._timing = timing
        self._clock = clock
        self._log = log
        self._stderr_line = stderr_line
        #: The spare whose session is ready (the only one ``take`` hands over).
        self.spare: Spare | None = None
        #: The spare on its way (spawned, its handshake or listing not done yet).
        self._preparing: Spare | None = None
        self._filling: asyncio.Task[None] | None = None
        #: Ends of spares that died unused or failed their start.
        self._ending: set[asyncio.Task[None]] = set()

    def fill(self, first: Callable[[], Awaitable[None]] | None = None) -> None:
        """Prepare a spare in the background unless one is ready (or on its way); after
        ``first`` (bounded by ``SETTLE_SECONDS``) when given."""
        if self._filling is not None and not self._filling.done():
            return
        if self.spare is not None and self.spare.usable():
            return
        self._filling = asyncio.ensure_future(self._fill(first))

    async def _fill(self, first: Callable[[], Awaitable[None]] | None) -> None:
        if first is not None:
            await wait_within(self._clock, first(), SETTLE_SECONDS)
        if self.spare is not None:
            # It died unused since it was ready: its pipes and exit watch go with it.
            dead, self.spare = self.spare, None
            self._log(f"standby: spare pid {dead.pid} had died unused")
            self._discard(dead)
        try:
            child = await self._spawn()
        except SpawnError as exc:
            self._log(f"standby: no spare ({exc.reason})")
            return
        spare: Spare  # bound below, before the reader can deliver a message

        def held(method: str, params: Mapping[str, Any] | None) -> Awaitable[dict[str, Any]]:
            return self._held(spare, method, params)

        def relist(method: str, _params: Mapping[str, Any] | None) -> Awaitable[None]:
            return self._relist(spare, method)

        upstream = Upstream.start(
            child, on_request=held, on_notification=relist, on_junk=self._junk
        )
        spare = Spare(child, upstream, asyncio.ensure_future(self._drain(child)))
        self._preparing = spare
        self._log(f"standby: spare pid {child.pid} started")
        limit = self._start_timeout()
        try:
            finished, _ = await wait_within(self._clock, self._prepare(spare), limit)
            if not finished:
                raise TimeoutError(f"no handshake within {limit:g} s")
        except Exception as exc:
            # No retry until the next run is ready: a spare that cannot start would
            # otherwise be spawned again and again beside a healthy server.
            self._log(f"standby: spare pid {child.pid} failed its start ({_describe(exc)})")
            self._preparing = None
            self._discard(spare)
            return
        self._preparing = None
        self.spare = spare
        era = spare.learnt.version or "an unknown revision"
        self._log(f"standby: spare pid {child.pid} ready (speaks {era}, tools listed)")

    async def _prepare(self, spare: Spare) -> None:
        handshake = await self._open_session(spare.upstream)
        spare.learnt.adopt(handshake)
        await spare.learnt.refresh(spare.upstream)
        spare.handshake = handshake

    async def _held(
        self, spare: Spare, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method == "ping":
            return {}
        # Whose request it is can only be told once it serves sessions.
        await spare.taken.wait()
        return await self._route_request(method, params)

    async def _relist(self, spare: Spare, method: str) -> None:
        kind = method.split("/")[1] if method.endswith("/list_changed") else None
        if kind in LIST_KINDS and spare.handshake is not None:
            with contextlib.suppress(RpcError, ConnectionLost):
                await spare.learnt.refresh(spare.upstream, only=kind)

    def _junk(self, line: str) -> None:
        self._stderr_line(f"[standby] (stdout, not JSON-RPC) {line}")

    async def _drain(self, child: Child) -> None:
        while line := await child.stderr.readline():
            self._stderr_line("[standby] " + line.decode("utf-8", errors="replace").rstrip("\r\n"))

    def take(self) -> Spare | None:
        """The ready spare, now the active child's (None: spawn as usual)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return None
        if not spare.usable():
            self._log(f"standby: spare pid {spare.pid} had died unused")
            self._discard(spare)
            return None
        # Its stderr is the run's from here on (core.supervision.runloop pumps it).
        spare.pump.cancel()
        self._log(f"standby: spare pid {spare.pid} takes over")
        return spare

    @property
    def ready(self) -> bool:
        """A spare is ready to take over: spawned, handshaken, its lists learnt."""
        return self.spare is not None and self.spare.usable()

    def _discard(self, spare: Spare) -> None:
        ending = asyncio.ensure_future(self._end(spare))
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def _end(self, spare: Spare) -> None:
        spare.pump.cancel()
        await spare.upstream.aclose()
        if spare.child.is_alive():
            await spare.child.stop(self._timing, self._log, self._clock)
        else:
            await spare.child.end_group(self._timing, self._log, self._clock)
        await asyncio.gather(spare.pump, return_exceptions=True)

    async def end(self) -> None:
        """Stop filling, and end the spare (ready or on its way) by the stop contract."""
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._filling
            self._filling = None
        for spare in (self.spare, self._preparing):
            if spare is not None:
                self._discard(spare)
        self.spare = self._preparing = None
        await asyncio.gather(*self._ending, return_exceptions=True)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RpcError):
        return f"error {exc.code}: {exc.message}"
    if isinstance(exc, ConnectionLost):
        return "its stdout closed before the handshake finished"
    return str(exc)
