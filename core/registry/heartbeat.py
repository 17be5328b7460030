"""Keeping a registered worker live: the interval policy and the beater.

``register`` stamps the heartbeat once; without a beater the TTL would be a
hard cap on how long a client may stay attached. ``WorkerHeartbeatSupervisor``
is that beater: a daemon thread (renewal must survive an idle session, and
sqlite writes must not run on the event loop) waiting on an Event, so
``stop`` is prompt. ``daemon=True`` is deliberate: a hard kill takes the
thread with it and the dead worker still expires on the normal TTL.

- A refusal (fenced, row missing) is terminal: the supervisor stops for good
  and records why. A fenced holder must never beat its way back, so it never
  re-registers or re-adopts a newer epoch.
- Any exception from the registry (typically "database is locked" after the
  busy timeout) is transient: counted, and beating goes on.
- One supervisor is one attachment: once stopped it never starts again.

Time is injected twice: ``wall_clock`` stamps the beats, and the thread
waits out each interval through a ``Ticker`` (``EventTicker``: real time).
Tests call ``beat_once`` on a fake wall clock, and run the real thread on a
manual ticker, so no test waits for an interval. See tests/registry/test_heartbeat.py.
"""

import atexit
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from core.base.clock import WallClock, utc_now
from core.base.envvars import HEARTBEAT_INTERVAL_ENV, HEARTBEAT_TTL_ENV
from core.registry.records import DEFAULT_HEARTBEAT_TTL_SECONDS, HeartbeatOutcome

#: Default share of the TTL between beats: two beats can be lost in a row and
#: the row still stays live.
DEFAULT_INTERVAL_FRACTION: Final = 1 / 3
#: No override may exceed this share of the TTL, or a single late beat would
#: expire the very registration it exists to renew.
MAX_INTERVAL_FRACTION: Final = 1 / 2
#: How long ``stop`` waits for the thread to finish a beat in flight. A beat
#: that is stuck in sqlite's busy timeout finishes on its own later.
STOP_JOIN_SECONDS: Final = 2.0


def _positive_seconds(value: object) -> float | None:
    """``value`` as finite seconds > 0, or None when it is not that."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def heartbeat_interval_for(ttl_seconds: float, override: object = None) -> float:
    """Seconds between beats for ``ttl_seconds``: always strictly below the TTL.

    TTL/3 by default; an override (number or text, e.g. from
    ``MCP_TRAY_HEARTBEAT_INTERVAL``) is honoured up to TTL/2 and capped
    there; an unparsable, zero or negative override falls back to TTL/3.
    """
    if _positive_seconds(ttl_seconds) is None:
        raise ValueError(f"ttl_seconds must be a finite number > 0, got {ttl_seconds!r}")
    requested = _positive_seconds(override)
    if requested is None:
        return ttl_seconds * DEFAULT_INTERVAL_FRACTION
    return min(requested, ttl_seconds * MAX_INTERVAL_FRACTION)


@dataclass(frozen=True)
class HeartbeatSettings:
    ttl_seconds: float
    interval_seconds: float


def heartbeat_settings(environ: Mapping[str, str]) -> HeartbeatSettings:
    """TTL and interval from ``MCP_TRAY_HEARTBEAT_TTL`` / ``_INTERVAL``.

    A bad TTL falls back to the default the way a bad interval does: a typo
    in an env var must not stop a bridge from attaching.
    """
    ttl = _positive_seconds(environ.get(HEARTBEAT_TTL_ENV)) or DEFAULT_HEARTBEAT_TTL_SECONDS
    return HeartbeatSettings(ttl, heartbeat_interval_for(ttl, environ.get(HEARTBEAT_INTERVAL_ENV)))


class HeartbeatTarget(Protocol):
    """What the supervisor needs from ``WorkerRegistry``."""

    def heartbeat(
        self,
        worker_identity: str,
        fencing_epoch: int,
        *,
        expected_session_id: str | None = None,
        expected_generation_id: str | None = None,
        expected_client_name: str | None = None,
        expected_pid: int | None = None,
        now: datetime | None = None,
    ) -> HeartbeatOutcome: ...


class Ticker(Protocol):
    """How the beat thread waits out an interval; tests pass a manual one."""

    def wait(self, seconds: float) -> bool:
        """False once ``seconds`` have passed; True at once when interrupted."""
        ...

    def interrupt(self) -> None:
        """End the wait in progress and every later one: beating is over."""
        ...


class EventTicker:
    """Real time, on a ``threading.Event`` that ``interrupt`` sets: stop is prompt."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)

    def interrupt(self) -> None:
        self._event.set()


@dataclass(frozen=True)
class StartOutcome:
    """``started`` True means a thread is running now (new or already)."""

    started: bool
    already_running: bool
    reason: str | None = None


@dataclass(frozen=True)
class HeartbeatStatus:
    """What ``status()`` reports (docs/design.md §3.7). Grants nothing."""

    #: Always True from a supervisor: the row has a beater, so it outlives
    #: its first TTL (an unsupervised row expires one TTL after registering).
    supervised: bool
    started: bool
    running: bool
    beats_attempted: int
    beats_renewed: int
    transient_failures: int
    stopped_reason: str | None
    worker_identity: str
    ttl_seconds: float
    interval_seconds: float


