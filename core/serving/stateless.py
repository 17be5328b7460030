"""Clients of the stateless era (2026-07-28) on the gateway, whatever era the child speaks.

Each request stands alone, so mcp-tray keeps what the handshake era kept in
a session elsewhere:

- **Who is calling** (the session breaker, the Sessions tab): a stateless
  client is its ``clientInfo`` name plus its connection (or, through the
  bridge, the bridge's worker row). Such a session ends after
  ``STATELESS_IDLE_SECONDS`` without a request.
- **``server/discover``** is answered from the child's own answer (a
  2026-07-28 child) or from what its ``initialize`` said; lists from the last
  listing, with ``resultType`` and the child's caching hints (else ``ttlMs``
  0: a respawn may change a list at any moment).
- **A handshake-era child asking mid-call** (sampling, elicitation, roots)
  cannot ask a stateless client back. The call is parked: the client gets an
  ``input_required`` result whose ``requestState`` names the parked call; its
  retry with ``inputResponses`` answers the child's pending request, and the
  call goes on. A parked call lives ``PARKED_TTL_SECONDS``; a ``requestState``
  mcp-tray no longer holds (expired, finished, mcp-tray or the child
  restarted) is answered with the spec's "invalid or expired" error. A
  2026-07-28 child's own ``input_required`` passes through untouched.
- **Change notifications** come on a ``subscriptions/listen`` stream.
"""

import asyncio
import contextlib
import itertools
import secrets
import time
import uuid
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Final

from starlette.types import Scope

from core.base.errors import RpcError
from core.base.states import ServerState
from core.protocol.eras import (
    HEADER_MISMATCH,
    INPUT_REQUIRED,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    REMOVED_IN_MODERN,
    SERVER_INFO_META_KEY,
    SUBSCRIPTION_ID_META_KEY,
    Envelope,
    as_complete,
    param_header_problem,
    without_envelope,
)
from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND
from core.protocol.stateless import StatelessContext
from core.serving.connection import (
    DEFAULT_CAPABILITIES,
    FIRST_START_WAIT_SECONDS,
    LIST_METHODS,
    REQUIRED_CAPABILITY,
    first_start,
    guarded,
)
from core.serving.gateway import log_severity
from core.serving.sessions import ClientSession
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer

if TYPE_CHECKING:
    from core.serving.gateway import Gateway

#: A stateless client's session ends after this long without a request.
STATELESS_IDLE_SECONDS: Final = 30 * 60
#: A parked call waits this long for the client's retry.
PARKED_TTL_SECONDS: Final = 600.0
#: The ``requestState`` of a call mcp-tray parked starts with this.
STATE_PREFIX: Final = "mcp-tray."
#: The filter keys of ``subscriptions/listen`` and the notification each lets through.
LISTEN_FILTERS: Final = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
RESOURCE_SUBSCRIPTIONS: Final = "resourceSubscriptions"


class StatelessCall:
    """One stateless request in flight, as a member of its server's share: it hears
    log messages at or above the level its envelope asked for, and nothing else."""

    _ids = itertools.count(1)

    def __init__(self, session: ClientSession, ctx: StatelessContext, envelope: Envelope) -> None:
        self.key = f"{session.id}#{next(self._ids)}"
        self.ctx = ctx
        self.level = envelope.log_level
        self.exclusive = False

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        if message.get("method") != "notifications/message" or self.level is None:
            return False
        level = (message.get("params") or {}).get("level")
        if log_severity(level) < log_severity(self.level):
            return False
        self.ctx.related(message)
        return True

    def post(self, message: dict[str, Any]) -> None:
        """Nothing outside its call reaches a stateless request."""


