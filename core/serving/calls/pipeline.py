"""One pipeline for every client request, whatever its era or endpoint.

An era's adapter decodes a message once into a ``Request``
(core.serving.calls.request); here it goes through the same stages for both eras:

1. **what mcp-tray answers itself**: ``initialize`` and ``server/discover``
   (from the child's last known capabilities, so a client can connect to a
   starting or parked server and learns the real reason on its first
   request), ``ping``, the lists while their listing is known;
2. **placement**: which child serves the client's session
   (core.serving.calls.placement), once its roots are known where that decides;
3. **the session breaker** (``guarded``, docs/design.md §3.5);
4. **the call path** (``ManagedServer.request``, docs/design.md §3.3), or the share's
   version of a request that sets per-session state (subscriptions, the log
   level), with era translation where client and child differ
   (core.serving.calls.translate);
5. **one encoder per era** for the answer.

The session's seat (its child, the share it is a member of) lives here too,
so a session moves between children (a workspace whose roots changed) in
one place.
"""

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from core import __version__
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
    INPUT_REQUIRED_METHODS,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    REMOVED_IN_MODERN,
    as_complete,
    param_header_problem,
)
from core.protocol.jsonrpc import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LATEST_HANDSHAKE_VERSION,
    METHOD_NOT_FOUND,
)
from core.serving.calls.approvals import Approvals
from core.serving.calls.fanout import CallMember, Member, Share
from core.serving.calls.placement import Placement, started
from core.serving.calls.request import Client, Request
from core.serving.calls.roots import RootsQuestions, roots_in, roots_source
from core.serving.calls.translate import Parking, encode, fulfil
from core.serving.observe.call_journal import CallJournal, Watch, journaled
from core.serving.sessions.sessions import ClientSession, SessionTable
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor

#: Lists served from the child's last listing.
LIST_METHODS: Final = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
#: A server that never started is announced with this: tools only.
DEFAULT_CAPABILITIES: Final = {"tools": {"listChanged": True}}
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


@dataclass
class Seat:
    """Where a client session sits: the child that serves it and its membership there."""

    server: ManagedServer
    share: Share
    member: Member


def shared_version(requested: object, child: str | None) -> str:
    """The handshake version both the client and the child speak.

    mcp-tray relays messages as they are, so it cannot speak a newer version
    to a client than its child does; an older one the client asks for is
    granted (servers keep speaking the versions before theirs).
    """
    ceiling = child if child in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    if isinstance(requested, str) and requested in HANDSHAKE_PROTOCOL_VERSIONS:
        return min(requested, ceiling)
    return ceiling


def offered_capabilities(server: ManagedServer) -> dict[str, Any]:
    """What a client is told the server offers: its own, with ``listChanged`` (mcp-tray
    tells clients when a respawned server's lists change)."""
    catalog = server.catalog
    offered = dict(catalog.capabilities) if catalog.capabilities else dict(DEFAULT_CAPABILITIES)
    for kind in ("tools", "resources", "prompts"):
        if kind in offered:
            offered[kind] = {**(offered[kind] or {}), "listChanged": True}
    return offered


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


