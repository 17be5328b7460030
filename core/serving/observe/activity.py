"""Recent activity per server: calls, failures and restarts over the last minutes.

The Servers tab draws one sparkline per server from this; nothing decides
on it. Each server has a fixed ring of ``BUCKETS`` counters of
``BUCKET_SECONDS`` each (10 minutes by default), so memory is bounded
whatever the call rate, and recording is O(1). Buckets are aligned on
multiples of ``BUCKET_SECONDS`` of the clock, so every server's window
slides at the same instants and a series only changes when a bucket
boundary passes or something is recorded (a view that compares series
repaints nothing for an idle server).

Fed by two plain hooks, no timer of its own (an idle tray stays asleep):

- ``observe(server, method, seconds, ok)``: the supervisor's
  ``on_call_done`` signature, once per forwarded request;
- ``on_event(event)``: a supervisor subscriber; a new generation after the
  first is a restart mark, flagged when it followed a crash (the server was
  ``exited`` just before).

``attach(supervisor)`` wires both onto a running supervisor, keeping any
``on_call_done`` hook already set (the metrics).
"""

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from core.base.clock import SYSTEM_CLOCK, Clock
from core.base.snapshot import Event, EventKind
from core.base.states import ServerState
from core.supervision.supervisor import Supervisor

#: Width of one sparkline bar.
BUCKET_SECONDS: Final = 10.0
#: Bars per sparkline: 60 x 10 s = the last 10 minutes.
BUCKETS: Final = 60
#: Restart marks kept per server; a server restarting more often than this
#: within the window shows the newest ones (it is parked long before).
MAX_MARKS: Final = 64


@dataclass(frozen=True)
class Restart:
    """A restart mark: the bucket it fell in (0 = oldest) and whether a crash caused it."""

    bucket: int
    after_crash: bool


@dataclass(frozen=True)
class Series:
    """One server's last ``len(calls)`` buckets, oldest first.

    Equal series draw the same picture: views compare them to decide
    whether to repaint.
    """

    bucket_seconds: float
    calls: tuple[int, ...]
    failures: tuple[int, ...]
    restarts: tuple[Restart, ...] = ()

    @property
    def total_calls(self) -> int:
        return sum(self.calls)

    @property
    def total_failures(self) -> int:
        return sum(self.failures)

    @property
    def window_seconds(self) -> float:
        return self.bucket_seconds * len(self.calls)

    @property
    def quiet(self) -> bool:
        return not (self.total_calls or self.restarts)

    def summary(self) -> str:
        """One line for a tooltip or a screen reader."""
        minutes = self.window_seconds / 60
        parts = [
            f"{self.total_calls} call{'' if self.total_calls == 1 else 's'}",
            f"{self.total_failures} failed",
        ]
        if self.restarts:
            crashes = sum(1 for r in self.restarts if r.after_crash)
            count = len(self.restarts)
            parts.append(
                f"{count} restart{'' if count == 1 else 's'}"
                + (f" ({crashes} after a crash)" if crashes else "")
            )
        return f"last {minutes:g} min: " + ", ".join(parts)


class _Ring:
    """Counters of one server; slot = absolute bucket number modulo the size."""

    __slots__ = ("calls", "failures", "marks", "newest")

    def __init__(self, size: int, newest: int) -> None:
        self.calls = [0] * size
        self.failures = [0] * size
        self.newest = newest
        #: (absolute bucket, after_crash), oldest first.
        self.marks: deque[tuple[int, bool]] = deque(maxlen=MAX_MARKS)

    def advance(self, bucket: int) -> None:
        """Move the newest bucket to ``bucket``, zeroing the buckets it passes."""
        size = len(self.calls)
        steps = bucket - self.newest
        if steps <= 0:
            return
        for absolute in range(self.newest + 1, self.newest + 1 + min(steps, size)):
            self.calls[absolute % size] = 0
            self.failures[absolute % size] = 0
        self.newest = bucket
        while self.marks and self.marks[0][0] <= bucket - size:
            self.marks.popleft()


