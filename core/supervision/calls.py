"""The call path (docs/design.md §3.3): every request forwarded to a server goes through here.

A call that finds the child dead asks for ONE respawn and waits for a *new*
ready session; a call whose child dies under it is cancelled at once and
replayed once only when that is safe. Nothing here hot-cycles a server:
every call asks for at most one respawn, and what happens after that is the
rapid-drop budget's decision. The call path never decides that a run is
dead or ready; it reads and waits on what the run loop decided
(core.supervision.run).
"""

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from core.base.clock import wait_within
from core.base.errors import (
    BreakerOpen,
    CallError,
    CallTimedOut,
    ConnectionLost,
    ExitedAgain,
    ExitedMidCall,
    RpcError,
    ServerParked,
    ServerStopped,
    SubprocessExited,
    TransportFailure,
    UpstreamError,
)
from core.base.states import BreakerState, ServerState
from core.protocol.eras import (
    INPUT_REQUIRED,
    LATEST_MODERN_VERSION,
    as_handshake,
    with_envelope,
    without_envelope,
)
from core.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT
from core.supervision.routing import Caller, ServerRequestRouter
from core.supervision.run import Run
from core.supervision.upstream import OWN_ENVELOPE, Upstream

if TYPE_CHECKING:
    from core.supervision.server import ManagedServer

S = ServerState

#: Rounds of ``input_required`` mcp-tray answers for one request of a handshake-era client.
MAX_INPUT_ROUNDS: Final = 10
#: A round with state but no question waits this long, doubling up to the cap.
STATE_ONLY_PAUSE_SECONDS: Final = 0.05
STATE_ONLY_PAUSE_CAP_SECONDS: Final = 0.25

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


async def _ask(router: ServerRequestRouter, request: Any) -> dict[str, Any]:
    """One input request of an ``input_required`` result, asked the handshake-era way."""
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        raise RpcError(INVALID_PARAMS, f"malformed input request from the server: {request!r}")
    return await router(request["method"], request.get("params"))


class _RunDied(Exception):
    """The run a call waited for died before it was usable."""

    def __init__(self, run: Run) -> None:
        self.run = run


class _WindowOver(Exception):
    """The wait for a usable run ran out."""