class _RootsNeeded(Exception):
    """A 2026-07-28 client must be asked for its roots before its request can be placed."""


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
        self.placement = Placement(supervisor, spawn, self._forget)
        self.parking = Parking()
        self._shares: dict[int, Share] = {}
        self._seats: dict[str, Seat] = {}
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

    def share(self, server: ManagedServer) -> Share:
        share = self._shares.get(id(server))
        if share is None or share.server is not server:
            share = self._shares[id(server)] = Share(server)
        return share

    def _forget(self, server: ManagedServer) -> None:
        """A child made for sessions stopped: its share goes with it."""
        self._shares.pop(id(server), None)

    def seat(self, session: ClientSession) -> Seat | None:
        return self._seats.get(session.id)

    def release(self, session: ClientSession) -> None:
        """The session tripped or closed: it leaves its child, and a child made for it goes."""
        seat = self._seats.pop(session.id, None)
        if seat is not None:
            self._leave(seat)

    def _leave(self, seat: Seat) -> None:
        seat.share.leave(seat.member, self.spawn)
        server = seat.server
        placement = self.placement
        others = [s for s in self._seats.values() if s is not seat and s.server is server]
        if placement.made(server) and not others:
            placement.unused(server, lambda: any(s.server is server for s in self._seats.values()))

    async def server_for(self, request: Request, member: Member) -> ManagedServer:
        """The child that serves this request's session (seated there from now on)."""
        client = request.client
        session = client.session
        base = self.placement.base(session.server)
        seat = self._seats.get(session.id)
        sharing = base.sharing
        roots = None
        source = None
        # A pinned shared server that asks: its session's roots are known before it is owed
        # them (not at initialize, which has no stream to ask on).
        if sharing != "shared" or (base.asks_roots and request.method != "initialize"):
            try:
                roots = await self._roots(request)
            except _RootsNeeded:
                if request.method in INPUT_REQUIRED_METHODS:
                    raise
                # Only these may answer input_required: the rest is the entry's own child's.
                return base
            if sharing != "shared":
                source = roots_source(session if sharing == "per-session" else tuple(roots))
        server = await self.placement.child(
            base,
            session=session.id,
            modern=client.modern,
            askable=client.askable,
            roots=[str(root.get("uri")) for root in roots or ()],
            roots_source=source,
        )
        if seat is not None and seat.server is server:
            return server
        if seat is not None:
            self._leave(seat)
        share = self.share(server)
        self._seats[session.id] = Seat(server, share, member)
        share.join(member, _Attached(self, client))
        return server

    def _stays(self, seat: Seat, client: Client) -> bool:
        """A shared entry's own child keeps serving its session: nothing to decide."""
        server = seat.server
        return (
            server.sharing == "shared"
            and self.supervisor.servers.get(client.session.server) is server
            and (client.modern or not self.placement.wants_own_era(server, False, client.askable))
        )

    # ------------------------------------------------------------- roots

    async def _roots(self, request: Request) -> tuple[dict[str, Any], ...]:
        """The client's roots: asked once per session (and again after it says they changed)."""
        client = request.client
        session = client.session
        if session.roots is not None:
            return session.roots
        if "roots" not in client.capabilities:
            session.roots = ()
            return session.roots
        if client.modern:
            raise _RootsNeeded
        ask = request.ask or client.ask
        if ask is None:
            return ()
        answer = await ask("roots/list", None)
        session.roots = roots_in(answer)
        return session.roots

    async def roots_changed(self, client: Client, member: Member) -> None:
        """The client says its roots changed (a handshake-era ``roots/list_changed``)."""
        session = client.session
        seat = self._seats.get(session.id)
        if seat is None:
            session.roots = None  # asked again when they matter
            return
        server = seat.server
        if server.config.sharing == "shared":
            session.roots = None  # what it says when it is next asked
            # The child asks for roots outside any call: only its one session can answer.
            if server.routing.attached == [member.key]:
                await server.notify_upstream("notifications/roots/list_changed", None)
            return
        # Asking the client now would wait on the very client that waits for this
        # notification to be taken: the session learns its roots right after.
        self.spawn(self._relearn_roots(client, member, seat))

    async def _relearn_roots(self, client: Client, member: Member, seat: Seat) -> None:
        session = client.session
        session.roots = None
        if client.ask is not None:
            with contextlib.suppress(RpcError):
                session.roots = roots_in(await client.ask("roots/list", None))
        server = seat.server
        if server.config.sharing == "per-workspace":
            if session.roots is not None:
                request = Request(client, "roots/list", {}, NoReply(), None)
                await self.server_for(request, member)  # the matching workspace's child
            return
        # Its own child asks again, and is answered from the session's new roots.
        await server.notify_upstream("notifications/roots/list_changed", None)

    # ------------------------------------------------------------ answers

    async def hello(self, client: Client, member: Member, requested: object) -> dict[str, Any]:
        """``initialize``: answered by mcp-tray from what the child last said."""
        session = client.session
        base = self.placement.base(session.server)
        await started(base)
        server = base
        if base.sharing == "shared":
            request = Request(client, "initialize", {}, NoReply(), None)
            server = await self.server_for(request, member)  # it hears list_changed from now on
        catalog = server.catalog
        info = dict(catalog.server_info) or {"name": base.name, "version": "unknown"}
        info.setdefault("title", f"{base.name} (via mcp-tray {__version__})")
        result: dict[str, Any] = {
            "protocolVersion": shared_version(requested, catalog.version),
            "capabilities": offered_capabilities(server),
            "serverInfo": info,
        }
        if catalog.instructions:
            result["instructions"] = catalog.instructions
        return result

    async def discover(self, name: str) -> dict[str, Any]:
        """``server/discover``: the child's own answer where it gave one.

        Where it must differ: ``supportedVersions`` says what mcp-tray serves
        in this era; for a handshake-era child everything else is built from
        its ``initialize`` answer (its capabilities, with ``listChanged``,
        which mcp-tray delivers on ``subscriptions/listen``), with caching
        hints that keep nothing (a respawn may change what it offers).
        """
        server = self.placement.base(name)
        await started(server)
        catalog = server.catalog
        if catalog.modern and catalog.discover:
            result = dict(catalog.discover)
            result["supportedVersions"] = list(MODERN_PROTOCOL_VERSIONS)
            return result
        result = {
            "supportedVersions": [LATEST_MODERN_VERSION],
            "capabilities": offered_capabilities(server),
        }
        if catalog.instructions:
            result["instructions"] = catalog.instructions
        info = catalog.server_info or {"name": server.name, "version": "unknown"}
        return as_complete(result, "server/discover", info)

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
                client.session, client.modern, base.name, method, request.params, "breaker", ""
            )
            return encode(refused, method, client.modern, base.catalog)
        seat = self._seats.get(client.session.id)
        try:
            server = (
                seat.server
                if seat is not None and self._stays(seat, client)
                else await self.server_for(request, member)
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
        if method in LIST_METHODS and not request.params.get("cursor") and catalog.known:
            client.session.requests += 1
            kind = LIST_METHODS[method]
            listed = {kind: list(catalog.lists.get(kind, []))}
            if client.modern:
                return as_complete(listed, method, catalog.server_info, catalog.hints.get(kind))
            return listed
        watch = self.journal.watch(
            client.session, client.modern, server.name, method, request.params
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
        if method == "tools/list" and isinstance(result.get("tools"), list):
            # Relayed from the child (a page, or before it listed): held tools stay out.
            result = {**result, "tools": server.catalog.screened(result["tools"])}
        return encode(result, method, client.modern, server.catalog)

    def caller(self, request: Request, server: ManagedServer, watch: Watch | None = None) -> Caller:
        """Who the request is for, as the call path takes it."""
        client = request.client
        seat = self._seats.get(client.session.id)
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
        share = self.share(server)
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
        seat = self._seats[request.client.session.id]
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


class _Attached:
    """A seated session, as the router asks it things outside any call."""

    def __init__(self, pipeline: Pipeline, client: Client) -> None:
        self._pipeline = pipeline
        self._client = client

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        ask = self._client.ask
        if ask is None:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the only client session of this server speaks MCP 2026-07-28, "
                "which can be asked things only within its own requests",
            )
        return await ask(method, params)

    async def roots(self) -> dict[str, Any]:
        """What the client said (it says when they change), else asked now."""
        session = self._client.session
        if session.roots is not None:
            return {"roots": [dict(root) for root in session.roots]}
        answer = await self.ask("roots/list", None)
        session.roots = roots_in(answer)
        return answer


class NoReply:
    """The reply of a request of mcp-tray's own making (a seat to find): nothing rides it."""

    progress_token = None

    def related(self, message: dict[str, Any]) -> None:
        pass

    async def progress(self, params: Mapping[str, Any]) -> None:
        pass


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
