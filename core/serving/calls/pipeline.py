"""One pipeline for every client request, whatever its era or endpoint.

An era's adapter decodes a message once into a ``Request``
(core.serving.calls.request); here it goes through the same stages for both eras:

1. **what mcp-tray answers itself**: ``initialize`` and ``server/discover``
   (from the child's last known capabilities, so a client can connect to a
   starting or parked server and learns the real reason on its first
   request), ``ping``, the lists while their listing is known
   (core.serving.calls.answers);
2. **placement**: which child serves the client's session, where it is seated
   (core.serving.calls.seats, core.serving.calls.placement), once its roots are
   known where that decides;
3. **the session breaker** (``guarded``, docs/design.md §3.5);
4. **the call path** (``ManagedServer.request``, docs/design.md §3.3), or the share's
   version of a request that sets per-session state (subscriptions, the log
   level), with era translation where client and child differ
   (core.serving.calls.translate);
5. **one encoder per era** for the answer (core.serving.calls.answers).

The pipeline only routes a request through them: the seats, the answers and the
translation are each their own module's.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

from core.base.errors import (
    CallError,
    RpcError,
    SessionTripped,
    TooManyChildren,
    UpstreamError,
    shown,
)
from core.protocol.eras import (
    HEADER_MISMATCH,
    INPUT_REQUIRED,
    REMOVED_IN_MODERN,
    param_header_problem,
)
from core.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from core.serving.calls import answers
from core.serving.calls.approvals import Approvals
from core.serving.calls.fanout import CallMember, Member
from core.serving.calls.placement import started
from core.serving.calls.request import Client, NoReply, Request
from core.serving.calls.roots import RootsQuestions
from core.serving.calls.seats import Seats, _RootsNeeded
from core.serving.calls.translate import Parking, encode, fulfil
from core.serving.observe.call_journal import CallJournal, Watch, journaled
from core.serving.observe.telemetry import client_trace
from core.serving.sessions.sessions import ClientSession, SessionTable
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor

#: Requests that set state a handshake-era child keeps per connection: the share keeps it per session.
SHARE_METHODS: Final = frozenset(
    {"resources/subscribe", "resources/unsubscribe", "logging/setLevel"}
)


class Hooks(Protocol):
    """What the pipeline tells the service it runs in (the worker registry listens)."""

    def session_opened(self, session: ClientSession) -> None:
        """A new client session (the registry gets a row for it)."""
        ...

    def session_closed(self, session: ClientSession) -> None:
        """A session ended."""
        ...


async def guarded(
    sessions: SessionTable,
    session: ClientSession,
    method: str,
    send: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """One request of a client session through its breaker (docs/design.md §3.5),
    errors in the client's terms."""
    try:
        session.check()
        result = await send()
    except CallError as exc:
        if isinstance(exc, SessionTripped):
            sessions.refused(session)
        else:
            sessions.failed(session, exc)
        if isinstance(exc, UpstreamError):
            raise RpcError(exc.code, exc.upstream_message, exc.data) from None
        if method == "tools/call":
            # The model reads tool results, not protocol errors: it should
            # see "exited", "do NOT retry" or the reset hint in its own words.
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        raise RpcError(INTERNAL_ERROR, str(exc), {"kind": exc.kind}) from None
    sessions.succeeded(session)
    return result


def _raising(error: CallError) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def send() -> dict[str, Any]:
        raise error

    return send


async def _never() -> dict[str, Any]:
    raise AssertionError("a tripped session's request is never sent")  # pragma: no cover


