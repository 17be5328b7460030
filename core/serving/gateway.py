"""The gateway: every AI client shares the supervised servers over MCP streamable HTTP.

``/mcp/<server>`` (and ``/<server>/mcp``, the shape the MCP Inspector
insists on) speak streamable HTTP (``core.protocol.streamable``); each client
session is a ``GatewayConnection`` (core.serving.connection) that forwards
requests raw through the call path of docs/design.md §3.3.

A server shared by several sessions must not leak one session's traffic to
another (docs/design.md §3.10). ``Share`` keeps, per server, what its sessions set and
who receives what the server sends:

- ``list_changed`` reaches every session;
- ``resources/updated`` reaches the sessions subscribed to that URI; the
  server sees one subscribe per URI (reference-counted over sessions) and
  the unsubscribe when the last session leaves;
- ``notifications/message`` reaches the sessions with a call in flight (on
  that call's own stream) and those that set a level with
  ``logging/setLevel`` (filtered by it); the server's level is the most
  verbose any live session asked for;
- anything else the server says unprompted is not passed on (nothing says
  whose it is). Progress travels with its call; server requests are placed
  by core.supervision.routing, which fails closed when unsure.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from core.base.errors import CallError, UnknownServer
from core.protocol.streamable import HttpSession, StreamableHttp
from core.protocol.wire import DEFAULT_MAX_BODY_BYTES
from core.serving.sessions import ClientSession, SessionTable
from core.supervision.routing import Caller, ServerRequestRouter
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor

if TYPE_CHECKING:
    from core.serving.connection import GatewayConnection

logger = logging.getLogger(__name__)

#: RFC 5424 severities as MCP names them, least severe first.
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
#: How long shutdown waits for the clean-up its closed sessions started
#: (a per-session child's stop contract takes at most ~5 s).
SHUTDOWN_TASKS_SECONDS: Final = 10.0
#: How often parked calls and idle stateless sessions are looked for.
HOUSEKEEPING_SECONDS: Final = 60.0
LIST_CHANGED: Final = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    }
)


class GatewayOwner(Protocol):
    """What the gateway needs from the service it runs in."""

    def private_server(self, shared: ManagedServer, session_id: str) -> ManagedServer:
        """A child of its own for one client session (``"sharing": "per-session"``)."""
        ...

    def session_opened(self, session: ClientSession) -> None: ...

    def session_closed(self, session: ClientSession) -> None: ...


class Member(Protocol):
    """Who shares a server: a session of either era, or one call or stream of a stateless client."""

    @property
    def key(self) -> str:
        """Unique among the server's members."""
        ...

    @property
    def exclusive(self) -> bool:
        """Has the child to itself (per-session sharing): may hear everything."""
        ...

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        """Put a message on the member's call in flight; False when there is none."""
        ...

    def post(self, message: dict[str, Any]) -> None:
        """A message not tied to a call (dropped where there is no stream for it)."""
        ...


def log_severity(level: object) -> int:
    """Position in ``LOG_LEVELS`` (unknown levels count as the most severe)."""
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else len(LOG_LEVELS)


