"""The call path (docs/design.md §3.3): every request forwarded to a server goes through here.

A call that finds the child dead asks for ONE respawn and waits for a *new*
ready session; a call whose child dies under it is cancelled at once and
replayed once only when that is safe (the one replay rule,
core.protocol.replay). Nothing here hot-cycles a server: every call asks for
at most one respawn, and what happens after that is the rapid-drop budget's
decision. The call path never decides that a run is dead or ready; it reads
and waits on what the run loop decided (core.supervision.run).

It is blind to the era of whoever asked: a request goes to the child in the
child's own era (with the caller's envelope for a 2026-07-28 child, without
one for a handshake-era child) and the child's answer comes back as it was.
Turning that into the caller's era is the gateway's business
(core.serving.calls.translate), which calls back in here for every round.
"""

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from core.base.clock import Clock, wait_within
from core.base.errors import (
    BreakerOpen,
    CallError,
    CallTimedOut,
    ConnectionLost,
    ExitedAgain,
    ExitedMidCall,
    RemoteUnreachable,
    RpcError,
    ServerParked,
    ServerStopped,
    SignInNeeded,
    SubprocessExited,
    TransportFailure,
    UpstreamError,
)
from core.base.states import BreakerState, ServerState
from core.protocol.eras import (
    LATEST_MODERN_VERSION,
    TRACEPARENT_META_KEY,
    with_envelope,
    without_envelope,
)
from core.protocol.jsonrpc import REQUEST_TIMEOUT
from core.protocol.replay import replay_verdict
from core.settings.config import ServerConfig
from core.supervision.breakers import ServerBreaker
from core.supervision.catalog import Catalog
from core.supervision.routing import Caller, Routing
from core.supervision.run import Run, Timing
from core.supervision.upstream import OWN_ENVELOPE

S = ServerState


