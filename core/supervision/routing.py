"""Server -> client traffic of one server, and the client-set state a respawn replays.

A child's own requests (sampling, elicitation, roots) go to exactly one
client session, never a guess (docs/design.md §3.10, isolation on shared servers):

- during calls of one session only: that session's newest call answers it;
- during calls of several sessions: nothing in a stdio message says which
  call it belongs to, so mcp-tray fails closed: the child gets an error
  naming ``"sharing": "per-session"`` and the tray warns once;
- outside any call: the one session attached to the server answers, and
  with several attached the same fail-closed error.

Notifications go to listeners (the gateway decides who receives what).
Subscriptions and the log level are replayed on every new child, so a
respawn does not silently drop them.
"""

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.base.errors import ConnectionLost, RpcError
from core.protocol.eras import Envelope
from core.protocol.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, ProgressFn
from core.supervision.upstream import Upstream

ServerRequestRouter = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
NotificationListener = Callable[[str, str, Mapping[str, Any] | None], None]
#: Told (method, why) the first time a server request could not be placed.
AmbiguityListener = Callable[[str, str], None]


@dataclass(frozen=True)
class Caller:
    """Who a forwarded request is for, and where what belongs to it goes."""

    #: The client session the request comes from (None: mcp-tray itself, the CLI).
    session: str | None = None
    #: Seconds the server gets to answer (None: as long as it takes).
    timeout: float | None = None
    #: Receives the server's progress notifications of this request.
    on_progress: ProgressFn | None = None
    #: Answers the server's own requests (sampling, elicitation, roots) made for this call.
    on_server_request: ServerRequestRouter | None = None
    #: The client's envelope (its capabilities, info and log level), sent to a
    #: 2026-07-28 child with the request (None: mcp-tray's own).
    envelope: Envelope | None = None
    #: The client speaks 2026-07-28 itself: an ``input_required`` result goes
    #: back to it as is (else mcp-tray asks the client and retries for it).
    modern: bool = False


#: A request on mcp-tray's own behalf (the CLI, the API): no client behind it.
NO_CALLER: Final = Caller()


class Routing:
    def __init__(self, server: str) -> None:
        self.server = server
        self.listeners: list[NotificationListener] = []
        self.on_ambiguous: AmbiguityListener | None = None
        #: Calls in flight, oldest first.
        self._calls: dict[int, Caller] = {}
        self._call_ids = 0
        #: Client sessions attached to this server that can answer a server
        #: request made outside any call.
        self._attached: dict[str, ServerRequestRouter] = {}
        #: Client-set state replayed on every new child.
        self.subscriptions: set[str] = set()
        self.log_level: str | None = None

    # ------------------------------------------------------- calls in flight

    def open_call(self, caller: Caller) -> int:
        self._call_ids += 1
        self._calls[self._call_ids] = caller
        return self._call_ids

    def close_call(self, call_id: int) -> None:
        self._calls.pop(call_id, None)

    def sessions_in_flight(self) -> set[str | None]:
        return {caller.session for caller in self._calls.values()}

    def attach(self, session: str, router: ServerRequestRouter) -> None:
        self._attached[session] = router

    def detach(self, session: str) -> None:
        self._attached.pop(session, None)

    @property
    def attached(self) -> list[str]:
        return list(self._attached)

    async def route_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Hand a server's own request to the one session it can belong to."""
        if method == "ping":
            return {}  # a liveness check of mcp-tray itself: no client needs to hear it
        return await self._router_for(method)(method, params)

    def _router_for(self, method: str) -> ServerRequestRouter:
        calls = list(self._calls.values())
        if calls:
            sessions = {caller.session for caller in calls}
            if len(sessions) > 1:
                raise self._ambiguous(
                    method, f"calls of {len(sessions)} client sessions are in flight"
                )
            router = calls[-1].on_server_request
            if router is None:
                raise RpcError(
                    METHOD_NOT_FOUND,
                    f"{method!r}: the call in flight came from mcp-tray itself (the command "
                    "line or the window), which cannot answer it",
                )
            return router
        if len(self._attached) == 1:
            return next(iter(self._attached.values()))
        if not self._attached:
            raise RpcError(
                METHOD_NOT_FOUND, f"{method!r}: no client session is connected to answer it"
            )
        raise self._ambiguous(
            method, f"{len(self._attached)} client sessions are connected and no call is in flight"
        )

    def _ambiguous(self, method: str, why: str) -> RpcError:
        text = (
            f"mcp-tray cannot tell which client session {method!r} is for ({why} on shared "
            f"server {self.server!r}), so it refused it rather than guess. "
            f'Set "sharing": "per-session" on {self.server!r} in mcp-tray\'s config to give '
            "each client session a child of its own"
        )
        if self.on_ambiguous is not None:
            self.on_ambiguous(method, text)
        return RpcError(INTERNAL_ERROR, text)

    # --------------------------------------------------------- notifications

    def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        for listener in list(self.listeners):
            listener(self.server, method, params)

    # ------------------------------------------------------ client-set state

    def remember(self, method: str, params: Mapping[str, Any] | None) -> None:
        """A successful request that set state the server keeps per connection."""
        params = params or {}
        if method == "logging/setLevel" and isinstance(params.get("level"), str):
            self.log_level = params["level"]
        elif method == "resources/subscribe" and isinstance(params.get("uri"), str):
            self.subscriptions.add(params["uri"])
        elif method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
            self.subscriptions.discard(params["uri"])

    async def replay(self, upstream: Upstream, capabilities: Mapping[str, Any]) -> None:
        """Subscriptions and the log level clients set survive a respawn."""
        with contextlib.suppress(RpcError, ConnectionLost):
            if self.log_level is not None and "logging" in capabilities:
                await upstream.request("logging/setLevel", {"level": self.log_level})
            for uri in sorted(self.subscriptions):
                await upstream.request("resources/subscribe", {"uri": uri})