class WorkerHeartbeatSupervisor:
    """Renews one registration every ``interval_seconds`` until stopped."""

    def __init__(
        self,
        registry: HeartbeatTarget,
        *,
        worker_identity: str,
        fencing_epoch: int,
        ttl_seconds: float,
        session_id: str | None = None,
        generation_id: str | None = None,
        client_name: str | None = None,
        pid: int | None = None,
        interval_seconds: object = None,
        wall_clock: WallClock = utc_now,
        ticker: Ticker | None = None,
        stop_at_exit: bool = True,
        on_refused: Callable[[HeartbeatOutcome], None] | None = None,
    ) -> None:
        self._registry = registry
        #: Told (from the beat thread) when a terminal refusal stopped beating,
        #: so the owner can act: a fenced bridge must stop serving.
        self.on_refused = on_refused
        self.worker_identity = worker_identity
        self.fencing_epoch = fencing_epoch
        self.ttl_seconds = ttl_seconds
        self.interval_seconds = heartbeat_interval_for(ttl_seconds, interval_seconds)
        self.session_id = session_id
        self.generation_id = generation_id
        self.client_name = client_name
        self.pid = pid
        self._wall_clock = wall_clock
        self._stop_at_exit = stop_at_exit
        self._lock = threading.Lock()
        self._ticker = ticker or EventTicker()
        self._thread: threading.Thread | None = None
        self._stopped_reason: str | None = None
        self._attempted = 0
        self._renewed = 0
        self._transient = 0

    @property
    def stopped_reason(self) -> str | None:
        with self._lock:
            return self._stopped_reason

    def beat_once(self) -> HeartbeatOutcome:
        """One renewal now. After a stop, nothing reaches the registry."""
        with self._lock:
            if self._stopped_reason is not None:
                return HeartbeatOutcome(
                    renewed=False,
                    worker_identity=self.worker_identity,
                    reasons=(f"heartbeat stopped: {self._stopped_reason}",),
                    beat_attempted=False,
                )
            self._attempted += 1
        try:
            # Outside the lock: a beat may wait out sqlite's busy timeout and
            # status()/stop() must stay responsive meanwhile.
            outcome = self._registry.heartbeat(
                self.worker_identity,
                self.fencing_epoch,
                expected_session_id=self.session_id,
                expected_generation_id=self.generation_id,
                expected_client_name=self.client_name,
                expected_pid=self.pid,
                now=self._wall_clock(),
            )
        except Exception as exc:
            with self._lock:
                self._transient += 1
            return HeartbeatOutcome(
                renewed=False,
                worker_identity=self.worker_identity,
                reasons=(f"transient failure, will retry: {type(exc).__name__}: {exc}",),
                transient=True,
            )
        if outcome.renewed:
            with self._lock:
                self._renewed += 1
            return outcome
        # A refusal is final: retrying a fenced or missing row can only fail
        # again, or worse, succeed after someone else re-registered.
        reason = f"{outcome.blocker_kind or 'refused'}: " + "; ".join(outcome.reasons)
        self.stop(reason)
        if self.on_refused is not None:
            self.on_refused(outcome)
        return outcome

    def start(self) -> StartOutcome:
        """Start the thread; idempotent; refused once stopped."""
        with self._lock:
            if self._stopped_reason is not None:
                return StartOutcome(
                    started=False,
                    already_running=False,
                    reason=f"stopped for good: {self._stopped_reason}",
                )
            if self._thread is not None:
                return StartOutcome(started=True, already_running=True)
            self._thread = threading.Thread(
                target=self._run, name=f"heartbeat {self.worker_identity}", daemon=True
            )
            self._thread.start()
        if self._stop_at_exit:
            atexit.register(self._stop_at_interpreter_exit)
        return StartOutcome(started=True, already_running=False)

    def stop(self, reason: str = "stopped") -> None:
        """Stop beating for good; idempotent, the first reason is kept."""
        with self._lock:
            if self._stopped_reason is None:
                self._stopped_reason = reason
            thread = self._thread
        self._ticker.interrupt()
        if self._stop_at_exit:
            # Registered only by start(); unregistering an absent one is a no-op.
            atexit.unregister(self._stop_at_interpreter_exit)
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_JOIN_SECONDS)

    def _stop_at_interpreter_exit(self) -> None:
        self.stop("process exiting")

    def _run(self) -> None:
        # The first beat waits one interval: register() has just stamped it.
        while not self._ticker.wait(self.interval_seconds):
            self.beat_once()

    def status(self) -> HeartbeatStatus:
        with self._lock:
            thread = self._thread
            running = thread is not None and thread.is_alive() and self._stopped_reason is None
            return HeartbeatStatus(
                supervised=True,
                started=thread is not None,
                running=running,
                beats_attempted=self._attempted,
                beats_renewed=self._renewed,
                transient_failures=self._transient,
                stopped_reason=self._stopped_reason,
                worker_identity=self.worker_identity,
                ttl_seconds=self.ttl_seconds,
                interval_seconds=self.interval_seconds,
            )
