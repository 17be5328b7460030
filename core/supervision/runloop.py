"""The run loop of one server: spawn, handshake, watch, account for the end, repeat.

One asyncio task per server runs ``RunLoop.supervise``. It is the only
writer of runs (core.supervision.run says who decides what): it spawns a
child through the injected spawner, completes the handshake, marks the run
ready, watches for its end (the leader's exit or stdout EOF), stops what is
left of the group by the stop contract, and then either waits out a backoff
or parks the server when the rapid-drop budget is spent. State changes go
through the server's one writer, ``ManagedServer.change_state``.
"""

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from core import __version__
from core.base.clock import Clock, wait_within
from core.base.errors import ConnectionLost, RpcError, SpawnError
from core.base.snapshot import AlertKind, Event, EventKind
from core.base.states import ServerState
from core.protocol.eras import SUBSCRIPTION_ID_META_KEY
from core.protocol.jsonrpc import REQUEST_TIMEOUT
from core.settings.config import ServerConfig
from core.supervision.catalog import LIST_KINDS, Catalog
from core.supervision.child import (
    Child,
    Spawner,
    child_environment,
    resolve_command,
)
from core.supervision.containment import Containment, root_folders
from core.supervision.health import keep_healthy
from core.supervision.idle import IdleWatch
from core.supervision.limits import DRAIN_SECONDS, LimitWatch
from core.supervision.listen import UpstreamListen
from core.supervision.logs import LogSink
from core.supervision.remote_open import open_remote
from core.supervision.restart_policy import Backoff, RapidDropBudget
from core.supervision.routing import Routing
from core.supervision.run import Run, Timing
from core.supervision.standby import Spare, Standby
from core.supervision.upstream import Handshake, Upstream, describe_start_failure

S = ServerState
#: The longest an unreachable remote waits between tries (its backoff stops doubling here).
UNREACHABLE_RETRY_CAP = 30.0