class CallPath:
    def __init__(self, server: "ManagedServer") -> None:
        self._server = server

    async def request(
        self, method: str, params: Mapping[str, Any] | None, caller: Caller
    ) -> dict[str, Any]:
        """Forward one request (docs/design.md §3.3). Raises ``CallError``."""
        server = self._server
        server.calls += 1
        refusal: CallError | None = None
        breaker = server.breaker
        if server.state is S.PARKED:
            refusal = ServerParked(server.name, server.parked_reason or "it kept dying")
        elif not server.wanted:
            refusal = ServerStopped(server.name)
        else:
            admission = breaker.admit()
            if not admission.allowed:
                refusal = BreakerOpen(
                    server.name, breaker.failures, breaker.last_error, admission.retry_in
                )
        if refusal is not None:
            # Refused before anything was sent: counted, never spawned for.
            server.failures += 1
            raise refusal
        call_id = server.routing.open_call(caller)
        started = time.perf_counter()
        try:
            result = await self._deliver(method, params, caller)
        except CallError as exc:
            server.failures += 1
            server.call_done(method, started, ok=False)
            if isinstance(exc, TransportFailure):
                breaker.failure(str(exc), incident=exc.generation)
                # Once the server breaker holds the incident, it is the server's,
                # not the session's (core.serving.sessions does not count it)...
                # unless this call was inside the child that died: it may be
                # what killed it, and a session repeating it is what the
                # session breaker is for.
                exc.contained = breaker.state is not BreakerState.CLOSED and not isinstance(
                    exc, ExitedMidCall
                )
            elif isinstance(exc, UpstreamError):
                breaker.success()
            else:
                breaker.neutral()
            server.last_error = str(exc)
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

    async def _deliver(
        self, method: str, params: Mapping[str, Any] | None, caller: Caller
    ) -> dict[str, Any]:
        server = self._server
        timing = server.timing
        run = server.current_run
        respawned = False
        if run is None or (not run.dead.is_set() and not run.ready.is_set()):
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
        # Mid-call race: the child died with the call in flight.
        if respawned:
            raise ExitedAgain(server.name, run.generation, run.exit_text, server.log_path)
        safe, why_not = self.replay_safe(method, params)
        server.request_respawn()
        if not safe:
            raise ExitedMidCall(
                server.name, run.generation, run.exit_text, why_not, server.log_path
            )
        retry_run = await self._await_fresh(run)
        try:
            return await self._send(retry_run, method, params, caller)
        except ConnectionLost:
            await self._confirm_dead(retry_run)
            raise ExitedAgain(
                server.name, retry_run.generation, retry_run.exit_text, server.log_path
            ) from None

    async def _send(
        self, run: Run, method: str, params: Mapping[str, Any] | None, caller: Caller
    ) -> dict[str, Any]:
        upstream = run.upstream
        if upstream is None:
            raise ConnectionLost("no upstream session")
        timeout = caller.timeout
        catalog = self._server.catalog
        try:
            if not catalog.modern:
                result = await upstream.request(
                    method,
                    without_envelope(params),
                    timeout=timeout,
                    on_progress=caller.on_progress,
                )
            else:
                envelope = (caller.envelope or OWN_ENVELOPE)._replace(
                    version=catalog.version or LATEST_MODERN_VERSION
                )
                sent = with_envelope(params, envelope)
                result = await upstream.request(
                    method, sent, timeout=timeout, on_progress=caller.on_progress
                )
                if not caller.modern:
                    result = as_handshake(
                        await self._fulfil(upstream, method, sent, result, caller)
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

    async def _fulfil(
        self,
        upstream: Upstream,
        method: str,
        params: Mapping[str, Any],
        result: dict[str, Any],
        caller: Caller,
    ) -> dict[str, Any]:
        """Answer a 2026-07-28 child's ``input_required`` for a client of the handshake era.

        Each input request goes to the caller as the server->client request it
        stands for (sampling, elicitation, roots); the request is then sent
        again with the answers and the child's ``requestState``, until it is
        complete (at most ``MAX_INPUT_ROUNDS`` rounds).
        """
        pause = STATE_ONLY_PAUSE_SECONDS
        for _ in range(MAX_INPUT_ROUNDS):
            if result.get("resultType") != INPUT_REQUIRED:
                return result
            asked = result.get("inputRequests")
            requests = asked if isinstance(asked, dict) else {}
            if requests and caller.on_server_request is None:
                raise RpcError(
                    METHOD_NOT_FOUND,
                    f"{method!r} needs input from a client ({', '.join(sorted(requests))}), "
                    "and this call came from mcp-tray itself",
                )
            answers: dict[str, Any] = {}
            if requests:
                router = caller.on_server_request
                assert router is not None
                keys = list(requests)
                replies = await asyncio.gather(*(_ask(router, requests[key]) for key in keys))
                answers = dict(zip(keys, replies, strict=True))
            else:
                # Only state, no question: the server is working; ask again soon.
                await self._server.clock.sleep(pause)
                pause = min(pause * 2, STATE_ONLY_PAUSE_CAP_SECONDS)
            retry = {**params, "inputResponses": answers}
            if "requestState" in result:
                retry["requestState"] = result["requestState"]
            result = await upstream.request(
                method, retry, timeout=caller.timeout, on_progress=caller.on_progress
            )
        raise RpcError(
            INTERNAL_ERROR,
            f"{method!r}: the server asked for input more than {MAX_INPUT_ROUNDS} times",
        )

    async def _confirm_dead(self, run: Run) -> None:
        """A closed transport means the run is ending; wait until the run loop says so."""
        server = self._server
        await wait_within(server.clock, run.dead.wait(), server.timing.confirm_dead)
        if not run.exit_text:
            run.exit_text = "the connection to it closed"

    def replay_safe(self, method: str, params: Mapping[str, Any] | None) -> tuple[bool, str]:
        """Whether a call cut by a crash may be sent again, and if not, why."""
        server = self._server
        policy = server.config.retry
        if policy == "always":
            return True, ""
        if policy == "never":
            return False, 'this server\'s config says "retry": "never"'
        if method in REPEATABLE_METHODS:
            return True, ""
        if method == "tools/call":
            name = (params or {}).get("name")
            annotations = server.catalog.tool_annotations(name)
            if annotations.get("readOnlyHint") or annotations.get("idempotentHint"):
                return True, ""
            return False, (
                f"tool {name!r} is not marked readOnlyHint or idempotentHint; "
                f'set "retry": "always" on server {server.name!r} if its calls are safe to repeat'
            )
        return False, f"{method!r} is not known to be safe to repeat"

    async def _await_fresh(self, dead: Run) -> Run:
        """After asking for a respawn: a new, ready, living run, or the truth about why not."""
        server = self._server
        try:
            return await self._await_usable(dead.generation + 1, server.timing.respawn_wait)
        except _RunDied as died:
            raise ExitedAgain(
                server.name, died.run.generation, died.run.exit_text or "exited", server.log_path
            ) from None
        except _WindowOver:
            raise SubprocessExited(
                server.name,
                dead.generation,
                dead.exit_text or "exited",
                server.timing.respawn_wait,
                server.log_path,
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