class Listener:
    """A ``subscriptions/listen`` stream, as a member of its server's share."""

    def __init__(self, key: str, ctx: StatelessContext, wanted: Mapping[str, Any]) -> None:
        self.key = key
        self.ctx = ctx
        self.exclusive = False
        self.methods = {
            method for flag, method in LISTEN_FILTERS.items() if wanted.get(flag) is True
        }

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        return False

    def post(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        # resources/updated only reaches a listener subscribed to its URI (the share checks).
        if method in self.methods or method == "notifications/resources/updated":
            params = dict(message.get("params") or {})
            params["_meta"] = {
                **(params.get("_meta") or {}),
                SUBSCRIPTION_ID_META_KEY: self.ctx.request_id,
            }
            self.ctx.related({**message, "params": params})


class Parked:
    """A call to a handshake-era child, waiting for its stateless client's input."""

    def __init__(
        self, session: str, method: str, name: object, envelope: Envelope, ctx: StatelessContext
    ) -> None:
        self.session = session
        self.method = method
        self.name = name
        self.envelope = envelope
        #: The request (first or retry) whose reply carries what happens next.
        self.ctx = ctx
        self.expires = time.monotonic() + PARKED_TTL_SECONDS
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._asked: dict[str, tuple[str, Any, asyncio.Future[dict[str, Any]]]] = {}
        self._keys = itertools.count(1)
        self.task: asyncio.Task[dict[str, Any]] | None = None

    def start(self, call: Awaitable[dict[str, Any]]) -> None:
        self.task = asyncio.ensure_future(call)
        self.task.add_done_callback(lambda task: self._events.put_nowait(("done", task)))

    async def progress(self, params: Mapping[str, Any]) -> None:
        await self.ctx.progress(params)

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The child's own request: it becomes one of the client's input requests."""
        needed = REQUIRED_CAPABILITY.get(method)
        if needed is None or needed not in self.envelope.capabilities:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the client did not declare the {needed or method!r} capability",
            )
        key = f"mcp-tray-{next(self._keys)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[key] = (method, params, future)
        self._events.put_nowait(("ask", key))
        try:
            return await future
        finally:
            self._asked.pop(key, None)

    def answer(self, responses: Mapping[str, Any]) -> None:
        for key, (_, _, future) in list(self._asked.items()):
            response = responses.get(key)
            if isinstance(response, dict) and not future.done():
                future.set_result(response)

    async def next(self) -> dict[str, Any] | None:
        """The call's result (None: it needs input; see ``questions``)."""
        kind, value = await self._events.get()
        if kind == "done":
            return await value  # type: ignore[no-any-return]
        # Whatever else the child asked meanwhile rides the same round.
        with contextlib.suppress(asyncio.QueueEmpty):
            while True:
                kind, value = self._events.get_nowait()
                if kind == "done":
                    self._events.put_nowait((kind, value))
                    break
        return None

    def questions(self) -> dict[str, Any]:
        """Every request of the child still waiting for an answer (asked again until answered)."""
        return {
            key: {"method": method, **({"params": dict(params)} if params is not None else {})}
            for key, (method, params, future) in self._asked.items()
            if not future.done()
        }

    def drop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        for _, _, future in self._asked.values():
            if not future.done():
                future.set_exception(RpcError(INVALID_PARAMS, "the client never answered"))


class StatelessClients:
    """The gateway's stateless clients: their sessions and their parked calls."""

    def __init__(self, gateway: "Gateway") -> None:
        self.gateway = gateway
        self._sessions: dict[tuple[str, str], ClientSession] = {}
        self._seen: dict[str, float] = {}
        self._private: dict[str, ManagedServer] = {}
        self.parked: dict[str, Parked] = {}

    def session_for(self, name: str, envelope: Envelope, scope: Scope) -> ClientSession:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        bridge = headers.get(WORKER_HEADER)
        client_name = str((envelope.client_info or {}).get("name") or "unknown")
        host, port = scope.get("client") or ("?", 0)
        key = (name, f"bridge {bridge}" if bridge else f"{client_name} via {host}:{port}")
        session = self._sessions.get(key)
        if session is None or session.closed:
            session = ClientSession(
                id=uuid.uuid4().hex,
                server=name,
                kind="bridge" if bridge else "http",
                worker_identity=bridge,
            )
            session.release = lambda: self._release(session)
            self._sessions[key] = session
            self.gateway.sessions.open(session)
            self.gateway.sessions.identify(session, headers.get(CLIENT_HEADER) or client_name)
            self.gateway.owner.session_opened(session)
        self._seen[session.id] = time.monotonic()
        return session

    def server_for(self, session: ClientSession) -> ManagedServer:
        shared = self.gateway.supervisor.server(session.server)
        if shared.config.sharing != "per-session":
            return shared
        private = self._private.get(session.id)
        if private is None:
            private = self.gateway.owner.private_server(shared, session.id)
            private.start()
            self._private[session.id] = private
        return private

    def _release(self, session: ClientSession) -> None:
        private = self._private.pop(session.id, None)
        if private is not None:
            self.gateway.spawn(self.gateway.supervisor.retire_private(private))

    def park(self, parked: Parked) -> str:
        token = STATE_PREFIX + secrets.token_urlsafe(24)
        self.parked[token] = parked
        return token

    def claim(self, token: str, session: str, method: str, name: object) -> Parked:
        self.expire()
        parked = self.parked.pop(token, None)
        if parked is None or (parked.session, parked.method, parked.name) != (
            session,
            method,
            name,
        ):
            if parked is not None:
                self.parked[token] = parked  # someone else's: leave it be
            raise RpcError(
                INVALID_PARAMS,
                "Invalid or expired requestState: mcp-tray no longer holds this request (it "
                f"finished, waited more than {PARKED_TTL_SECONDS:g} s, or mcp-tray or the server "
                "restarted since); send the request again without requestState",
                {"reason": "invalid_request_state"},
            )
        return parked

    def expire(self) -> None:
        """Drop parked calls past their time, and sessions idle past theirs."""
        now = time.monotonic()
        for token, parked in list(self.parked.items()):
            if parked.expires < now:
                del self.parked[token]
                parked.drop()
        for key, session in list(self._sessions.items()):
            if now - self._seen.get(session.id, now) > STATELESS_IDLE_SECONDS:
                del self._sessions[key]
                self._seen.pop(session.id, None)
                self.gateway.sessions.close(session.id)
                self.gateway.owner.session_closed(session)

    def endpoint(self, name: str) -> "StatelessEndpoint":
        return StatelessEndpoint(self, name)

    def aclose(self) -> None:
        for parked in self.parked.values():
            parked.drop()
        self.parked.clear()


class StatelessEndpoint:
    """One server's ``StatelessHandler``: what a 2026-07-28 client asks of it."""

    def __init__(self, clients: StatelessClients, name: str) -> None:
        self.clients = clients
        self.name = name

    async def on_stateless(
        self,
        ctx: StatelessContext,
        method: str,
        params: Mapping[str, Any],
        envelope: Envelope,
        scope: Scope,
    ) -> dict[str, Any]:
        clients = self.clients
        session = clients.session_for(self.name, envelope, scope)
        server = clients.server_for(session)
        if method == "server/discover":
            return await discover_result(server)
        if method in REMOVED_IN_MODERN:
            raise RpcError(METHOD_NOT_FOUND, f"{method!r} is not part of MCP 2026-07-28")
        if method == "subscriptions/listen":
            return await self._listen(ctx, server, params, session)
        catalog = server.catalog
        if method in LIST_METHODS and not params.get("cursor") and catalog.known:
            session.requests += 1
            kind = LIST_METHODS[method]
            listed = {kind: list(catalog.lists.get(kind, []))}
            return as_complete(listed, method, catalog.server_info, catalog.hints.get(kind))
        if method == "tools/call":
            self._check_param_headers(catalog.tools.get(str(params.get("name"))), params, scope)
        sessions = clients.gateway.sessions
        result = await guarded(
            sessions,
            session,
            method,
            lambda: self._send(ctx, server, method, params, envelope, session),
        )
        # mcp-tray's own answers (an exit, a parked server, a tripped session) too.
        if "resultType" in result:
            return result
        return as_complete(result, method, catalog.server_info)

    @staticmethod
    def _check_param_headers(
        tool: Mapping[str, Any] | None, params: Mapping[str, Any], scope: Scope
    ) -> None:
        """The gateway is the server the client's HTTP headers reach: it checks them."""
        if tool is None:
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        arguments = params.get("arguments")
        problem = param_header_problem(
            tool.get("inputSchema"), arguments if isinstance(arguments, dict) else {}, headers
        )
        if problem is not None:
            raise RpcError(HEADER_MISMATCH, f"Header mismatch: {problem}")

    async def _send(
        self,
        ctx: StatelessContext,
        server: ManagedServer,
        method: str,
        params: Mapping[str, Any],
        envelope: Envelope,
        session: ClientSession,
    ) -> dict[str, Any]:
        share = self.clients.gateway.share(server)
        member = StatelessCall(session, ctx, envelope)
        share.join(member)
        try:
            if server.catalog.modern:
                caller = Caller(
                    session=session.id,
                    on_progress=ctx.progress if ctx.progress_token is not None else None,
                    envelope=envelope,
                    modern=True,
                )
                return await server.request(method, params, caller)
            return await self._through_parking(ctx, server, method, params, envelope, session)
        finally:
            share.leave(member, self.clients.gateway.spawn)

    async def _through_parking(
        self,
        ctx: StatelessContext,
        server: ManagedServer,
        method: str,
        params: Mapping[str, Any],
        envelope: Envelope,
        session: ClientSession,
    ) -> dict[str, Any]:
        """A handshake-era child, for a client that cannot be asked back mid-call."""
        name = params.get("uri") if method == "resources/read" else params.get("name")
        state = params.get("requestState")
        if isinstance(state, str) and state.startswith(STATE_PREFIX):
            parked = self.clients.claim(state, session.id, method, name)
            parked.ctx = ctx
            responses = params.get("inputResponses")
            parked.answer(responses if isinstance(responses, dict) else {})
        else:
            parked = Parked(session.id, method, name, envelope, ctx)
            clean = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
            caller = Caller(
                session=session.id,
                on_progress=parked.progress if ctx.progress_token is not None else None,
                on_server_request=parked.ask,
                envelope=envelope,
                modern=True,
            )
            parked.start(server.request(method, without_envelope(clean), caller))
        result = await parked.next()
        catalog = server.catalog
        if result is not None:
            return as_complete(result, method, catalog.server_info)
        token = self.clients.park(parked)
        answer: dict[str, Any] = {
            "resultType": INPUT_REQUIRED,
            "inputRequests": parked.questions(),
            "requestState": token,
        }
        if catalog.server_info:
            answer["_meta"] = {SERVER_INFO_META_KEY: dict(catalog.server_info)}
        return answer

    async def _listen(
        self,
        ctx: StatelessContext,
        server: ManagedServer,
        params: Mapping[str, Any],
        session: ClientSession,
    ) -> dict[str, Any]:
        wanted = params.get("notifications")
        filters = wanted if isinstance(wanted, dict) else {}
        honoured: dict[str, Any] = {k: True for k in LISTEN_FILTERS if filters.get(k) is True}
        uris = filters.get(RESOURCE_SUBSCRIPTIONS)
        subscribed = [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []
        if subscribed:
            honoured[RESOURCE_SUBSCRIPTIONS] = subscribed
        gateway = self.clients.gateway
        share = gateway.share(server)
        listener = Listener(f"{session.id}/listen/{ctx.request_id}", ctx, honoured)
        share.join(listener)
        try:
            for uri in subscribed:
                await share.subscribe(listener.key, uri, Caller(session=session.id))
            ctx.related(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {
                        "notifications": honoured,
                        "_meta": {SUBSCRIPTION_ID_META_KEY: ctx.request_id},
                    },
                }
            )
            await asyncio.Event().wait()  # until the client hangs up (it cancels us)
        finally:
            share.leave(listener, gateway.spawn)
        return {}  # pragma: no cover - only a hang-up ends a listen stream


async def discover_result(server: ManagedServer) -> dict[str, Any]:
    """``server/discover`` through the gateway: the child's own answer where it gave one.

    Where it must differ: ``supportedVersions`` says what mcp-tray serves in
    this era; for a handshake-era child everything else is built from its
    ``initialize`` answer (its capabilities, with ``listChanged``, which
    mcp-tray delivers on ``subscriptions/listen``), with caching hints that
    keep nothing (a respawn may change what it offers).
    """
    catalog = server.catalog
    if not catalog.known and server.state is ServerState.STARTING:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first_start(server), FIRST_START_WAIT_SECONDS)
    if catalog.modern and catalog.discover:
        result = dict(catalog.discover)
        result["supportedVersions"] = list(MODERN_PROTOCOL_VERSIONS)
        return result
    offered = dict(catalog.capabilities) if catalog.capabilities else dict(DEFAULT_CAPABILITIES)
    for kind in ("tools", "resources", "prompts"):
        if kind in offered:
            offered[kind] = {**(offered[kind] or {}), "listChanged": True}
    result = {"supportedVersions": [LATEST_MODERN_VERSION], "capabilities": offered}
    if catalog.instructions:
        result["instructions"] = catalog.instructions
    info = catalog.server_info or {"name": server.name, "version": "unknown"}
    return as_complete(result, "server/discover", info)
