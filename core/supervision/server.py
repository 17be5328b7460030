"""One configured server: its run loop and its state machine.

The run loop (one asyncio task per server) spawns a child, completes the
handshake, watches the child, and after an exit waits out a backoff or parks
the server when its rapid-drop budget is spent. Only ``_change_state`` sets
the state; it checks ``ALLOWED_TRANSITIONS`` and emits the event. Who may
decide what about a run is written in core.supervision.run; requests go
through the call path (core.supervision.calls), server->client traffic
through core.supervision.routing, and what the server offers is kept in
core.supervision.catalog.
"""

import asyncio
import contextlib
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from core.base.clock import Clock
from core.base.errors import InvalidTransition
from core.base.snapshot import AlertKind, Event, EventKind, ServerSnapshot
from core.base.states import ALLOWED_TRANSITIONS, BreakerState, ServerState
from core.settings.config import ServerConfig, Sharing
from core.supervision.breakers import ServerBreaker
from core.supervision.calls import CallPath
from core.supervision.catalog import Catalog
from core.supervision.catalog_store import load_catalog, save_catalog
from core.supervision.child import ChildProcess, Spawner
from core.supervision.containment import Containment
from core.supervision.idle import IdleWatch
from core.supervision.listen import UpstreamListen
from core.supervision.logs import LogSink
from core.supervision.restart_policy import Backoff, RapidDropBudget
from core.supervision.routing import NO_CALLER, ROOTS_CHANGED, Caller, Routing
from core.supervision.run import Run, Timing
from core.supervision.runloop import RunLoop
from core.supervision.tool_review import ToolReview

S = ServerState
logger = logging.getLogger(__name__)

#: Lines of stderr kept in memory per server for the UI.
STDERR_RING_LINES: Final = 500
#: The Servers tab's Latency is the median of this many latest answered tool calls.
LATENCY_CALLS: Final = 100

EnvResolver = Callable[[ServerConfig], Mapping[str, str]]
#: Called after every forwarded request: (server, method, seconds, ok).
CallObserver = Callable[[str, str, float, bool], None]


