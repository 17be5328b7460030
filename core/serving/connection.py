"""One client session on the gateway: the ``Handler`` of its streamable HTTP session.

It answers ``initialize`` itself, from the server's last known capabilities
and info, so a client can connect to a starting or parked server and learns
the real reason on its first request. The version it announces is one both
the client and the child speak. Lists come from the server's last listing;
everything else goes raw through the call path with this session as the
caller, so the server's own requests come back to this session only, and
only when the client declared the matching capability.
"""

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from starlette.types import Scope

from core import __version__
from core.base.errors import CallError, RpcError, SessionTripped, UpstreamError
from core.base.states import ServerState
from core.protocol.eras import LATEST_MODERN_VERSION, Envelope
from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.protocol.jsonrpc import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LATEST_HANDSHAKE_VERSION,
    METHOD_NOT_FOUND,
)
from core.protocol.streamable import HttpSession, RequestContext
from core.serving.gateway import Gateway, Share
from core.serving.sessions import ClientSession, SessionTable
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer

#: Lists served from the server's last listing.
LIST_METHODS: Final = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
#: A server that never started is announced with this: tools only.
DEFAULT_CAPABILITIES: Final = {"tools": {"listChanged": True}}
#: A server starting for the first time gets this long to finish its
#: handshake before ``initialize`` answers with the defaults instead.
FIRST_START_WAIT_SECONDS: Final = 10.0
#: The client capability a server request needs.
REQUIRED_CAPABILITY: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


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