class RunHost(Protocol):
    """What the run loop reads of its server, and what it may change there (each
    through the server's one writer: ``change_state``, ``park``, ``prove``, ``note_error``)."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> ServerConfig: ...
    @property
    def owner(self) -> str: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def timing(self) -> Timing: ...
    @property
    def spawner(self) -> Spawner: ...
    @property
    def env_resolver(self) -> Callable[[ServerConfig], Mapping[str, str]]: ...
    @property
    def budget(self) -> RapidDropBudget: ...
    @property
    def backoff(self) -> Backoff: ...
    @property
    def respawn_now(self) -> asyncio.Event: ...
    @property
    def state(self) -> ServerState: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def routing(self) -> Routing: ...
    @property
    def listen(self) -> UpstreamListen: ...
    @property
    def logs(self) -> LogSink: ...
    @property
    def stderr_tail(self) -> deque[str]: ...
    @property
    def on_demand(self) -> bool: ...
    @property
    def idle(self) -> IdleWatch: ...
    @property
    def sign_in_file(self) -> Path | None: ...

    def idle_limit(self) -> float | None: ...
    async def keep_catalog(self) -> None: ...
    async def restore_catalog(self) -> bool: ...
    @property
    def containment(self) -> Containment: ...

    def change_state(self, new: ServerState, why: str) -> None: ...
    def park(self, reason: str) -> None: ...
    def prove(self, run: Run) -> None: ...
    def note_error(self, text: str) -> None: ...
    def log(self, line: str) -> None: ...
    def broadcast(self) -> None: ...
    def publish(
        self, kind: EventKind, text: str | None = None, alert: AlertKind | None = None
    ) -> None: ...
    def emit(self, event: Event) -> None: ...


class RunLoop:
    def __init__(self, server: RunHost) -> None:
        self.server = server
        #: The run counter (+1 on every spawn), the respawns, and the newest run:
        #: only the run loop writes them.
        self.generation = 0
        self.restarts = 0
        self.current_run: Run | None = None
        self.standby = Standby(
            self.spawn_fresh,
            lambda upstream: self.open_session(
                upstream, lambda text: self.server.log(f"standby: {text}")
            ),
            lambda method, params: self.server.routing.route_request(method, params),
            server.log,
            lambda text: self.stderr_line(self.generation + 1, text),
            lambda: self.server.timing.start_timeout,
            server.timing.stop,
            server.clock,
        )
        #: Whether the last run was replaced for going over its memory limit.
        self.last_over_limit = False
        #: A remote's tries in a row that could not reach it, and when the next one is due.
        self.unreachable_runs = 0
        self.retry_at: float | None = None

    @property
    def wants_standby(self) -> bool:
        # A child made for one session or workspace (a placement child of a standby
        # entry) takes none: a spare could not know whose it would be.
        config = self.server.config
        return config.standby and config.sharing == "shared"

    async def supervise(self) -> None:
        try:
            await self._supervise()
        finally:
            # Stop, respawn, a config edit: the spare goes with the run loop.
            await self.standby.end()

    async def _supervise(self) -> None:
        server = self.server
        if server.on_demand and server.state is S.STOPPED and await server.restore_catalog():
            server.change_state(
                S.SLEEPING, "on demand: its kept catalog answers lists until a request needs it"
            )
        while True:
            if server.state is S.SLEEPING:
                # A request wakes it (``ManagedServer.wake``); so does Respawn, by
                # replacing this task.
                await server.respawn_now.wait()
            run = await self.run_once()
            if server.state is S.SLEEPING:
                continue
            if server.state is S.NEEDS_SIGN_IN:
                # Until the person signs in: mcp-tray login ends with a Respawn, which
                # replaces this task (a new one tries at once).
                await server.respawn_now.wait()
                continue
            if server.state is S.PARKED:
                await self.wait_parked()
                continue
            if self.wants_standby and self.standby.ready:
                continue  # the spare is up: it takes over now, not after a backoff
            if server.state is S.UNREACHABLE:
                # Never parked for it: a network or a remote comes back by itself.
                self.unreachable_runs += 1
                delay = min(server.backoff.delay(self.unreachable_runs), UNREACHABLE_RETRY_CAP)
            else:
                self.unreachable_runs = 0
                delay = server.backoff.delay(1 if run.proven else server.budget.unproven)
            self.retry_at = server.clock.monotonic() + delay
            try:
                await self.backoff(delay)
            finally:
                self.retry_at = None

    async def wait_parked(self) -> None:
        server = self.server
        # Respawn and config edits wake a parked server by replacing this
        # task (``_relaunch_now``); left alone, it probes once in a while.
        await server.clock.sleep(server.timing.self_probe)
        server.log("self-probe: trying one start while parked")
        server.budget.grant_one()

    async def backoff(self, delay: float) -> None:
        server = self.server
        if server.respawn_now.is_set():
            return
        server.log(f"respawning in {delay:.1f} s")
        await wait_within(server.clock, server.respawn_now.wait(), delay)

    async def run_once(self) -> Run:
        server = self.server
        server.respawn_now.clear()
        self.generation += 1
        if self.generation > 1:
            self.restarts += 1
        run = Run(self.generation, server.clock.monotonic())
        self.current_run = run
        server.routing.new_run()
        server.change_state(S.STARTING, f"spawning generation {run.generation}")
        spare = self.standby.take() if self.wants_standby else None
        try:
            child = spare.child if spare is not None else await self.spawn_fresh()
        except SpawnError as exc:
            run.mark_dead(exc.reason)
            server.note_error(f"failed to start: {exc.reason}")
            server.log(f"generation {run.generation} failed to start: {exc.reason}")
            server.broadcast()
            if exc.permanent:
                server.park(exc.reason)
            else:
                server.change_state(S.EXITED, f"failed to start: {exc.reason}")
                self.account_end(run)
            return run
        run.child = child
        if child.pid is None:
            server.log(f"generation {run.generation} connecting to {' '.join(child.argv)}")
        else:
            server.log(
                f"generation {run.generation} spawned: pid {child.pid}: {' '.join(child.argv)}"
            )
        stderr_task = asyncio.ensure_future(self.pump_stderr(child, run.generation))
        try:
            await self.serve(run, child, spare)
        except asyncio.CancelledError:
            run.intentional = True
            raise
        finally:
            await self.finish(run, child, stderr_task)
        self.account_end(run)
        return run

    async def spawn_fresh(self) -> Child:
        """Start the child; every way that can fail is a ``SpawnError`` with the reason."""
        server = self.server
        config = server.config
        if config.remote is not None:
            return await open_remote(
                server.name, config.remote, await self.resolve_env(), server.sign_in_file
            )
        try:
            env = child_environment(await self.resolve_env(), server.owner, __version__)
            command, args = config.command, config.args
            if config.sandbox is not None:
                executable = resolve_command(command, env, config.cwd)
                prepared = await server.containment.prepare(config, env, executable, self.roots)
                if prepared.warning is not None:
                    server.log(f"WARNING: {prepared.warning}")
                    server.publish(EventKind.WARNINGS, prepared.warning)
                command, args, env = prepared.command, prepared.args, dict(prepared.env)
            return await server.spawner(command, args, env=env, cwd=config.cwd)
        except (SpawnError, asyncio.CancelledError):
            raise
        except Exception as exc:
            # A value exec cannot take (a NUL, an '=' in an env key, a lone
            # surrogate) or a broken secret store: retrying cannot fix it.
            raise SpawnError(
                f"cannot start {server.config.command!r}: {type(exc).__name__}: {exc}",
                permanent=True,
            ) from exc

    async def roots(self) -> list[str]:
        """The folders of the sessions this child serves (none for a shared child)."""
        source = self.server.routing.roots_source
        if source is None:
            return []
        answer = await source()
        return root_folders(answer.get("roots") or ())

    async def watch_limits(
        self, run: Run, child: Child, upstream: Upstream, ended: "asyncio.Future[None]"
    ) -> None:
        """Wait for the run's end; a child over its memory limit is replaced between calls."""
        server = self.server
        watch = LimitWatch(
            server.config.limits,
            server.clock,
            interval=server.timing.limits_interval,
            cpu_warn_after=server.timing.cpu_warn_after,
        )
        if not watch.active or child.pid is None:
            await ended
            return

        def warn(text: str) -> None:
            server.log(f"WARNING: {text}")
            server.publish(EventKind.WARNINGS, f"{server.name} {text}")

        over = asyncio.ensure_future(watch.watch(child.pid, warn))
        try:
            waited: list[asyncio.Future[Any]] = [ended, over]
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if ended.done() or not over.done():
                return
        finally:
            over.cancel()
        reason = over.result()
        run.over_limit = reason
        server.log(f"over its limit: it {reason}; replacing it once its calls are answered")
        server.publish(EventKind.WARNINGS, f"{server.name} {reason}", alert=AlertKind.LIMIT)

        async def drained() -> None:
            # The pending table has no event of its own; this wait is bounded below.
            while upstream.in_flight and not ended.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)

        await wait_within(server.clock, drained(), DRAIN_SECONDS)
        self.on_dead(run, f"replaced by mcp-tray: it {reason}")
        await child.stop(server.timing.stop, server.log, server.clock)

    async def resolve_env(self) -> Mapping[str, str]:
        server = self.server
        if any("${keyring:" in value for value in server.config.secret_values.values()):
            # The keyring may block (D-Bus, an unlock prompt): not on the loop.
            return await asyncio.to_thread(server.env_resolver, server.config)
        return server.env_resolver(server.config)

    async def serve(self, run: Run, child: Child, spare: Spare | None) -> None:
        server = self.server

        def junk(line: str) -> None:
            self.stderr_line(run.generation, f"(stdout, not JSON-RPC) {line}")

        if spare is None:
            async with Upstream.open(
                child,
                on_request=server.routing.route_request,
                on_notification=self.on_notification,
                on_junk=junk,
            ) as upstream:
                await self.serve_session(run, child, upstream, None)
            return
        spare.upstream.rebind(
            on_request=server.routing.route_request,
            on_notification=self.on_notification,
            on_junk=junk,
        )
        spare.taken.set()
        try:
            await self.serve_session(run, child, spare.upstream, spare)
        finally:
            await spare.upstream.aclose()

    async def serve_session(
        self, run: Run, child: Child, upstream: Upstream, spare: Spare | None
    ) -> None:
        server = self.server
        run.upstream = upstream
        handshake = asyncio.ensure_future(self.handshake(run, upstream, spare))
        ended = asyncio.ensure_future(self.watch_end(run, child, upstream))
        try:
            await asyncio.wait([handshake, ended], return_when=asyncio.FIRST_COMPLETED)
            failure = handshake.exception() if handshake.done() else None
            if handshake.done() and failure is None and not run.dead.is_set():
                run.ready.set()
                server.change_state(S.READY, "handshake done, tools listed")
                health = asyncio.ensure_future(keep_healthy(server, run, upstream))
                if server.catalog.modern:
                    server.listen.open(upstream)
                if self.wants_standby:
                    self.standby.fill(first=server.idle.until_no_call)
                server.idle.touch()  # idle counts from ready, not from the spawn
                idle = asyncio.ensure_future(server.idle.until_idle(server.idle_limit))
                try:
                    # The run ends by itself, by its memory limit, or by its idle time.
                    limited = asyncio.ensure_future(self.watch_limits(run, child, upstream, ended))
                    await asyncio.wait([limited, idle], return_when=asyncio.FIRST_COMPLETED)
                    if limited.done():
                        limited.result()
                    elif idle.done() and not ended.done():
                        limited.cancel()
                        await asyncio.gather(limited, return_exceptions=True)
                        # Ours to end, not an exit: the stop contract follows (finish).
                        run.intentional = True
                        server.change_state(
                            S.SLEEPING,
                            f"nothing needed it for {idle.result():g} s: stopped until a "
                            "request needs it",
                        )
                finally:
                    server.listen.close()
                    for task in (health, idle):
                        task.cancel()
                    await asyncio.gather(health, idle, return_exceptions=True)
            elif failure is not None:
                detail = describe_start_failure(failure, remote=child.pid is None)
                server.note_error(f"start failed: {detail}")
                server.log(f"generation {run.generation} failed to start: {detail}")
                if child.is_alive() and not isinstance(failure, ConnectionLost):
                    # Alive but unusable (it refused, or never answered): the
                    # stop contract ends it, and its end is ours, not an exit
                    # of its own (so the watch that would report it as one
                    # goes first).
                    ended.cancel()
                    await asyncio.gather(ended, return_exceptions=True)
                    await child.stop(server.timing.stop, server.log, server.clock)
                    ended_as = f"stopped by mcp-tray after a failed start ({detail})"
                else:
                    # Its stdout closed: it is on its way out, and its own exit
                    # says how (the stop contract only sees to the rest).
                    if child.is_alive():
                        await child.stop(server.timing.stop, server.log, server.clock)
                    ended_as = f"{child.describe_end()} during the handshake ({detail})"
                self.on_dead(run, ended_as)
                if (
                    isinstance(failure, RpcError)
                    and failure.code != REQUEST_TIMEOUT
                    and server.config.protocol != "auto"
                ):
                    # It answered, and refused the era it is pinned to: starting
                    # it again would only be refused again.
                    server.park(
                        f'it does not speak the era its config pins ("protocol": '
                        f'"{server.config.protocol}"): {detail}'
                    )
            else:
                await ended
        finally:
            for task in (handshake, ended):
                task.cancel()
            await asyncio.gather(handshake, ended, return_exceptions=True)

    async def open_session(self, upstream: Upstream, note: Callable[[str], None]) -> Handshake:
        server = self.server
        return await upstream.start_session(
            server.config.protocol, server.timing.probe_timeout, clock=server.clock, note=note
        )

    async def handshake(self, run: Run, upstream: Upstream, spare: Spare | None) -> None:
        """The session of a fresh child, or the one a standby spare opened beforehand."""
        server = self.server

        async def handshake() -> None:
            catalog = server.catalog
            if spare is None or spare.handshake is None:
                catalog.adopt(await self.open_session(upstream, server.log))
            else:
                catalog.adopt(spare.handshake)
            how = "server/discover answered" if catalog.modern else "initialize answered"
            if spare is not None:
                how += " the standby spare"
            server.log(f"speaks {catalog.version} ({how})")
            if spare is None:
                changed = await catalog.refresh(upstream)
            else:
                changed = await catalog.take_lists(spare.learnt)
            if not catalog.modern:
                # The stateless era has no connection state to restore.
                await server.routing.replay(upstream, catalog.capabilities)
            server.catalog.known = True
            await server.keep_catalog()
            server.broadcast()
            if run.generation > 1:
                # Clients only learn about a respawned server's new tools
                # (or lost ones) if someone tells them.
                for kind in changed:
                    server.publish(EventKind.LISTS, kind)
                    server.routing.notify(f"notifications/{kind}/list_changed", None)

        finished, _ = await wait_within(server.clock, handshake(), server.timing.start_timeout)
        if not finished:
            raise TimeoutError(f"no handshake within {server.timing.start_timeout:g} s")

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        server = self.server
        if method == "notifications/subscriptions/acknowledged":
            return  # the answer to mcp-tray's own listen stream
        meta = (params or {}).get("_meta")
        if isinstance(meta, dict) and SUBSCRIPTION_ID_META_KEY in meta:
            # mcp-tray's own stream id means nothing to its clients.
            rest = {k: v for k, v in meta.items() if k != SUBSCRIPTION_ID_META_KEY}
            params = {k: v for k, v in (params or {}).items() if k != "_meta"}
            if rest:
                params["_meta"] = rest
        if method.endswith("/list_changed"):
            kind = method.split("/")[1]
            run = self.current_run
            if run is not None and run.upstream is not None and kind in LIST_KINDS:
                with contextlib.suppress(RpcError, ConnectionLost):
                    await server.catalog.refresh(run.upstream, only=kind)
                    await server.keep_catalog()
            server.publish(EventKind.LISTS, kind)
        server.routing.notify(method, params)

    async def watch_end(self, run: Run, child: Child, upstream: Upstream) -> None:
        """Return when the run is over: the leader exited, or its stdout closed."""
        server = self.server
        upstream_closed = asyncio.ensure_future(upstream.closed.wait())
        try:
            watched: list[asyncio.Future[Any]] = [child.exited, upstream_closed]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            upstream_closed.cancel()
        if not child.exited.done():
            await wait_within(
                server.clock, asyncio.shield(child.exited), server.timing.eof_exit_grace
            )
        if not child.exited.done():
            server.log("the child closed its stdout but kept running: stopping it")
            self.on_dead(run, "closed its stdout (the MCP channel) while still running")
            await child.stop(server.timing.stop, server.log, server.clock)
            return
        self.on_dead(run, child.describe_end())

    def on_dead(self, run: Run, text: str) -> None:
        server = self.server
        if not run.mark_dead(text):
            return
        server.log(f"generation {run.generation} ended: {text}")
        if run.intentional:
            server.broadcast()
            return
        server.note_error(f"generation {run.generation} {text}")
        child = run.child
        if child is not None and child.needs_sign_in:
            server.change_state(S.NEEDS_SIGN_IN, text)
            server.publish(EventKind.WARNINGS, f"{server.name} {text}", alert=AlertKind.SIGN_IN)
            return
        unreachable = child is not None and child.unreachable
        server.change_state(S.UNREACHABLE if unreachable else S.EXITED, text)

    async def finish(self, run: Run, child: Child, stderr_task: "asyncio.Future[None]") -> None:
        """Whatever ended the run, leave no process of its group behind."""
        server = self.server
        if child.is_alive():
            run.intentional = True
            await child.stop(server.timing.stop, server.log, server.clock)
        else:
            await child.end_group(server.timing.stop, server.log, server.clock)
        if not run.dead.is_set():
            self.on_dead(run, child.describe_end())
        await wait_within(server.clock, asyncio.shield(stderr_task), server.timing.stderr_drain)
        stderr_task.cancel()

    def account_end(self, run: Run) -> None:
        server = self.server
        if run.intentional or server.state in (S.PARKED, S.UNREACHABLE, S.NEEDS_SIGN_IN):
            return
        repeated, self.last_over_limit = self.last_over_limit, run.over_limit is not None
        if run.over_limit is not None and not repeated:
            return  # once is the limit doing its job; twice in a row counts like a crash
        # Up a keepalive interval counts only once it was up: a start that
        # took that long and then failed proved nothing.
        up_long = server.clock.monotonic() - run.started >= server.config.keepalive_seconds
        if run.over_limit is None and (run.proven or (run.ready.is_set() and up_long)):
            server.prove(run)
            return
        if server.budget.dropped():
            server.park(
                f"{server.budget.unproven} runs in a row ended before it was up "
                f"{server.config.keepalive_seconds:g} s or served a call (last: {run.exit_text})"
            )

    async def pump_stderr(self, child: Child, generation: int) -> None:
        while True:
            line = await child.stderr.readline()
            if not line:
                return
            self.stderr_line(generation, line.decode("utf-8", errors="replace").rstrip("\r\n"))

    def stderr_line(self, generation: int, text: str) -> None:
        server = self.server
        line = f"[gen {generation}] {text}"
        server.stderr_tail.append(line)
        server.logs.write(server.name, f"gen={generation} {text}")
        server.emit(Event(EventKind.STDERR, server.name, text=line))
