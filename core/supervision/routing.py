"""Server -> client traffic of one server, and the client-set state a respawn replays.

A child's own requests (sampling, elicitation, roots) are handed to the
client whose call is in flight; its notifications go to listeners (the
gateway). Subscriptions and the log level clients set are remembered and
replayed on every new child, so a respawn does not silently drop them.
"""

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.base.errors import ConnectionLost, RpcError
from core.protocol.jsonrpc import METHOD_NOT_FOUND, ProgressFn
from core.supervision.upstream import Upstream

ServerRequestRouter = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
NotificationListener = Callable[[str, str, Mapping[str, Any] | None], None]


@dataclass(frozen=True)
class Caller:
    """Who a forwarded request is for, and where what belongs to it goes."""

    #: Seconds the server gets to answer (None: as long as it takes).
    timeout: float | None = None
    #: Receives the server's progress notifications of this request.
    on_progress: ProgressFn | None = None
    #: Answers the server's own requests (sampling, elicitation, roots) made for this call.
    on_server_request: ServerRequestRouter | None = None


#: A request on mcp-tray's own behalf (the CLI, the API): no client behind it.
NO_CALLER: Final = Caller()


class Routing:
    def __init__(self, server: str) -> None:
        self.server = server
        self.listeners: list[NotificationListener] = []
        #: Server->client request routers of calls in flight, newest last.
        self._routers: dict[int, ServerRequestRouter] = {}
        self._router_ids = 0
        #: Client-set state replayed on every new child (shared by all sessions).
        self.subscriptions: set[str] = set()
        self.log_level: str | None = None

    # ------------------------------------------------------- calls in flight

    def open_call(self, router: ServerRequestRouter | None) -> int:
        """A call that can answer server requests is in flight; 0 when it cannot."""
        if router is None:
            return 0
        self._router_ids += 1
        self._routers[self._router_ids] = router
        return self._router_ids

    def close_call(self, call_id: int) -> None:
        self._routers.pop(call_id, None)

    async def route_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Hand a server's own request to the client whose call is in flight."""
        if not self._routers:
            raise RpcError(
                METHOD_NOT_FOUND, f"{method!r}: no client call is in flight to answer it"
            )
        router = self._routers[max(self._routers)]
        return await router(method, params)

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