class ManagedServer:
    def __init__(
        self,
        config: ServerConfig,
        *,
        owner: str,
        logs: LogSink,
        clock: Clock,
        timing: Timing,
        emit: Callable[[Event], None],
        spawn: Spawner = ChildProcess.spawn,
        budget: RapidDropBudget | None = None,
        backoff: Backoff | None = None,
        breaker: ServerBreaker | None = None,
        env_resolver: EnvResolver | None = None,
        review: ToolReview | None = None,
        catalog_dir: Path | None = None,
        containment: Containment | None = None,
        sign_in_file: Path | None = None,
    ) -> None:
        self.config = config
        #: Where a remote's sign-in is kept if no OS keyring works (None: nowhere).
        self.sign_in_file = sign_in_file
        #: Where an on-demand server keeps its catalog while it sleeps (None: nowhere).
        self.catalog_dir = catalog_dir
        self.name = config.name
        self.owner = owner
        self.logs = logs
        self.clock = clock
        self.timing = timing
        self.emit = emit
        self.spawner = spawn
        self.budget = budget or RapidDropBudget()
        self.backoff = backoff or Backoff(initial=timing.backoff_initial, cap=timing.backoff_cap)
        self.breaker = breaker or ServerBreaker(clock)
        self._breaker_published = self.breaker.state
        self.env_resolver = env_resolver or (lambda cfg: cfg.env)
        #: Sandboxes and state folders (the supervisor's, shared by its servers).
        self.containment = containment or Containment(
            self.log_path.parent.parent / "state" / "servers"
        )
        self.state = S.STOPPED
        self.parked_reason: str | None = None
        #: How long its latest answered tool calls took, in seconds (newest last).
        self.call_seconds: deque[float] = deque(maxlen=LATENCY_CALLS)
        self._last_error: str | None = None
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_RING_LINES)
        #: Last known capabilities and lists, served to clients while it respawns.
        #: A child made for a session (NAME@suffix) is reviewed as its entry's.
        entry = config.name.partition("@")[0]
        self.catalog = Catalog(
            review.for_server(entry, lambda: self.config.on_tool_change, self.log)
            if review is not None
            else None
        )
        self.routing = Routing(self.name, shared=config.sharing == "shared")
        self.routing.on_ambiguous = self._ambiguous_request
        self.routing.on_shared_roots = self._shared_roots
        self.routing.on_roots_stale = self._roots_stale
        self.idle = IdleWatch(clock, self.routing)
        #: Set the first time a server request could not be placed (docs/design.md §3.10).
        self.isolation_warning: str | None = None
        #: Set the first time this shared server asked for roots (its notice).
        self.roots_warning: str | None = None
        #: It asked for roots: unless its entry pins ``"sharing": "shared"``, its
        #: sessions get one child per workspace from then on (core.serving.calls.placement).
        self.asks_roots = False
        self.calls_path = CallPath(self)
        self.listen = UpstreamListen(self)
        #: Respawns that calls asked for (never more than one per call), for
        #: /metrics, and a latency hook called after every forwarded request.
        self.respawn_requests = 0
        self.on_call_done: CallObserver | None = None
        self.runloop = RunLoop(self)
        self._background: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._half_open_timer: asyncio.Task[None] | None = None
        #: What the user wants (start/stop); a respawn keeps it True throughout.
        self.wanted = False
        #: Serialises stop/respawn/reconfigure: a second cancel must never cut
        #: the first one's stop contract short.
        self._lifecycle = asyncio.Lock()
        self.respawn_now = asyncio.Event()
        self._changed = asyncio.Event()

    # ----------------------------------------------------------------- state

    def change_state(self, new: ServerState, why: str) -> None:
        """The only writer of ``self.state``."""
        old = self.state
        if new not in ALLOWED_TRANSITIONS[old]:
            raise InvalidTransition(self.name, old, new)
        self.state = new
        self.log(f"state {old.value} -> {new.value}: {why}")
        self.broadcast()
        self.publish(EventKind.STATE, alert=AlertKind.PARKED if new is S.PARKED else None)

    def publish(
        self, kind: EventKind, text: str | None = None, alert: AlertKind | None = None
    ) -> None:
        self.emit(Event(kind, self.name, self.snapshot(), text, alert))

    def changed(self) -> asyncio.Event:
        """An event set at the next change of state or run (then replaced)."""
        return self._changed

    def broadcast(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _ambiguous_request(self, method: str, text: str) -> None:
        self.log(f"refused {method}: {text}")
        if self.isolation_warning is None:
            self.isolation_warning = text
            self.publish(EventKind.WARNINGS, text)

    def _shared_roots(self) -> None:
        self.asks_roots = True
        if self.roots_warning is not None:
            return
        if self.config.sharing_pinned:
            self.roots_warning = (
                f"shared server {self.name!r} asks its clients for roots (the folders it may "
                'work in) and its entry pins "sharing": "shared": it is asked again whenever a '
                "session attaches, and answered with that session's roots, so a server that "
                "keeps them works in the newest session's folders"
            )
        else:
            self.roots_warning = (
                f"server {self.name!r} asks its clients for roots (the folders it may work "
                "in): it runs one child per workspace, so no session sees another's"
            )
        self.log(self.roots_warning)
        self.publish(EventKind.WARNINGS, self.roots_warning)

    @property
    def sharing(self) -> Sharing:
        """How its sessions are placed now: its config's mode, or ``per-workspace`` for a
        shared server seen asking for roots whose entry does not pin ``"shared"``."""
        config = self.config
        if config.sharing == "shared" and self.asks_roots and not config.sharing_pinned:
            return "per-workspace"
        return config.sharing

    def _roots_stale(self) -> None:
        """The sessions sharing this child changed: it should ask for roots again."""
        task = asyncio.ensure_future(self.notify_upstream(ROOTS_CHANGED, None))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------ sleeping

    @property
    def on_demand(self) -> bool:
        """Started by the first request that needs it, stopped when idle. A child made for
        one session or workspace (NAME@suffix) never sleeps: its session needs it."""
        return self.config.start == "on-demand" and "@" not in self.name

    def idle_limit(self) -> float | None:
        """How long it may go with nothing that needs it (None: it never sleeps)."""
        return self.config.idle_stop_s if self.on_demand else None

    def wake(self, why: str) -> None:
        """A request needs a sleeping server: its run loop starts a child now."""
        if not self.respawn_now.is_set():
            self.log(f"waking: {why}")
        self.respawn_now.set()

    async def keep_catalog(self) -> None:
        """An on-demand server's catalog goes to disk after every listing (it answers from
        there while it sleeps, also after a tray restart)."""
        if not self.on_demand or self.catalog_dir is None:
            return
        try:
            await asyncio.to_thread(save_catalog, self.catalog_dir, self.config, self.catalog)
        except OSError as exc:
            self.log(f"could not keep its catalog in {self.catalog_dir}: {exc}")

    async def restore_catalog(self) -> bool:
        """The catalog an earlier run kept, if it is still this entry's; False: start to learn."""
        if self.catalog_dir is None:
            return False
        loaded = await asyncio.to_thread(load_catalog, self.catalog_dir, self.config)
        if loaded.catalog is None:
            self.log(f"on demand: starting it to learn its catalog ({loaded.why_not})")
            return False
        self.catalog.restore(loaded.catalog)
        return True

    # ------------------------------------------------------------ the run

    @property
    def generation(self) -> int:
        return self.runloop.generation

    @property
    def restarts(self) -> int:
        return self.runloop.restarts

    @property
    def current_run(self) -> Run | None:
        """The newest generation; only the run loop replaces it."""
        return self.runloop.current_run

    @property
    def last_error(self) -> str | None:
        return self._last_error

    def note_error(self, text: str) -> None:
        """The only writer of ``last_error`` (the run loop's exits, the call path's failures)."""
        self._last_error = text

    @property
    def calls(self) -> int:
        return self.calls_path.calls

    @property
    def failures(self) -> int:
        return self.calls_path.failures

    def log(self, line: str) -> None:
        self.logs.write(self.name, f"[mcp-tray] gen={self.generation} {line}")

    @property
    def log_path(self) -> Path:
        return self.logs.path(self.name)

    @property
    def pid(self) -> int | None:
        run = self.current_run
        if run is None or run.child is None or run.dead.is_set():
            return None
        return run.child.pid

    def snapshot(self) -> ServerSnapshot:
        run = self.current_run
        return ServerSnapshot(
            name=self.name,
            state=self.state,
            pid=self.pid,
            generation=self.generation,
            restarts=self.restarts,
            breaker=self.breaker.state,
            last_error=self.last_error,
            parked_reason=self.parked_reason,
            started_at=run.started_wall
            if run is not None and run.child is not None and not run.dead.is_set()
            else None,
            unproven_drops=self.budget.unproven,
            command=self.config.shown_command,
            sharing=self.sharing,
            log_path=str(self.log_path),
            protocol=self.catalog.version,
            sandbox=self.containment.describe(self.config),
            remote=self.config.remote is not None,
            retry_in=self.retry_in,
            latency_ms=self.latency_ms,
        )

    @property
    def retry_in(self) -> float | None:
        """Seconds until an unreachable remote is tried again (None when no try waits)."""
        if self.state is not ServerState.UNREACHABLE or self.runloop.retry_at is None:
            return None
        return max(0.0, self.runloop.retry_at - self.clock.monotonic())

    # ------------------------------------------------------------- breaker

    def breaker_moved(self) -> None:
        """Log and publish a breaker change; an open breaker half-opens on the clock.

        Compared with the state last published, not with what each caller saw
        before its call: four calls cut by one death move the breaker once.
        """
        after = self.breaker.state
        before = self._breaker_published
        if after is before:
            return
        self._breaker_published = after
        self.log(f"breaker {before.value} -> {after.value}")
        self.publish(EventKind.BREAKER)
        if self._half_open_timer is not None:
            self._half_open_timer.cancel()
            self._half_open_timer = None
        if after is BreakerState.OPEN:
            self._half_open_timer = asyncio.ensure_future(self._half_open_later())

    def close_breaker(self, why: str) -> bool:
        """A person said "try again" (a session's Reset): the breaker closes now rather
        than after its cooldown, unless there is no child to try (parked, stopped:
        Respawn and Start wake those). True when it was open and closed."""
        if self.breaker.state is BreakerState.CLOSED or self.state in (S.PARKED, S.STOPPED):
            return False
        self.breaker.reset()
        self.log(f"breaker closed: {why}")
        self.breaker_moved()
        return True

    async def _half_open_later(self) -> None:
        # The breaker's state follows the clock by itself; this only tells
        # subscribers the moment the cooldown ends, like every other move.
        await self.clock.sleep(self.breaker.retry_in())
        self._half_open_timer = None
        self.breaker_moved()

    # ------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start supervising (no-op when already running)."""
        self.wanted = True
        if self.running:
            return
        self._task = asyncio.create_task(self.runloop.supervise(), name=f"mcp-tray:{self.name}")
        self._task.add_done_callback(self._supervision_ended)

    def _supervision_ended(self, task: "asyncio.Task[None]") -> None:
        """The run loop never returns: if it raised, say why once and park, never hang "starting"."""
        if task.cancelled() or (exc := task.exception()) is None:
            return
        logger.error("supervision of %s failed", self.name, exc_info=exc)
        reason = f"mcp-tray's supervision of it failed ({type(exc).__name__}: {exc})"
        self.note_error(reason)
        if self._task is task:
            self._task = None
        if self.state in (S.READY, S.DEGRADED, S.STARTING):
            self.change_state(S.EXITED, reason)
        if self.state is S.EXITED:
            self.park(reason)

    async def stop(self) -> None:
        """Stop the child by the stop contract and stay stopped."""
        async with self._lifecycle:
            self.wanted = False
            await self._halt()
            if self._half_open_timer is not None:
                self._half_open_timer.cancel()
                self._half_open_timer = None
            if self.state is not S.STOPPED:
                self.change_state(S.STOPPED, "stopped on request")

    async def respawn(self) -> None:
        """User respawn: replace the child now; a parked server wakes with a budget of one."""
        async with self._lifecycle:
            self._relaunch_now()
            await self._halt()
            self.start()

    async def reconfigure(self, config: ServerConfig) -> bool:
        """A config edit for this server. True when it restarted (only if the launch changed)."""
        relaunch = (
            config.launch_key() != self.config.launch_key()
            or config.disabled != self.config.disabled
            or config.standby != self.config.standby
        )
        self.config = config
        self.idle.touch()  # its idle_stop_s (or start) may have changed
        if not relaunch:
            return False
        if config.disabled:
            await self.stop()
            return True
        async with self._lifecycle:
            self._relaunch_now()
            await self._halt()
            self.start()
        return True

    def _relaunch_now(self) -> None:
        # A person asked for a fresh child (respawn, config edit): calls must
        # reach it now, not after the cooldown the old one earned.
        self.breaker.reset()
        self.breaker_moved()
        if self.state is S.PARKED:
            # Woken by the user or a config change: one more unproven drop re-parks.
            self.budget.grant_one()
            self.parked_reason = None

    async def _halt(self) -> None:
        task = self._task
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._task = None

    def request_respawn(self) -> None:
        """A waiting call wants a fresh child now (skips the backoff, never the budget)."""
        self.respawn_requests += 1
        self.respawn_now.set()

    def park(self, reason: str) -> None:
        self.parked_reason = reason
        self.log(f"PARKED: {reason}")
        self.change_state(S.PARKED, reason)

    def prove(self, run: Run) -> None:
        """The run served a request or stayed up a keepalive interval."""
        if not run.proven:
            run.proven = True
            self.budget.proven()

    # -------------------------------------------------------------- requests

    def call_done(self, method: str, started: float, *, ok: bool) -> None:
        took = time.perf_counter() - started
        if ok and method == "tools/call":
            self.call_seconds.append(took)
        if self.on_call_done is not None:
            self.on_call_done(self.name, method, took, ok)

    @property
    def latency_ms(self) -> float | None:
        """The median of its latest answered tool calls (the Servers tab's Latency)."""
        if not self.call_seconds:
            return None
        return statistics.median(self.call_seconds) * 1000.0

    async def request(
        self, method: str, params: Mapping[str, Any] | None, caller: Caller = NO_CALLER
    ) -> dict[str, Any]:
        """Forward one request through the call path (docs/design.md §3.3).
        Raises ``CallError``."""
        return await self.calls_path.request(method, params, caller)

    async def call_tool(
        self, tool: str, arguments: Mapping[str, Any] | None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        return await self.request(
            "tools/call",
            {"name": tool, "arguments": dict(arguments or {})},
            Caller(timeout=timeout),
        )

    async def watch(self, uri: str, caller: Caller) -> None:
        """A first client subscribed to ``uri``: have the child tell mcp-tray of its updates."""
        if self.catalog.modern:
            self.routing.subscriptions.add(uri)
            self.idle.touch()
            self.listen.refresh()
        else:
            await self.request("resources/subscribe", {"uri": uri}, caller)

    async def unwatch(self, uri: str, caller: Caller) -> None:
        """The last client subscribed to ``uri`` left."""
        if self.catalog.modern:
            self.routing.subscriptions.discard(uri)
            self.idle.touch()
            self.listen.refresh()
        else:
            await self.request("resources/unsubscribe", {"uri": uri}, caller)

    async def notify_upstream(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Pass a client notification to the live child (dropped while there is none)."""
        run = self.current_run
        if run is not None and run.upstream is not None and run.alive():
            await run.upstream.notify(method, params)
