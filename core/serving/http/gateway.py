"""The gateway: every AI client shares the supervised servers over MCP streamable HTTP.

``/mcp/<server>`` (and ``/<server>/mcp``, the shape the MCP Inspector
insists on) serve one server; ``/mcp`` and ``/mcp/@<profile>`` (and
``/@<profile>/mcp``) many at once (core.serving.aggregate.aggregate). They speak
streamable HTTP (core.protocol.streamable for the
handshake era, core.protocol.stateless for 2026-07-28). Each era's adapter
(core.serving.eras.handshake, core.serving.eras.stateless) decodes a client's
messages into the one request pipeline (core.serving.calls.pipeline), which
answers them through the call path of docs/design.md §3.3. Isolation between the
sessions that share a child is core.serving.calls.fanout's and the router's
(core.supervision.routing).
"""

import asyncio
import logging
from pathlib import Path
from typing import Any, Final, Protocol

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from core.base.errors import UnknownServer, shown
from core.protocol.headers import scope_headers
from core.protocol.http_session import HttpSession
from core.protocol.streamable import StreamableHttp
from core.protocol.wire import DEFAULT_MAX_BODY_BYTES
from core.serving.aggregate.aggregate import Aggregate
from core.serving.calls.pipeline import Hooks, Pipeline
from core.serving.eras.handshake import HandshakeSession
from core.serving.eras.identity import REAP_SECONDS, StatelessClients
from core.serving.eras.stateless import StatelessEndpoint
from core.serving.sessions.session_store import SessionStore
from core.serving.sessions.sessions import SessionTable
from core.settings.config import TrayConfig
from core.settings.profiles import ALL_PROFILE, PROFILE_MARK, is_target
from core.supervision.supervisor import Supervisor

logger = logging.getLogger(__name__)

#: How long shutdown waits for the clean-up its closed sessions started
#: (a per-session child's stop contract takes at most ~5 s).
SHUTDOWN_TASKS_SECONDS: Final = 10.0
#: How often parked calls, gone clients and idle stateless sessions are looked for
#: (a gone client's session is reaped within ``REAP_SECONDS``).
HOUSEKEEPING_SECONDS: Final = REAP_SECONDS / 4


class GatewayOwner(Hooks, Protocol):
    """What the gateway needs from the service it runs in."""

    def worker_alive(self, identity: str) -> bool | None:
        """Whether a bridge's worker row lives (None: the registry cannot say)."""
        ...


class Gateway:
    """ASGI endpoint for ``/mcp``, ``/mcp/{server}`` and ``/{server}/mcp``."""

    def __init__(
        self,
        supervisor: Supervisor,
        sessions: SessionTable,
        owner: GatewayOwner,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        sessions_file: Path | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.sessions = sessions
        self.owner = owner
        self.max_body_bytes = max_body_bytes
        self._endpoints: dict[str, StreamableHttp] = {}
        #: Open handshake-era sessions, by id.
        self.connections: dict[str, HandshakeSession] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.pipeline = Pipeline(supervisor, sessions, owner, self.spawn)
        self.stateless = StatelessClients(self.pipeline, owner.worker_alive)
        #: Handshake-era sessions kept for the next tray, and the previous tray's to adopt
        #: (read by the service once it holds the instance lock).
        self.store = SessionStore(sessions_file)
        #: ``/mcp`` and the profiles' endpoints.
        self.aggregate = Aggregate(
            self.pipeline, owner.worker_alive, max_body_bytes=max_body_bytes, store=self.store
        )
        self._housekeeping: asyncio.Task[None] | None = None

    async def aclose(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        self.pipeline.parking.aclose()
        self.pipeline.placement.aclose()
        await self.aggregate.aclose()
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
        self.store.flush()
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
        if not name or is_target(name):
            await self.aggregate.serve(name, scope, receive, send)
            self._start_housekeeping()
            return
        try:
            self.supervisor.server(name)
        except UnknownServer:
            message = unknown_name(name, self.supervisor.config)
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        endpoint = self._endpoints.get(name)
        if endpoint is None:
            endpoint = StreamableHttp(
                lambda http, scope: self._connect(name, http, scope),
                max_body_bytes=self.max_body_bytes,
                stateless=StatelessEndpoint(self.pipeline, self.stateless, name),
                adopt=lambda session_id, scope: self._adopt(name, session_id),
            )
            endpoint.start()
            self._endpoints[name] = endpoint
            self._start_housekeeping()
        await endpoint.handle(scope, receive, send)

    def served_endpoint(self, name: str) -> StreamableHttp | None:
        """The endpoint of server ``name`` when it is configured and already served (the
        express lane's question: core.serving.http.express); None sends a request the full way."""
        if name not in self.supervisor.servers:
            return None
        return self._endpoints.get(name)

    def _start_housekeeping(self) -> None:
        if self._housekeeping is None:
            self._housekeeping = asyncio.get_running_loop().create_task(self._tidy())

    def _connect(self, name: str, http: HttpSession, scope: Scope) -> HandshakeSession:
        headers = scope_headers(scope)
        return HandshakeSession.open(
            self.pipeline, name, http, headers, self.connections, self.store
        )

    def _adopt(self, name: str, session_id: str) -> HttpSession | None:
        """A previous tray's session of this server, brought back the first time its id returns."""
        saved = self.store.adopt(name, session_id)
        if saved is None:
            return None
        logger.info("adopted session %s of %s from the previous mcp-tray", session_id, name)
        return HandshakeSession.adopt(self.pipeline, saved, self.connections, self.store).http

    async def _tidy(self) -> None:
        """Parked calls past their time, and stateless sessions whose client went, go."""
        while True:
            await asyncio.sleep(HOUSEKEEPING_SECONDS)
            self.pipeline.parking.expire()
            self.stateless.expire()
            self.aggregate.stateless.expire()
            # A crash must not make an active session look idle to the next tray.
            self.store.flush(only_if_changed=True)

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # Clean-up that failed is logged, never left as an unretrieved exception.
            logger.warning("gateway clean-up failed: %s", exc, exc_info=exc)


def unknown_name(name: str, config: TrayConfig) -> str:
    """What a client asking for a server that is not configured is told: what is, and
    in which file (a tray started on the wrong config, or an empty one, says so)."""
    profiles = ", ".join(PROFILE_MARK + p for p in [ALL_PROFILE, *sorted(config.profiles)])
    if not config.servers:
        return (
            f"no server named {shown(name)}: {config.path} configures no servers (profiles: "
            f"{profiles}). Add it there, or run mcp-tray on the config that has it "
            "(mcp-tray run --config FILE)"
        )
    servers = ", ".join(sorted(config.servers))
    return (
        f"no server named {shown(name)} in {config.path} (servers: {servers}; profiles: {profiles})"
    )
