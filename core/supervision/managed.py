"""One configured server: its run loop, its state machine, and its call path.

The run loop (one asyncio task per server) spawns a child, completes the
handshake, watches the child, and after an exit waits out a backoff or parks
the server when its rapid-drop budget is spent. Only ``_change_state`` sets
the state; it checks ``ALLOWED_TRANSITIONS`` and emits the event.

The call path (``request``) is DESIGN 3.3: a call that finds the child dead
asks for ONE respawn and waits for a *new* ready session; a call whose child
dies under it is cancelled at once and replayed once only when that is safe.
Nothing here hot-cycles a server: every call asks for at most one respawn,
and what happens after that is the budget's decision.
"""

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core import __version__
from core.base.clock import Clock, wait_within
from core.base.errors import (
    BreakerOpen,
    CallError,
    CallTimedOut,
    ExitedAgain,
    ExitedMidCall,
    ServerParked,
    ServerStopped,
    SubprocessExited,
    UpstreamError,
)
from core.base.snapshot import Event, ServerSnapshot
from core.base.states import ALLOWED_TRANSITIONS, BreakerState, InvalidTransition, ServerState
from core.protocol.jsonrpc import METHOD_NOT_FOUND, REQUEST_TIMEOUT, ProgressFn, RpcError
from core.settings.config import ServerConfig
from core.supervision.breakers import ServerBreaker
from core.supervision.child import (
    ChildProcess,
    SpawnError,
    StopTiming,
    child_environment,
    describe_returncode,
)
from core.supervision.logs import LogSink
from core.supervision.restart_policy import (
    BACKOFF_CAP_SECONDS,
    BACKOFF_INITIAL_SECONDS,
    Backoff,
    RapidDropBudget,
)
from core.supervision.upstream import ConnectionLost, Upstream

S = ServerState

#: How long a call waits for a *new* ready session after asking for a respawn.
RESPAWN_WAIT_SECONDS: Final = 15.0
#: Spawn to ready (handshake + tools listed); npx may download for a while.
START_TIMEOUT_SECONDS: Final = 60.0
#: A health ping slower than this marks the server degraded.
PING_TIMEOUT_SECONDS: Final = 5.0
#: A parked server tries one start on its own this often.
SELF_PROBE_SECONDS: Final = 300.0
#: After stdout closes, how long the child gets to exit on its own before the
#: stop contract ends it (EOF normally precedes the exit by a millisecond).
EOF_EXIT_GRACE_SECONDS: Final = 0.5
#: Lines of stderr kept in memory per server for the UI.
STDERR_RING_LINES: Final = 500