class ActivityHistory:
    """Calls, failures and restart marks per server, over the last ``buckets`` buckets."""

    def __init__(
        self,
        clock: Clock = SYSTEM_CLOCK,
        *,
        bucket_seconds: float = BUCKET_SECONDS,
        buckets: int = BUCKETS,
    ) -> None:
        if bucket_seconds <= 0 or buckets < 1:
            raise ValueError("bucket_seconds must be > 0 and buckets >= 1")
        self._clock = clock
        self.bucket_seconds = bucket_seconds
        self.buckets = buckets
        self._rings: dict[str, _Ring] = {}
        #: The last generation and state seen per server (restart detection).
        self._seen: dict[str, tuple[int, ServerState]] = {}

    def _bucket(self, now: float | None) -> int:
        moment = self._clock.monotonic() if now is None else now
        return math.floor(moment / self.bucket_seconds)

    def _ring(self, server: str, bucket: int) -> _Ring:
        ring = self._rings.get(server)
        if ring is None:
            self._prune(bucket)
            ring = self._rings[server] = _Ring(self.buckets, bucket)
        ring.advance(bucket)
        return ring

    def _prune(self, bucket: int) -> None:
        """Drop the rings with nothing left in the window (a quiet ring reads as
        zeros either way), so per-session servers that come and go do not pile up."""
        horizon = bucket - self.buckets
        for name in [n for n, ring in self._rings.items() if ring.newest <= horizon]:
            del self._rings[name]
            seen = self._seen.get(name)
            if seen is not None and seen[1] is ServerState.STOPPED:
                del self._seen[name]

    def _slot(self, ring: _Ring, bucket: int) -> int:
        """The ring slot of ``bucket``; one older than the window counts in the
        newest bucket (never, with one monotonic clock): nothing is lost."""
        if bucket <= ring.newest - self.buckets:
            bucket = ring.newest
        return bucket

    # ------------------------------------------------------------ recording

    def record_call(self, server: str, ok: bool, now: float | None = None) -> None:
        bucket = self._bucket(now)
        ring = self._ring(server, bucket)
        slot = self._slot(ring, bucket) % self.buckets
        ring.calls[slot] += 1
        if not ok:
            ring.failures[slot] += 1

    def record_restart(self, server: str, after_crash: bool, now: float | None = None) -> None:
        bucket = self._bucket(now)
        ring = self._ring(server, bucket)
        ring.marks.append((self._slot(ring, bucket), after_crash))

    def observe(self, server: str, method: str, seconds: float, ok: bool) -> None:
        """The supervisor's ``on_call_done`` hook: one forwarded request ended."""
        self.record_call(server, ok)

    def on_event(self, event: Event) -> None:
        """A supervisor subscriber: a new generation after the first is a restart."""
        if event.kind is not EventKind.STATE or event.snapshot is None or event.server is None:
            return
        snapshot = event.snapshot
        previous = self._seen.get(event.server)
        self._seen[event.server] = (snapshot.generation, snapshot.state)
        if snapshot.generation <= 1:
            return
        if previous is None or snapshot.generation > previous[0]:
            crashed = previous is not None and previous[1] is ServerState.EXITED
            self.record_restart(event.server, crashed)

    def forget(self, server: str) -> None:
        """A server left the config: drop its history."""
        self._rings.pop(server, None)
        self._seen.pop(server, None)

    # ------------------------------------------------------------- reading

    def series(self, server: str, now: float | None = None) -> Series:
        """The window ending at ``now`` (zeros for a server never seen)."""
        bucket = self._bucket(now)
        size = self.buckets
        ring = self._rings.get(server)
        if ring is None:
            zeros = (0,) * size
            return Series(self.bucket_seconds, zeros, zeros)
        ring.advance(bucket)
        first = ring.newest - size + 1
        order = [absolute % size for absolute in range(first, ring.newest + 1)]
        return Series(
            self.bucket_seconds,
            tuple(ring.calls[slot] for slot in order),
            tuple(ring.failures[slot] for slot in order),
            tuple(Restart(absolute - first, crashed) for absolute, crashed in ring.marks),
        )


def attach(supervisor: Supervisor, clock: Clock = SYSTEM_CLOCK) -> ActivityHistory:
    """A history fed by ``supervisor``: its call hook (chained) and its events."""
    history = ActivityHistory(clock)
    before: Callable[[str, str, float, bool], None] | None = supervisor.on_call_done

    def observe(server: str, method: str, seconds: float, ok: bool) -> None:
        if before is not None:
            before(server, method, seconds, ok)
        history.observe(server, method, seconds, ok)

    supervisor.on_call_done = observe
    supervisor.subscribe(history.on_event)
    return history