class Share:
    """One server's client sessions: who subscribed to what, and who hears its logs."""

    def __init__(self, server: ManagedServer) -> None:
        self.server = server
        self.members: dict[str, Member] = {}
        self.subscribers: dict[str, set[str]] = {}
        self.levels: dict[str, str] = {}
        server.routing.listeners.append(self._on_notification)

    # --------------------------------------------------------------- members

    def join(self, member: Member, router: ServerRequestRouter | None = None) -> None:
        """A new member; with a ``router`` it can also answer the server outside any call."""
        self.members[member.key] = member
        if router is not None:
            self.server.routing.attach(member.key, router)

    def leave(self, member: Member, spawn: Callable[[Any], None]) -> None:
        key = member.key
        if self.members.pop(key, None) is None:
            return
        self.server.routing.detach(key)
        for uri in [uri for uri, who in self.subscribers.items() if key in who]:
            spawn(self.unsubscribe(key, uri))
        if self.levels.pop(key, None) is not None:
            spawn(self._sync_level(Caller()))

    # ------------------------------------------------------- subscriptions

    async def subscribe(self, session_id: str, uri: str, caller: Caller) -> dict[str, Any]:
        who = self.subscribers.get(uri)
        if not who:
            # The first subscriber: the server hears of it. Later ones share it.
            await self.server.watch(uri, caller)
            who = self.subscribers.setdefault(uri, set())
        who.add(session_id)
        return {}

    async def unsubscribe(
        self, session_id: str, uri: str, caller: Caller | None = None
    ) -> dict[str, Any]:
        who = self.subscribers.get(uri, set())
        who.discard(session_id)
        if not who and uri in self.subscribers:
            del self.subscribers[uri]
            with contextlib.suppress(CallError):
                await self.server.unwatch(uri, caller or Caller())
        return {}

    # -------------------------------------------------------------- logging

    async def set_level(self, session_id: str, level: str, caller: Caller) -> dict[str, Any]:
        self.levels[session_id] = level
        await self._sync_level(caller)
        return {}

    async def _sync_level(self, caller: Caller) -> None:
        """The server logs at the most verbose level any live session asked for."""
        if not self.levels or self.server.catalog.modern:
            # A 2026-07-28 child takes the level with each request (the envelope).
            return
        wanted = min(self.levels.values(), key=log_severity)
        if wanted != self.server.routing.log_level:
            await self.server.request("logging/setLevel", {"level": wanted}, caller)

    # --------------------------------------------------------- fanning out

    def _on_notification(self, _: str, method: str, params: Mapping[str, Any] | None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        if method in LIST_CHANGED:
            for member in list(self.members.values()):
                member.post(message)
        elif method == "notifications/resources/updated":
            uri = (params or {}).get("uri")
            subscribed = self.subscribers.get(uri, set()) if isinstance(uri, str) else set()
            for key in sorted(subscribed):
                if (subscriber := self.members.get(key)) is not None:
                    subscriber.post(message)
        elif method == "notifications/message":
            severity = log_severity((params or {}).get("level"))
            for member in list(self.members.values()):
                level = self.levels.get(member.key)
                if level is not None and severity < log_severity(level):
                    continue
                delivered = member.deliver_with_call(message)
                if not delivered and (level is not None or member.exclusive):
                    member.post(message)
        else:
            # Whose is it? Only a member with a child of its own can be sure.
            for member in list(self.members.values()):
                if member.exclusive and not member.deliver_with_call(message):
                    member.post(message)


class Gateway:
    """ASGI endpoint for ``/mcp/{server}`` and ``/{server}/mcp``."""

    def __init__(
        self,
        supervisor: Supervisor,
        sessions: SessionTable,
        owner: GatewayOwner,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.supervisor = supervisor
        self.sessions = sessions
        self.owner = owner
        self.max_body_bytes = max_body_bytes
        self._endpoints: dict[str, StreamableHttp] = {}
        self.connections: dict[str, GatewayConnection] = {}
        self._shares: dict[int, Share] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        from core.serving.stateless import StatelessClients

        self.stateless = StatelessClients(self)
        self._housekeeping: asyncio.Task[None] | None = None

    async def aclose(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        self.stateless.aclose()
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
        # Closing the sessions started their own clean-up (a per-session
        # child's stop, an unsubscribe): let it finish rather than cut it,
        # within the time the stop contract itself needs.
        pending = set(self._tasks)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=SHUTDOWN_TASKS_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope.get("path_params", {}).get("server", "")
        try:
            self.supervisor.server(name)
        except UnknownServer as exc:
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": str(exc)}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        endpoint = self._endpoints.get(name)
        if endpoint is None:
            endpoint = StreamableHttp(
                lambda session, scope: self._connect(name, session, scope),
                max_body_bytes=self.max_body_bytes,
                stateless=self.stateless.endpoint(name),
            )
            endpoint.start()
            self._endpoints[name] = endpoint
            if self._housekeeping is None:
                self._housekeeping = asyncio.get_running_loop().create_task(self._tidy())
        await endpoint.handle(scope, receive, send)

    def _connect(self, name: str, http: HttpSession, scope: Scope) -> "GatewayConnection":
        from core.serving.connection import GatewayConnection

        return GatewayConnection.for_scope(self, name, http, scope)

    def share(self, server: ManagedServer) -> Share:
        share = self._shares.get(id(server))
        if share is None or share.server is not server:
            share = self._shares[id(server)] = Share(server)
        return share

    def opened(self, connection: "GatewayConnection") -> None:
        self.connections[connection.session.id] = connection
        self.sessions.open(connection.session)
        self.owner.session_opened(connection.session)

    def closed(self, connection: "GatewayConnection") -> None:
        if self.connections.pop(connection.session.id, None) is None:
            return
        self.sessions.close(connection.session.id)
        self.owner.session_closed(connection.session)

    async def _tidy(self) -> None:
        """Parked calls and stateless sessions past their time go."""
        while True:
            await asyncio.sleep(HOUSEKEEPING_SECONDS)
            self.stateless.expire()

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # Clean-up that failed is logged, never left as an unretrieved exception.
            logger.warning("gateway clean-up failed: %s", exc, exc_info=exc)
