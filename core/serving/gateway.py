"""The gateway: every AI client shares the supervised servers over MCP streamable HTTP.

``/mcp/<server>`` speaks streamable HTTP (``core.protocol.streamable``) and forwards
every request raw through the call path of DESIGN 3.3, so fields mcp-tray
does not model pass through untouched.

The gateway answers ``initialize`` itself, from the server's last known
capabilities and info, so a client can connect to a starting or parked
server and learns the real reason on its first request. Lists come from the
server's last listing (refreshed at every handshake and on ``list_changed``).
Server notifications fan out to the server's sessions; a server's own
requests (sampling, elicitation, roots) go back on the response stream of
the call in flight.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from core import __version__
from core.base.errors import CallError, RpcError, SessionTripped, UnknownServer, UpstreamError
from core.base.states import ServerState
from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.protocol.jsonrpc import INTERNAL_ERROR
from core.protocol.streamable import (
    HttpSession,
    RequestContext,
    StreamableHttp,
)
from core.serving.sessions import ClientSession, SessionTable
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor

logger = logging.getLogger(__name__)

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
#: Server notifications every session of the server receives.
FANNED_OUT: Final = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/updated",
        "notifications/message",
    }
)

SessionHook = Callable[[ClientSession], None]
PrivateServerFactory = Callable[[ManagedServer, str], ManagedServer]


class Gateway:
    """ASGI endpoint for ``/mcp/{server}``."""

    def __init__(
        self,
        supervisor: Supervisor,
        sessions: SessionTable,
        *,
        private_server: PrivateServerFactory | None = None,
        on_open: SessionHook | None = None,
        on_close: SessionHook | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.sessions = sessions
        self.private_server = private_server
        self._on_open = on_open
        self._on_close = on_close
        self._endpoints: dict[str, StreamableHttp] = {}
        self.connections: dict[str, GatewayConnection] = {}
        self._listening: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    async def aclose(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope.get("path_params", {}).get("server", "")
        try:
            server = self.supervisor.server(name)
        except UnknownServer as exc:
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": str(exc)}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        endpoint = self._endpoints.get(name)
        if endpoint is None:
            endpoint = StreamableHttp(lambda session, scope: self._connect(server, session, scope))
            endpoint.start()
            self._endpoints[name] = endpoint
        await endpoint.handle(scope, receive, send)

    def _connect(
        self, server: ManagedServer, http: HttpSession, scope: Scope
    ) -> "GatewayConnection":
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        bridge_client = headers.get(CLIENT_HEADER)
        session = ClientSession(
            id=http.id,
            server=server.name,
            kind="bridge" if bridge_client else "http",
            worker_identity=headers.get(WORKER_HEADER),
        )
        if bridge_client:
            session.client_name = bridge_client
        return GatewayConnection(self, server, http, session, named_by_bridge=bool(bridge_client))

    def opened(self, connection: "GatewayConnection") -> None:
        self.connections[connection.session.id] = connection
        self.sessions.open(connection.session)
        if self._on_open is not None:
            self._on_open(connection.session)
        if connection.shared.name not in self._listening:
            self._listening.add(connection.shared.name)
            connection.shared.routing.listeners.append(self._fan_out)

    def closed(self, connection: "GatewayConnection") -> None:
        if self.connections.pop(connection.session.id, None) is None:
            return
        self.sessions.close(connection.session.id)
        if self._on_close is not None:
            self._on_close(connection.session)

    def _fan_out(self, server: str, method: str, params: Mapping[str, Any] | None) -> None:
        if method not in FANNED_OUT:
            return
        for connection in list(self.connections.values()):
            if (
                connection.shared.name == server
                and connection.shared.config.sharing != "per-session"
            ):
                connection.http.notify(method, params)

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class GatewayConnection:
    """One client session on ``/mcp/<server>``: the ``Handler`` of its HTTP session."""

    def __init__(
        self,
        gateway: Gateway,
        server: ManagedServer,
        http: HttpSession,
        session: ClientSession,
        *,
        named_by_bridge: bool,
    ) -> None:
        self.gateway = gateway
        self.shared = server
        self.http = http
        self.session = session
        self._named_by_bridge = named_by_bridge
        self._private: ManagedServer | None = None
        session.release = self._release

    @property
    def server(self) -> ManagedServer:
        """The server this session talks to: the shared one, or its own child."""
        if self.shared.config.sharing != "per-session":
            return self.shared
        if self._private is None:
            factory = self.gateway.private_server
            if factory is None:
                raise RuntimeError("per-session sharing needs a private server factory")
            self._private = factory(self.shared, self.session.id)
            self._private.start()
            self._private.routing.listeners.append(self._private_notification)
        return self._private

    def _release(self) -> None:
        """The session tripped or closed: let go of its own child."""
        private, self._private = self._private, None
        if private is not None:
            self.gateway.spawn(self.gateway.supervisor.retire_private(private))

    def _private_notification(
        self, server: str, method: str, params: Mapping[str, Any] | None
    ) -> None:
        if method in FANNED_OUT:
            self.http.notify(method, params)

    def on_close(self) -> None:
        self.gateway.closed(self)

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/roots/list_changed":
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
            server = self.server
            if server.catalog.known:
                self.session.requests += 1
                items = server.catalog.lists.get(LIST_METHODS[method], [])
                return {LIST_METHODS[method]: list(items)}
        return await self._forward(ctx, method, params)

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        info = params.get("clientInfo")
        if (
            not self._named_by_bridge
            and isinstance(info, dict)
            and isinstance(info.get("name"), str)
        ):
            self.session.client_name = info["name"]
        server = self.shared
        catalog = server.catalog
        if not catalog.known and server.state is ServerState.STARTING:
            # First start under way: a short wait gives the client the real
            # capabilities instead of the tools-only defaults.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first_start(server), FIRST_START_WAIT_SECONDS)
        capabilities = (
            dict(catalog.capabilities) if catalog.capabilities else dict(DEFAULT_CAPABILITIES)
        )
        for kind in ("tools", "resources", "prompts"):
            if kind in capabilities:
                # mcp-tray tells clients when a respawned server's lists change.
                capabilities[kind] = {**(capabilities[kind] or {}), "listChanged": True}
        server_info = dict(catalog.server_info) or {"name": server.name, "version": "unknown"}
        server_info.setdefault("title", f"{server.name} (via mcp-tray {__version__})")
        result: dict[str, Any] = {
            "protocolVersion": self.http.protocol_version,
            "capabilities": capabilities,
            "serverInfo": server_info,
        }
        if catalog.instructions:
            result["instructions"] = catalog.instructions
        if self.session.id not in self.gateway.connections:
            self.gateway.opened(self)
            # The client name is known now: normalise it through the session table.
            self.gateway.sessions.identify(self.session, self.session.client_name)
        return result

    async def _forward(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        sessions = self.gateway.sessions
        try:
            self.session.check()
            result = await self.server.request(
                method,
                params,
                Caller(
                    on_progress=ctx.progress if ctx.progress_token is not None else None,
                    on_server_request=ctx.send_request,
                ),
            )
        except CallError as exc:
            if isinstance(exc, SessionTripped):
                sessions.refused(self.session)
            else:
                sessions.failed(self.session, exc)
            if isinstance(exc, UpstreamError):
                raise RpcError(exc.code, exc.upstream_message, exc.data) from None
            if method == "tools/call":
                # The model reads tool results, not protocol errors: it should
                # see "exited", "do NOT retry" or the reset hint in its own words.
                return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
            raise RpcError(INTERNAL_ERROR, str(exc), {"kind": exc.kind}) from None
        sessions.succeeded(self.session)
        return result


async def _first_start(server: ManagedServer) -> None:
    while not server.catalog.known and server.state is ServerState.STARTING:
        await server.changed().wait()