class CallSite(Protocol):
    """What the call path reads of its server, and the little it may ask of it."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> ServerConfig: ...
    @property
    def timing(self) -> Timing: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def state(self) -> ServerState: ...
    @property
    def parked_reason(self) -> str | None: ...
    @property
    def retry_in(self) -> float | None: ...
    @property
    def wanted(self) -> bool: ...
    @property
    def generation(self) -> int: ...
    @property
    def current_run(self) -> Run | None: ...
    @property
    def log_path(self) -> Path: ...
    @property
    def breaker(self) -> ServerBreaker: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def routing(self) -> Routing: ...

    def changed(self) -> asyncio.Event: ...
    def wake(self, why: str) -> None: ...
    def request_respawn(self) -> None: ...
    def prove(self, run: Run) -> None: ...
    def breaker_moved(self) -> None: ...
    def note_error(self, text: str) -> None: ...
    def call_done(self, method: str, started: float, *, ok: bool) -> None: ...


class _RunDied(Exception):
    """The run a call waited for died before it was usable."""

    def __init__(self, run: Run) -> None:
        self.run = run


class _WindowOver(Exception):
    """The wait for a usable run ran out."""


class CallPath:
    def __init__(self, server: CallSite) -> None:
        self._server = server
        #: Requests forwarded, and those that failed (for /metrics); only written here.
        self.calls = 0
        self.failures = 0

    async def request(
        self, method: str, params: Mapping[str, Any] | None, caller: Caller
    ) -> dict[str, Any]:
        """Forward one request (docs/design.md §3.3). Raises ``CallError``."""
        server = self._server
        self.calls += 1
        refusal: CallError | None = None
        breaker = server.breaker
        if server.state is S.PARKED:
            refusal = ServerParked(server.name, server.parked_reason or "it kept dying")
        elif not server.wanted:
            refusal = ServerStopped(server.name)
        elif server.state is S.NEEDS_SIGN_IN:
            refusal = SignInNeeded(server.name, self._ended_as("needs sign-in"))
        elif server.state is S.UNREACHABLE:
            refusal = RemoteUnreachable(server.name, self._ended_as("unreachable"), server.retry_in)
        else:
            admission = breaker.admit()
            if not admission.allowed:
                refusal = BreakerOpen(
                    server.name, breaker.failures, breaker.last_error, admission.retry_in
                )
        if refusal is not None:
            # Refused before anything was sent: counted, never spawned for.
            self.failures += 1
            raise refusal
        call_id = server.routing.open_call(caller)
        started = time.perf_counter()
        try:
            result = await self._deliver(method, params, caller)
        except CallError as exc:
            self.failures += 1
            server.call_done(method, started, ok=False)
            if isinstance(exc, TransportFailure):
                breaker.failure(str(exc), incident=exc.generation)
                # Once the server breaker holds the incident, it is the server's,
                # not the session's (core.serving.sessions.sessions does not count it)...
                # unless this call was inside the child that died: it may be
                # what killed it, and a session repeating it is what the
                # session breaker is for.
                exc.contained = breaker.state is not BreakerState.CLOSED and not exc.inside
            elif isinstance(exc, UpstreamError):
                breaker.success()
            else:
                breaker.neutral()
            server.note_error(str(exc))
            server.breaker_moved()
            raise
        except BaseException:
            breaker.neutral()
            raise
        finally:
            server.routing.close_call(call_id)
        breaker.success()
        server.breaker_moved()
        server.routing.remember(method, params)
        server.call_done(method, started, ok=True)
        return result

    def _ended_as(self, default: str) -> str:
        """How the newest run ended (a remote's reason for its state), or ``default``."""
        run = self._server.current_run
        return (run.exit_text if run is not None else None) or default

    async def _deliver(
        self, method: str, params: Mapping[str, Any] | None, caller: Caller
    ) -> dict[str, Any]:
        server = self._server
        timing = server.timing
        run = server.current_run
        respawned = False
        if server.state is S.SLEEPING:
            # On demand: this request starts it, within the usual start timeout; from
            # there on every rule is any server's (a start that fails, the pre-call gate).
            last = server.generation
            server.wake(f"a {method} request needs it")
            try:
                run = await self._await_usable(last + 1, timing.start_timeout)
            except _RunDied as died:
                run = died.run
            except _WindowOver:
                raise CallTimedOut(
                    server.name, f"{method} (server waking from sleep)", timing.start_timeout
                ) from None
        elif run is None or (not run.dead.is_set() and not run.ready.is_set()):
            # Starting (or about to): wait for this start to finish, asking nothing.
            try:
                run = await self._await_usable(
                    max(1, run.generation if run else server.generation + 1),
                    timing.start_timeout,
                )
            except _RunDied as died:
                run = died.run
            except _WindowOver:
                raise CallTimedOut(
                    server.name, f"{method} (server still starting)", timing.start_timeout
                ) from None
        if not run.alive():
            # Pre-call gate: the child is dead, so the call cannot have reached it.
            dead = run
            server.request_respawn()
            respawned = True
            run = await self._await_fresh(dead)
        try:
            return await self._send(run, method, params, caller)
        except ConnectionLost:
            await self._confirm_dead(run)
        if server.state is S.NEEDS_SIGN_IN:
            # The remote refused it (401): nothing was done, and trying again needs a person.
            raise SignInNeeded(server.name, run.exit_text or "needs sign-in")
        # Mid-call race: the child died with the call in flight.
        if respawned:
            raise _inside(
                ExitedAgain(
                    server.name,
                    run.generation,
                    run.exit_text,
                    server.log_path,
                    remote=_remote(server),
                )
            )
        safe, why_not = self.replay_safe(method, params)
        server.request_respawn()
        if not safe:
            raise ExitedMidCall(
                server.name,
                run.generation,
                run.exit_text,
                why_not,
                server.log_path,
                remote=_remote(server),
            )
        retry_run = await self._await_fresh(run)
        try:
            return await self._send(retry_run, method, params, caller, replay=True)
        except ConnectionLost:
            await self._confirm_dead(retry_run)
            raise _inside(
                ExitedAgain(
                    server.name,
                    retry_run.generation,
                    retry_run.exit_text,
                    server.log_path,
                    remote=_remote(server),
                )
            ) from None

    async def _send(
        self,
        run: Run,
        method: str,
        params: Mapping[str, Any] | None,
        caller: Caller,
        *,
        replay: bool = False,
    ) -> dict[str, Any]:
        """The request on the child's own terms; its answer as the child gave it."""
        upstream = run.upstream
        if upstream is None:
            raise ConnectionLost("no upstream session")
        if caller.observer is not None:
            caller.observer.attempt(run.generation, replay)
        timeout = caller.timeout
        catalog = self._server.catalog
        if catalog.modern:
            envelope = (caller.envelope or OWN_ENVELOPE)._replace(
                version=catalog.version or LATEST_MODERN_VERSION
            )
            enveloped = with_envelope(params, envelope)
            traceparent = caller.observer.traceparent if caller.observer is not None else None
            if traceparent is not None:
                # with_envelope made the _meta anew: the client's params stay as they came.
                enveloped["_meta"][TRACEPARENT_META_KEY] = traceparent
            sent: Mapping[str, Any] | None = enveloped
        else:
            sent = without_envelope(params)
        try:
            result = await upstream.request(
                method, sent, timeout=timeout, on_progress=caller.on_progress
            )
        except RpcError as exc:
            if exc.code == REQUEST_TIMEOUT:
                if not run.alive():
                    # Truth over the SDK's wording: the child died, nothing timed out.
                    raise ConnectionLost("the child exited while the call waited") from None
                raise CallTimedOut(self._server.name, method, timeout or 0.0) from None
            raise UpstreamError(self._server.name, exc.code, exc.message, exc.data) from None
        self._server.prove(run)
        return result

    async def _confirm_dead(self, run: Run) -> None:
        """A closed transport means the run is ending; wait until the run loop says so."""
        server = self._server
        await wait_within(server.clock, run.dead.wait(), server.timing.confirm_dead)
        if not run.exit_text:
            run.exit_text = "the connection to it closed"

    def replay_safe(self, method: str, params: Mapping[str, Any] | None) -> tuple[bool, str]:
        """Whether a call cut by a crash may be sent again, and if not, why (core.protocol.replay)."""
        server = self._server
        name = (params or {}).get("name") if method == "tools/call" else None
        verdict = replay_verdict(
            method, params, server.catalog.tool_annotations(name), server.config.retry
        )
        if verdict.again or method != "tools/call" or server.config.retry != "safe":
            return verdict
        return verdict.again, (
            f'{verdict.why}; set "retry": "always" on server {server.name!r} if its calls '
            "are safe to repeat"
        )

    async def _await_fresh(self, dead: Run) -> Run:
        """After asking for a respawn: a new, ready, living run, or the truth about why not."""
        server = self._server
        try:
            return await self._await_usable(dead.generation + 1, server.timing.respawn_wait)
        except _RunDied as died:
            raise ExitedAgain(
                server.name,
                died.run.generation,
                died.run.exit_text or "exited",
                server.log_path,
                remote=_remote(server),
            ) from None
        except _WindowOver:
            raise SubprocessExited(
                server.name,
                dead.generation,
                dead.exit_text or "exited",
                server.timing.respawn_wait,
                server.log_path,
                remote=_remote(server),
            ) from None

    async def _await_usable(self, min_generation: int, window: float) -> Run:
        server = self._server

        async def watch() -> Run:
            while True:
                changed = server.changed()
                if server.state is S.PARKED:
                    raise ServerParked(server.name, server.parked_reason or "it kept dying")
                if server.state is S.STOPPED:
                    raise ServerStopped(server.name)
                run = server.current_run
                if run is not None and run.generation >= min_generation:
                    if run.dead.is_set():
                        raise _RunDied(run)
                    if run.ready.is_set():
                        if run.alive():
                            return run
                        raise _RunDied(run)
                await changed.wait()

        finished, run = await wait_within(server.clock, watch(), window)
        if not finished or run is None:
            raise _WindowOver
        return run


def _inside(failure: ExitedAgain) -> ExitedAgain:
    """The respawned child died with this call in it (not before it was sent)."""
    failure.inside = True
    return failure


def _remote(server: CallSite) -> bool:
    return server.config.remote is not None