class GatewayConnection:
    def __init__(
        self,
        gateway: Gateway,
        name: str,
        http: HttpSession,
        session: ClientSession,
    ) -> None:
        self.gateway = gateway
        self.name = name
        self.http = http
        self.session = session
        self._private: ManagedServer | None = None
        self._share: Share | None = None
        #: What the client declared in ``initialize``.
        self.capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] | None = None
        #: Requests of this session in flight on the server, oldest first.
        self._calls: dict[int, RequestContext] = {}
        self._call_ids = itertools.count(1)
        session.release = self._release

    @classmethod
    def for_scope(
        cls, gateway: Gateway, name: str, http: HttpSession, scope: Scope
    ) -> "GatewayConnection":
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        bridge_client = headers.get(CLIENT_HEADER)
        session = ClientSession(
            id=http.id,
            server=name,
            kind="bridge" if bridge_client else "http",
            worker_identity=headers.get(WORKER_HEADER),
        )
        if bridge_client:
            session.client_name = bridge_client
        return cls(gateway, name, http, session)

    # ---------------------------------------------------------- the server

    @property
    def shared(self) -> ManagedServer:
        return self.gateway.supervisor.server(self.name)

    @property
    def server(self) -> ManagedServer:
        """The server this session talks to: the shared one, or its own child."""
        shared = self.shared
        if shared.config.sharing != "per-session":
            return shared
        if self._private is None:
            self._private = self.gateway.owner.private_server(shared, self.session.id)
            self._private.start()
        return self._private

    def share(self) -> Share:
        """The server's sessions, this one among them (joined on first use)."""
        server = self.server
        if self._share is None or self._share.server is not server:
            if self._share is not None:
                self._share.leave(self, self.gateway.spawn)
            self._share = self.gateway.share(server)
            self._share.join(self, self.outside_call_request)
        return self._share

    @property
    def key(self) -> str:
        return self.session.id

    @property
    def exclusive(self) -> bool:
        """This session has its child to itself (per-session sharing)."""
        return self._private is not None

    def caller(self, ctx: RequestContext | None = None) -> Caller:
        # What this client declared, for a 2026-07-28 child, which reads it per request.
        level = self._share.levels.get(self.key) if self._share is not None else None
        envelope = Envelope(LATEST_MODERN_VERSION, self.capabilities, self.client_info, level)
        if ctx is None:
            return Caller(
                session=self.session.id,
                on_server_request=self.outside_call_request,
                envelope=envelope,
            )
        return Caller(
            session=self.session.id,
            on_progress=ctx.progress if ctx.progress_token is not None else None,
            on_server_request=lambda method, params: self._server_request(method, params, ctx),
            envelope=envelope,
        )

    def _release(self) -> None:
        """The session tripped or closed: let go of its own child."""
        if self._share is not None:
            self._share.leave(self, self.gateway.spawn)
            self._share = None
        private, self._private = self._private, None
        if private is not None:
            self.gateway.spawn(self.gateway.supervisor.retire_private(private))

    # ------------------------------------------------ server -> this client

    async def _server_request(
        self, method: str, params: Mapping[str, Any] | None, ctx: RequestContext | None
    ) -> dict[str, Any]:
        """One of the server's own requests, for this session: if the client can take it."""
        needed = REQUIRED_CAPABILITY.get(method)
        if needed is not None and needed not in self.capabilities:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the client of this session ({self.session.client_name}) "
                f"did not declare the {needed!r} capability",
            )
        return await self.http.client_request(method, params, via=ctx)

    async def outside_call_request(
        self, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return await self._server_request(method, params, None)

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        """Put a message on this session's newest call in flight; False when none is."""
        if not self._calls:
            return False
        self._calls[max(self._calls)].related(message)
        return True

    def post(self, message: dict[str, Any]) -> None:
        """A message not tied to a call: the session's GET stream, if the client opened one."""
        self.http.post(message)

    # ------------------------------------------------------ Handler protocol

    def on_close(self) -> None:
        self.gateway.closed(self)

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method != "notifications/roots/list_changed":
            return
        # The server then asks for roots outside any call: that only reaches
        # the right client when this session is its only one (or has its own).
        share = self.share()
        if self.exclusive or share.server.routing.attached == [self.key]:
            with contextlib.suppress(CallError):
                await self.server.notify_upstream(method, params)

    async def on_request(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method == "initialize":
            return await self._initialize(params or {})
        if method == "ping":
            return {}
        if method in LIST_METHODS and not (params or {}).get("cursor"):
            catalog = self.server.catalog
            if catalog.known:
                self.session.requests += 1
                return {LIST_METHODS[method]: list(catalog.lists.get(LIST_METHODS[method], []))}
        return await self._forward(ctx, method, params)

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        info = params.get("clientInfo")
        if (
            self.session.kind != "bridge"  # a bridge names the client it speaks for
            and isinstance(info, dict)
            and isinstance(info.get("name"), str)
        ):
            self.session.client_name = info["name"]
        capabilities = params.get("capabilities")
        self.capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        self.client_info = dict(info) if isinstance(info, dict) else None
        server = self.shared
        catalog = server.catalog
        if not catalog.known and server.state is ServerState.STARTING:
            # First start under way: a short wait gives the client the real
            # capabilities instead of the tools-only defaults.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(first_start(server), FIRST_START_WAIT_SECONDS)
        offered = dict(catalog.capabilities) if catalog.capabilities else dict(DEFAULT_CAPABILITIES)
        for kind in ("tools", "resources", "prompts"):
            if kind in offered:
                # mcp-tray tells clients when a respawned server's lists change.
                offered[kind] = {**(offered[kind] or {}), "listChanged": True}
        server_info = dict(catalog.server_info) or {"name": server.name, "version": "unknown"}
        server_info.setdefault("title", f"{server.name} (via mcp-tray {__version__})")
        result: dict[str, Any] = {
            "protocolVersion": shared_version(params.get("protocolVersion"), catalog.version),
            "capabilities": offered,
            "serverInfo": server_info,
        }
        if catalog.instructions:
            result["instructions"] = catalog.instructions
        if self.session.id not in self.gateway.connections:
            self.gateway.opened(self)
            # The client name is known now: normalise it through the session table.
            self.gateway.sessions.identify(self.session, self.session.client_name)
            if server.config.sharing != "per-session":
                self.share()  # it hears list_changed and may answer the server from now on
        return result

    async def _forward(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        call_id = next(self._call_ids)
        self._calls[call_id] = ctx
        try:
            return await guarded(
                self.gateway.sessions, self.session, method, lambda: self._send(ctx, method, params)
            )
        finally:
            self._calls.pop(call_id, None)

    async def _send(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """The request to the server, or the share's version of it for per-session state."""
        share = self.share()
        caller = self.caller(ctx)
        values = params or {}
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = values.get("uri")
            if not isinstance(uri, str):
                raise RpcError(INVALID_PARAMS, f"{method} needs a string 'uri'")
            if method == "resources/subscribe":
                return await share.subscribe(self.session.id, uri, caller)
            return await share.unsubscribe(self.session.id, uri, caller)
        if method == "logging/setLevel":
            level = values.get("level")
            if not isinstance(level, str):
                raise RpcError(INVALID_PARAMS, "logging/setLevel needs a string 'level'")
            return await share.set_level(self.session.id, level, caller)
        return await self.server.request(method, params, caller)


async def first_start(server: ManagedServer) -> None:
    """Until a server starting for the first time has listed what it offers."""
    while not server.catalog.known and server.state is ServerState.STARTING:
        await server.changed().wait()


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