class Pipeline:
    def __init__(
        self,
        supervisor: Supervisor,
        sessions: SessionTable,
        hooks: Hooks,
        spawn: Callable[[Any], None],
    ) -> None:
        self.supervisor = supervisor
        self.sessions = sessions
        self.hooks = hooks
        self.spawn = spawn
        #: Where each session sits (core.serving.calls.seats).
        self.seats = Seats(supervisor, spawn)
        self.placement = self.seats.placement
        self.parking = Parking()
        #: Roots questions put to 2026-07-28 clients, waiting for their retries.
        self.roots_questions = RootsQuestions()
        #: Calls held for the person, and held tools' calls refused (docs/design.md §3.14).
        self.approvals = Approvals(supervisor)
        #: Where every request sent to a server is recorded (core.serving.observe.call_journal).
        self.journal = CallJournal()

    # ------------------------------------------------------------ sessions

    def open_session(self, session: ClientSession) -> None:
        self.sessions.open(session)
        self.hooks.session_opened(session)

    def close_session(self, session: ClientSession) -> None:
        """The session ended (DELETE, idle, its client went away)."""
        self.sessions.close(session.id)  # releases its seat through session.release
        self.parking.drop_session(session.id)
        self.approvals.forget_session(session.id)
        self.hooks.session_closed(session)

    def release(self, session: ClientSession) -> None:
        """The session tripped or closed: it leaves its seat (what a ``SessionHost`` does)."""
        self.seats.release(session)

    # ------------------------------------------------------------ answers

    async def hello(self, client: Client, member: Member, requested: object) -> dict[str, Any]:
        """``initialize``: answered by mcp-tray from what the child last said."""
        session = client.session
        base = self.placement.base(session.server)
        await started(base)
        server = base
        if base.sharing == "shared":
            request = Request(client, "initialize", {}, NoReply(), None)
            server = await self.seats.server_for(
                request, member
            )  # it hears list_changed from now on
        return answers.hello(base, server, requested)

    async def discover(self, name: str) -> dict[str, Any]:
        """``server/discover``: the child's own answer where it gave one."""
        server = self.placement.base(name)
        await started(server)
        return answers.discovered(server)

    async def handle(self, request: Request, member: Member) -> dict[str, Any]:
        """One request, answered in its client's era."""
        client = request.client
        method = request.method
        if client.modern:
            if method == "server/discover":
                return await self.discover(client.session.server)
            if method in REMOVED_IN_MODERN:
                raise RpcError(METHOD_NOT_FOUND, f"{shown(method)} is not part of MCP 2026-07-28")
            request.params = self.roots_questions.take(request.params, client.session)
        elif method == "ping":
            return {}
        if client.session.tripped:
            # Answered at once with the reset hint: nothing is placed, spawned or sent for it.
            base = self.placement.base(client.session.server)
            refused = await guarded(self.sessions, client.session, method, _never)
            self.journal.refused(
                client.session,
                client.modern,
                base.name,
                method,
                request.params,
                "breaker",
                "",
                client_trace(request.headers, request.params),
            )
            return encode(refused, method, client.modern, base.catalog)
        seat = self.seats.seat(client.session)
        try:
            server = (
                seat.server
                if seat is not None and self.seats.stays(seat, client)
                else await self.seats.server_for(request, member)
            )
        except _RootsNeeded:
            base = self.placement.base(client.session.server)
            return self.roots_questions.ask(client.session, base.catalog)
        except TooManyChildren as refused:
            # Said in the client's terms, like any refusal of the call path.
            base = self.placement.base(client.session.server)
            answer = await guarded(self.sessions, client.session, method, _raising(refused))
            return encode(answer, method, client.modern, base.catalog)
        catalog = server.catalog
        lists = answers.listed(catalog, method, request.params, client.modern)
        if lists is not None:
            client.session.requests += 1
            return lists
        watch = self.journal.watch(
            client.session,
            client.modern,
            server.name,
            method,
            request.params,
            client_trace(request.headers, request.params),
        )
        if method == "tools/call":
            request.verdict = await self.approvals.screen(request, server)
            if request.verdict is not None and request.verdict.refused:
                # A tool error the model reads; never the breaker's business.
                client.session.requests += 1
                answer = request.verdict.tool_error()
                if watch is not None:
                    watch.settle(request.verdict.outcome, request.verdict.by)
                    watch.done(answer)
                return encode(answer, method, client.modern, catalog)
            if client.modern and request.mirrored:
                _check_param_headers(catalog.tools.get(str(request.params.get("name"))), request)
        result = await guarded(
            self.sessions,
            client.session,
            method,
            lambda: journaled(watch, lambda: self._send(request, server, watch)),
        )
        return answers.answered(result, method, client.modern, server.catalog)

    def caller(self, request: Request, server: ManagedServer, watch: Watch | None = None) -> Caller:
        """Who the request is for, as the call path takes it."""
        client = request.client
        seat = self.seats.seat(client.session)
        level = client.log_level
        if not client.modern and seat is not None:
            level = seat.share.levels.get(seat.member.key)
        reply = request.reply
        return Caller(
            session=client.session.id,
            on_progress=reply.progress if reply.progress_token is not None else None,
            on_server_request=request.ask,
            envelope=client.envelope(level),
            observer=watch,
        )

    async def _send(
        self, request: Request, server: ManagedServer, watch: Watch | None = None
    ) -> dict[str, Any]:
        """The request to the child (in the child's era), or the share's version of it."""
        method, params = request.method, request.params
        caller = self.caller(request, server, watch)
        client = request.client
        if method in SHARE_METHODS:
            return await self._share_request(request, server, caller)
        await server.routing.roots_settled(client.session.id)
        if not client.modern:
            result = await server.request(method, params, caller)
            if result.get("resultType") == INPUT_REQUIRED:
                result = await fulfil(server, method, params, result, caller)
            return result
        # No session stream: the call's own stream carries its log lines.
        share = self.seats.share(server)
        member = CallMember(client.session.id, request.reply.related, client.log_level)
        share.join(member)
        try:
            if server.catalog.modern:
                return await server.request(method, params, caller)
            return await self.parking.through(
                server,
                client.session.id,
                method,
                params,
                client.capabilities,
                caller,
                caller.on_progress,
            )
        finally:
            share.leave(member, self.spawn)

    async def _share_request(
        self, request: Request, server: ManagedServer, caller: Caller
    ) -> dict[str, Any]:
        seat = self.seats.seat(request.client.session)
        assert seat is not None  # a SHARE_METHODS request was placed, so its session is seated
        key = seat.member.key
        params = request.params
        if request.method == "logging/setLevel":
            level = params.get("level")
            if not isinstance(level, str):
                raise RpcError(INVALID_PARAMS, "logging/setLevel needs a string 'level'")
            return await seat.share.set_level(key, level, caller)
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, f"{request.method} needs a string 'uri'")
        if request.method == "resources/subscribe":
            return await seat.share.subscribe(key, uri, caller)
        return await seat.share.unsubscribe(key, uri, caller)

    async def own_call(
        self,
        name: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None,
        door: str = "api",
    ) -> dict[str, Any]:
        """A tool call of mcp-tray's own (the command line, the window): no client behind it."""
        server = self.supervisor.server(name)
        params = {"name": tool, "arguments": dict(arguments)}
        watch = self.journal.own(server.name, "tools/call", params, door)
        caller = Caller(timeout=timeout, observer=watch)

        async def call() -> dict[str, Any]:
            result = await server.request("tools/call", params, caller)
            if result.get("resultType") == INPUT_REQUIRED:
                try:
                    result = await fulfil(server, "tools/call", params, result, caller)
                except RpcError as exc:
                    raise UpstreamError(server.name, exc.code, exc.message, exc.data) from None
            return result

        result = await journaled(watch, call)
        return encode(result, "tools/call", False, server.catalog)


def _check_param_headers(tool: Mapping[str, Any] | None, request: Request) -> None:
    """The gateway is the server a 2026-07-28 client's HTTP headers reach: it checks them."""
    if tool is None:
        return
    arguments = request.params.get("arguments")
    problem = param_header_problem(
        tool.get("inputSchema"), arguments if isinstance(arguments, dict) else {}, request.headers
    )
    if problem is not None:
        raise RpcError(HEADER_MISMATCH, f"Header mismatch: {problem}")