#: Methods that change nothing on the server, or change it idempotently: a
#: call of one of these cut by a crash is replayed after the respawn.
REPEATABLE_METHODS: Final = frozenset(
    {
        "ping",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)


@dataclass(frozen=True)
class Timing:
    """Every wait of a server's life; tests shrink them or move a FakeClock."""

    respawn_wait: float = RESPAWN_WAIT_SECONDS
    start_timeout: float = START_TIMEOUT_SECONDS
    ping_timeout: float = PING_TIMEOUT_SECONDS
    self_probe: float = SELF_PROBE_SECONDS
    eof_exit_grace: float = EOF_EXIT_GRACE_SECONDS
    backoff_initial: float = BACKOFF_INITIAL_SECONDS
    backoff_cap: float = BACKOFF_CAP_SECONDS
    stop: StopTiming = field(default_factory=StopTiming)


EnvResolver = Callable[[ServerConfig], Mapping[str, str]]
ServerRequestRouter = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
NotificationListener = Callable[[str, str, Mapping[str, Any] | None], None]


class Run:
    """One generation: a child, its upstream session, and how it ended."""

    def __init__(self, generation: int, started: float) -> None:
        self.generation = generation
        self.started = started
        self.started_wall = time.time()
        self.child: ChildProcess | None = None
        self.upstream: Upstream | None = None
        self.ready = asyncio.Event()
        #: Set the moment the leader's exit (or a failed start) is known.
        self.dead = asyncio.Event()
        self.exit_text = ""
        self.proven = False
        #: Ended by the user or mcp-tray itself (stop, respawn): not a drop.
        self.intentional = False

    def alive(self) -> bool:
        return not self.dead.is_set() and self.child is not None and self.child.is_alive()

    def mark_dead(self, text: str) -> bool:
        if self.dead.is_set():
            return False
        self.exit_text = text
        self.dead.set()
        return True


class _RunDied(Exception):
    def __init__(self, run: Run) -> None:
        self.run = run


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
        budget: RapidDropBudget | None = None,
        backoff: Backoff | None = None,
        breaker: ServerBreaker | None = None,
        env_resolver: EnvResolver | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self._owner = owner
        self._logs = logs
        self._clock = clock
        self.timing = timing
        self._emit = emit
        self.budget = budget or RapidDropBudget()
        self.backoff = backoff or Backoff(initial=timing.backoff_initial, cap=timing.backoff_cap)
        self.breaker = breaker or ServerBreaker(clock)
        self._env_resolver = env_resolver or (lambda cfg: cfg.env)
        self.state = S.STOPPED
        self.generation = 0
        self.restarts = 0
        self.parked_reason: str | None = None
        self.last_error: str | None = None
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_RING_LINES)
        #: Last known lists, served to clients while the server respawns.
        self.tools: dict[str, dict[str, Any]] = {}
        self.lists: dict[str, list[dict[str, Any]]] = {}
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.instructions: str | None = None
        #: True once a handshake listed tools/resources/prompts at least once.
        self.lists_known = False
        #: Client-set state replayed on every new child (shared by all sessions).
        self.subscriptions: set[str] = set()
        self.log_level: str | None = None
        #: Call outcomes, for /metrics: calls, failures, and a latency hook.
        self.calls = 0
        self.failures = 0
        self.on_call_done: Callable[[str, str, float, bool], None] | None = None
        self.notification_listeners: list[NotificationListener] = []
        self._run: Run | None = None
        self._task: asyncio.Task[None] | None = None
        #: What the user wants (start/stop); a respawn keeps it True throughout.
        self.wanted = False
        #: Serialises stop/respawn/reconfigure: a second cancel must never cut
        #: the first one's stop contract short.
        self._lifecycle = asyncio.Lock()
        self._respawn_now = asyncio.Event()
        self._changed = asyncio.Event()
        #: Server->client request routers of calls in flight, newest last.
        self._routers: dict[int, ServerRequestRouter] = {}
        self._router_ids = 0
        self.respawn_requests = 0

    # ----------------------------------------------------------------- state

    def _change_state(self, new: ServerState, why: str) -> None:
        """The only writer of ``self.state``."""
        old = self.state
        if new not in ALLOWED_TRANSITIONS[old]:
            raise InvalidTransition(self.name, old, new)
        self.state = new
        self.log(f"state {old.value} -> {new.value}: {why}")
        self._broadcast()
        self._emit(Event("state", self.name, self.snapshot()))

    def changed(self) -> asyncio.Event:
        """An event set at the next change of state or run (then replaced)."""
        return self._changed

    def _broadcast(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def log(self, line: str) -> None:
        self._logs.write(self.name, f"[mcp-tray] gen={self.generation} {line}")

    @property
    def log_path(self) -> Path:
        return self._logs.path(self.name)

    @property
    def pid(self) -> int | None:
        run = self._run
        if run is None or run.child is None or run.dead.is_set():
            return None
        return run.child.pid

    def snapshot(self) -> ServerSnapshot:
        run = self._run
        return ServerSnapshot(
            name=self.name,
            state=self.state,
            pid=self.pid,
            generation=self.generation,
            restarts=self.restarts,
            breaker=self.breaker.state,
            breaker_failures=self.breaker.failures,
            last_error=self.last_error,
            parked_reason=self.parked_reason,
            started_at=run.started_wall if run is not None and self.pid is not None else None,
            unproven_drops=self.budget.unproven,
            command=" ".join([self.config.command, *self.config.args]),
            sharing=self.config.sharing,
            log_path=str(self.log_path),
        )

    # ------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start supervising (no-op when already running)."""
        self.wanted = True
        if self.running:
            return
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-tray:{self.name}")

    async def stop(self) -> None:
        """Stop the child by the stop contract and stay stopped."""
        async with self._lifecycle:
            self.wanted = False
            await self._halt()
            if self.state is not S.STOPPED:
                self._change_state(S.STOPPED, "stopped on request")

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
        )
        self.config = config
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

    async def _supervise(self) -> None:
        while True:
            run = await self._run_once()
            if self.state is S.PARKED:
                await self._wait_parked()
                continue
            if run.proven:
                delay = self.backoff.delay(1)
            else:
                delay = self.backoff.delay(self.budget.unproven)
            await self._backoff(delay)

    async def _wait_parked(self) -> None:
        # Respawn and config edits wake a parked server by replacing this
        # task (``_relaunch_now``); left alone, it probes once in a while.
        await self._clock.sleep(self.timing.self_probe)
        self.log("self-probe: trying one start while parked")
        self.budget.grant_one()

    async def _backoff(self, delay: float) -> None:
        if self._respawn_now.is_set():
            return
        self.log(f"respawning in {delay:.1f} s")
        waker = asyncio.ensure_future(self._respawn_now.wait())
        sleeper = asyncio.ensure_future(self._clock.sleep_until(self._clock.monotonic() + delay))
        try:
            await asyncio.wait([waker, sleeper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waker.cancel()
            sleeper.cancel()

    def request_respawn(self) -> None:
        """A waiting call wants a fresh child now (skips the backoff, never the budget)."""
        self.respawn_requests += 1
        self._respawn_now.set()

    def _park(self, reason: str) -> None:
        self.parked_reason = reason
        self.log(f"PARKED: {reason}")
        self._change_state(S.PARKED, reason)

    async def _run_once(self) -> Run:
        self._respawn_now.clear()
        self.generation += 1
        if self.generation > 1:
            self.restarts += 1
        run = Run(self.generation, self._clock.monotonic())
        self._run = run
        self._change_state(S.STARTING, f"spawning generation {run.generation}")
        try:
            child = await ChildProcess.spawn(
                self.config.command,
                self.config.args,
                env=child_environment(await self._resolve_env(), self._owner, __version__),
                cwd=self.config.cwd,
            )
        except SpawnError as exc:
            run.mark_dead(exc.reason)
            self.last_error = f"failed to start: {exc.reason}"
            self.log(f"generation {run.generation} failed to start: {exc.reason}")
            self._broadcast()
            if exc.permanent:
                self._park(exc.reason)
            else:
                self._change_state(S.EXITED, f"failed to start: {exc.reason}")
                self._account_end(run)
            return run
        run.child = child
        self.log(f"generation {run.generation} spawned: pid {child.pid}: {' '.join(child.argv)}")
        stderr_task = asyncio.ensure_future(self._pump_stderr(child, run.generation))
        try:
            await self._serve(run, child)
        except asyncio.CancelledError:
            run.intentional = True
            raise
        finally:
            await self._finish(run, child, stderr_task)
        self._account_end(run)
        return run

    async def _resolve_env(self) -> Mapping[str, str]:
        if any("${keyring:" in value for value in self.config.env.values()):
            # The keyring may block (D-Bus, an unlock prompt): not on the loop.
            return await asyncio.to_thread(self._env_resolver, self.config)
        return self._env_resolver(self.config)

    async def _serve(self, run: Run, child: ChildProcess) -> None:
        async with Upstream.open(
            child,
            on_request=self._route_server_request,
            on_notification=self._on_notification,
            on_junk=lambda line: self._stderr_line(
                run.generation, f"(stdout, not JSON-RPC) {line}"
            ),
        ) as upstream:
            run.upstream = upstream
            handshake = asyncio.ensure_future(self._handshake(run, upstream))
            ended = asyncio.ensure_future(self._watch_end(run, child, upstream))
            try:
                done, _ = await asyncio.wait(
                    [handshake, ended], return_when=asyncio.FIRST_COMPLETED
                )
                if handshake in done and handshake.exception() is None and not run.dead.is_set():
                    run.ready.set()
                    self._change_state(S.READY, "handshake done, tools listed")
                    health = asyncio.ensure_future(self._health(run, upstream))
                    try:
                        await ended
                    finally:
                        health.cancel()
                        await asyncio.gather(health, return_exceptions=True)
                elif handshake.done() and handshake.exception() is not None:
                    detail = _describe_failure(handshake.exception())
                    self.last_error = f"start failed: {detail}"
                    # The child is alive but unusable: the stop contract ends it.
                    if child.is_alive():
                        await child.stop(self.timing.stop, self.log)
                    self._on_dead(
                        run,
                        f"{describe_returncode(child.returncode)} during the handshake ({detail})",
                    )
                else:
                    await ended
            finally:
                for task in (handshake, ended):
                    task.cancel()
                await asyncio.gather(handshake, ended, return_exceptions=True)

    async def _handshake(self, run: Run, upstream: Upstream) -> None:
        async def handshake() -> None:
            result = await upstream.initialize()
            self.capabilities = dict(upstream.capabilities)
            info = result.get("serverInfo")
            self.server_info = dict(info) if isinstance(info, dict) else {}
            instructions = result.get("instructions")
            self.instructions = instructions if isinstance(instructions, str) else None
            before = {kind: list(items) for kind, items in self.lists.items()}
            await self._refresh_lists(upstream)
            await self._replay_session_state(upstream)
            self.lists_known = True
            self._broadcast()
            if run.generation > 1:
                # Clients only learn about a respawned server's new tools
                # (or lost ones) if someone tells them.
                for kind in ("tools", "resources", "prompts"):
                    if self.lists.get(kind, []) != before.get(kind, []):
                        self._emit(Event("lists", self.name, text=kind))
                        self._notify_listeners(f"notifications/{kind}/list_changed", None)

        finished, _ = await wait_within(self._clock, handshake(), self.timing.start_timeout)
        if not finished:
            raise TimeoutError(f"no handshake within {self.timing.start_timeout:g} s")

    async def _replay_session_state(self, upstream: Upstream) -> None:
        """Subscriptions and the log level clients set survive a respawn."""
        with contextlib.suppress(RpcError, ConnectionLost):
            if self.log_level is not None and "logging" in self.capabilities:
                await upstream.request("logging/setLevel", {"level": self.log_level})
            for uri in sorted(self.subscriptions):
                await upstream.request("resources/subscribe", {"uri": uri})

    def _remember_session_state(self, method: str, params: Mapping[str, Any] | None) -> None:
        params = params or {}
        if method == "logging/setLevel" and isinstance(params.get("level"), str):
            self.log_level = params["level"]
        elif method == "resources/subscribe" and isinstance(params.get("uri"), str):
            self.subscriptions.add(params["uri"])
        elif method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
            self.subscriptions.discard(params["uri"])

    def _notify_listeners(self, method: str, params: Mapping[str, Any] | None) -> None:
        for listener in list(self.notification_listeners):
            listener(self.name, method, params)

    async def _refresh_lists(self, upstream: Upstream, only: str | None = None) -> None:
        kinds = {"tools": "tools/list", "resources": "resources/list", "prompts": "prompts/list"}
        for kind, method in kinds.items():
            if only is not None and kind != only:
                continue
            if kind not in self.capabilities:
                self.lists[kind] = []
                continue
            self.lists[kind] = await upstream.list_all(method, kind)
            if kind == "resources" and self.capabilities.get("resources"):
                with contextlib.suppress(RpcError):
                    self.lists["resourceTemplates"] = await upstream.list_all(
                        "resources/templates/list", "resourceTemplates"
                    )
        self.tools = {
            t["name"]: t for t in self.lists.get("tools", []) if isinstance(t.get("name"), str)
        }

    async def _watch_end(self, run: Run, child: ChildProcess, upstream: Upstream) -> None:
        """Return when the run is over: the leader exited, or its stdout closed."""
        upstream_closed = asyncio.ensure_future(upstream.closed.wait())
        try:
            watched: list[asyncio.Future[Any]] = [child.exited, upstream_closed]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            upstream_closed.cancel()
        if not child.exited.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(child.exited), self.timing.eof_exit_grace)
        if not child.exited.done():
            self.log("the child closed its stdout but kept running: stopping it")
            self._on_dead(run, "closed its stdout (the MCP channel) while still running")
            await child.stop(self.timing.stop, self.log)
            return
        self._on_dead(run, describe_returncode(child.returncode))

    def _on_dead(self, run: Run, text: str) -> None:
        if not run.mark_dead(text):
            return
        self.log(f"generation {run.generation} ended: {text}")
        if run.intentional:
            self._broadcast()
            return
        self.last_error = f"generation {run.generation} {text}"
        self._change_state(S.EXITED, text)

    async def _finish(
        self, run: Run, child: ChildProcess, stderr_task: "asyncio.Future[None]"
    ) -> None:
        """Whatever ended the run, leave no process of its group behind."""
        if child.is_alive():
            run.intentional = True
            await child.stop(self.timing.stop, self.log)
        else:
            await child.end_group(self.timing.stop, self.log)
        if not run.dead.is_set():
            self._on_dead(run, describe_returncode(child.returncode))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stderr_task, 0.5)
        stderr_task.cancel()

    def _account_end(self, run: Run) -> None:
        if run.intentional:
            return
        if run.proven or self._clock.monotonic() - run.started >= self.config.keepalive_seconds:
            self._prove(run)
            return
        if self.budget.dropped():
            self._park(
                f"it exited {self.budget.unproven} times in a row before it was up "
                f"{self.config.keepalive_seconds:g} s or served a call (last: {run.exit_text})"
            )

    def _prove(self, run: Run) -> None:
        if not run.proven:
            run.proven = True
            self.budget.proven()

    async def _health(self, run: Run, upstream: Upstream) -> None:
        while True:
            await self._clock.sleep(self.config.keepalive_seconds)
            if run.dead.is_set():
                return
            # Up a whole keepalive interval: the run is proven.
            self._prove(run)
            answered, pinged = await wait_within(
                self._clock, _answered(upstream.ping(None)), self.timing.ping_timeout
            )
            healthy = answered and pinged is True
            if run.dead.is_set():
                return
            if healthy and self.state is S.DEGRADED:
                self._change_state(S.READY, "health ping answered again")
            elif not healthy and self.state is S.READY and run.alive():
                self._change_state(S.DEGRADED, "health ping failed while the child lives")

    async def _pump_stderr(self, child: ChildProcess, generation: int) -> None:
        while True:
            line = await child.stderr.readline()
            if not line:
                return
            self._stderr_line(generation, line.decode("utf-8", errors="replace").rstrip("\r\n"))

    def _stderr_line(self, generation: int, text: str) -> None:
        line = f"[gen {generation}] {text}"
        self.stderr_tail.append(line)
        self._logs.write(self.name, f"gen={generation} {text}")
        self._emit(Event("stderr", self.name, text=line))

    # ------------------------------------------- server -> client traffic

    async def _route_server_request(
        self, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Hand a server's own request to the client whose call is in flight."""
        if not self._routers:
            raise RpcError(
                METHOD_NOT_FOUND, f"{method!r}: no client call is in flight to answer it"
            )
        router = self._routers[max(self._routers)]
        return await router(method, params)

    async def _on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method.endswith("/list_changed"):
            kind = method.split("/")[1]
            run = self._run
            if (
                run is not None
                and run.upstream is not None
                and kind in ("tools", "resources", "prompts")
            ):
                with contextlib.suppress(RpcError, ConnectionLost):
                    await self._refresh_lists(run.upstream, only=kind)
            self._emit(Event("lists", self.name, text=kind))
        self._notify_listeners(method, params)

    # -------------------------------------------------------------- call path

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFn | None = None,
        on_server_request: ServerRequestRouter | None = None,
    ) -> dict[str, Any]:
        """Forward one request through the call path (DESIGN 3.3). Raises ``CallError``."""
        self.calls += 1
        refusal: CallError | None = None
        if self.state is S.PARKED:
            refusal = ServerParked(self.name, self.parked_reason or "it kept dying")
        elif not self.wanted:
            refusal = ServerStopped(self.name)
        else:
            admission = self.breaker.admit()
            if not admission.allowed:
                refusal = BreakerOpen(
                    self.name, self.breaker.failures, self.breaker.last_error, admission.retry_in
                )
        if refusal is not None:
            # Refused before anything was sent: counted, never spawned for.
            self.failures += 1
            raise refusal
        before = self.breaker.state
        router_id = 0
        if on_server_request is not None:
            self._router_ids += 1
            router_id = self._router_ids
            self._routers[router_id] = on_server_request
        started = time.perf_counter()
        try:
            result = await self._deliver(method, params, timeout, on_progress)
        except CallError as exc:
            self.failures += 1
            self._call_done(method, started, ok=False)
            if exc.transport_failure:
                self.breaker.failure(str(exc))
            elif isinstance(exc, UpstreamError):
                self.breaker.success()
            else:
                self.breaker.neutral()
            self.last_error = str(exc)
            self._breaker_event(before)
            raise
        except BaseException:
            self.breaker.neutral()
            raise
        finally:
            self._routers.pop(router_id, None)
        self.breaker.success()
        self._breaker_event(before)
        self._remember_session_state(method, params)
        self._call_done(method, started, ok=True)
        return result

    def _call_done(self, method: str, started: float, *, ok: bool) -> None:
        if self.on_call_done is not None:
            self.on_call_done(self.name, method, time.perf_counter() - started, ok)

    async def notify_upstream(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Pass a client notification to the live child (dropped while there is none)."""
        run = self._run
        if run is not None and run.upstream is not None and run.alive():
            await run.upstream.notify(method, params)

    async def call_tool(
        self, tool: str, arguments: Mapping[str, Any] | None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        return await self.request(
            "tools/call", {"name": tool, "arguments": dict(arguments or {})}, timeout=timeout
        )

    def _breaker_event(self, before: BreakerState) -> None:
        after = self.breaker.state
        if after is not before:
            self.log(f"breaker {before.value} -> {after.value}")
            self._emit(Event("breaker", self.name, self.snapshot()))

    async def _deliver(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None,
        on_progress: ProgressFn | None,
    ) -> dict[str, Any]:
        run = self._run
        respawned = False
        if run is None or (not run.dead.is_set() and not run.ready.is_set()):
            # Starting (or about to): wait for this start to finish, asking nothing.
            try:
                run = await self._await_usable(
                    max(1, run.generation if run else self.generation + 1),
                    self.timing.start_timeout,
                )
            except _RunDied as died:
                run = died.run
            except _WindowOver:
                raise CallTimedOut(
                    self.name, f"{method} (server still starting)", self.timing.start_timeout
                ) from None
        if not run.alive():
            # Pre-call gate: the child is dead, so the call cannot have reached it.
            dead = run
            self.request_respawn()
            respawned = True
            run = await self._await_fresh(dead)
        try:
            return await self._send(run, method, params, timeout, on_progress)
        except ConnectionLost:
            await self._confirm_dead(run)
        # Mid-call race: the child died with the call in flight.
        if respawned:
            raise ExitedAgain(self.name, run.generation, run.exit_text, self.log_path)
        safe, why_not = self._replay_safe(method, params)
        self.request_respawn()
        if not safe:
            raise ExitedMidCall(self.name, run.generation, run.exit_text, why_not, self.log_path)
        retry_run = await self._await_fresh(run)
        try:
            return await self._send(retry_run, method, params, timeout, on_progress)
        except ConnectionLost:
            await self._confirm_dead(retry_run)
            raise ExitedAgain(
                self.name, retry_run.generation, retry_run.exit_text, self.log_path
            ) from None

    async def _send(
        self,
        run: Run,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None,
        on_progress: ProgressFn | None,
    ) -> dict[str, Any]:
        upstream = run.upstream
        if upstream is None:
            raise ConnectionLost("no upstream session")
        try:
            result = await upstream.request(
                method, params, timeout=timeout, on_progress=on_progress
            )
        except RpcError as exc:
            if exc.code == REQUEST_TIMEOUT:
                if not run.alive():
                    # Truth over the SDK's wording: the child died, nothing timed out.
                    raise ConnectionLost("the child exited while the call waited") from None
                raise CallTimedOut(self.name, method, timeout or 0.0) from None
            raise UpstreamError(self.name, exc.code, exc.message, exc.data) from None
        self._prove(run)
        return result

    async def _confirm_dead(self, run: Run) -> None:
        """A closed transport means the run is ending; wait until its exit is known."""
        # The run loop marks it dead within the EOF grace (or after stopping a
        # child that closed stdout but lived on); bound it anyway.
        limit = (
            self.timing.eof_exit_grace
            + self.timing.stop.stdin_close_grace
            + self.timing.stop.sigterm_grace
            + 1.0
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.dead.wait(), limit)
        if not run.exit_text:
            run.exit_text = "the connection to it closed"

    def _replay_safe(self, method: str, params: Mapping[str, Any] | None) -> tuple[bool, str]:
        policy = self.config.retry
        if policy == "always":
            return True, ""
        if policy == "never":
            return False, 'this server\'s config says "retry": "never"'
        if method in REPEATABLE_METHODS:
            return True, ""
        if method == "tools/call":
            name = (params or {}).get("name")
            tool = self.tools.get(name) if isinstance(name, str) else None
            annotations = (tool or {}).get("annotations") or {}
            if annotations.get("readOnlyHint") or annotations.get("idempotentHint"):
                return True, ""
            return False, (
                f"tool {name!r} is not marked readOnlyHint or idempotentHint; "
                f'set "retry": "always" on server {self.name!r} if its calls are safe to repeat'
            )
        return False, f"{method!r} is not known to be safe to repeat"

    async def _await_fresh(self, dead: Run) -> Run:
        """After asking for a respawn: a new, ready, living run, or the truth about why not."""
        try:
            return await self._await_usable(dead.generation + 1, self.timing.respawn_wait)
        except _RunDied as died:
            raise ExitedAgain(
                self.name, died.run.generation, died.run.exit_text or "exited", self.log_path
            ) from None
        except _WindowOver:
            raise SubprocessExited(
                self.name,
                dead.generation,
                dead.exit_text or "exited",
                self.timing.respawn_wait,
                self.log_path,
            ) from None

    async def _await_usable(self, min_generation: int, window: float) -> Run:
        async def watch() -> Run:
            while True:
                changed = self._changed
                if self.state is S.PARKED:
                    raise ServerParked(self.name, self.parked_reason or "it kept dying")
                if self.state is S.STOPPED:
                    raise ServerStopped(self.name)
                run = self._run
                if run is not None and run.generation >= min_generation:
                    if run.dead.is_set():
                        raise _RunDied(run)
                    if run.ready.is_set():
                        if run.alive():
                            return run
                        raise _RunDied(run)
                await changed.wait()

        finished, run = await wait_within(self._clock, watch(), window)
        if not finished or run is None:
            raise _WindowOver
        return run


class _WindowOver(Exception):
    pass


async def _answered(awaitable: Awaitable[None]) -> bool:
    """True when the health ping answered; any failure is just 'unhealthy'."""
    try:
        await awaitable
    except (RpcError, ConnectionLost, ValueError):
        return False
    return True


def _describe_failure(exc: BaseException | None) -> str:
    if isinstance(exc, RpcError):
        return f"the server answered initialize with error {exc.code}: {exc.message}"
    if isinstance(exc, ConnectionLost):
        return "its stdout closed before the handshake finished"
    if isinstance(exc, TimeoutError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
