"""A 2026-07-28 child's change notifications: one ``subscriptions/listen`` stream per run.

The stateless era has no ``resources/subscribe`` and sends ``list_changed``
and ``resources/updated`` only on a listen stream the client keeps open. So
mcp-tray keeps one open to each such child, asking for every list the child
says can change and for every resource a client of mcp-tray subscribed to;
when that set changes, the stream is replaced (the child is told the old one
is cancelled). What arrives is handled like a handshake-era child's
notifications.
"""

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Protocol

from core.base.errors import ConnectionLost, RpcError
from core.protocol.eras import with_envelope
from core.supervision.catalog import Catalog
from core.supervision.routing import Routing
from core.supervision.upstream import OWN_ENVELOPE, Upstream


class ListenHost(Protocol):
    """What the listen stream reads of its server."""

    @property
    def catalog(self) -> Catalog: ...
    @property
    def routing(self) -> Routing: ...

    def log(self, line: str) -> None: ...


#: Capability kinds and the listen filter each one's ``listChanged`` turns on.
LIST_FILTERS = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}


def listen_filter(capabilities: Mapping[str, Any], uris: set[str]) -> dict[str, Any]:
    """What to ask a child for: the lists it says can change, and these resources."""
    wanted: dict[str, Any] = {}
    for kind, flag in LIST_FILTERS.items():
        offered = capabilities.get(kind)
        if isinstance(offered, dict) and offered.get("listChanged"):
            wanted[flag] = True
    resources = capabilities.get("resources")
    if uris and isinstance(resources, dict) and resources.get("subscribe"):
        wanted["resourceSubscriptions"] = sorted(uris)
    return wanted


class UpstreamListen:
    def __init__(self, server: ListenHost) -> None:
        self._server = server
        self._upstream: Upstream | None = None
        self._task: asyncio.Task[None] | None = None

    def open(self, upstream: Upstream) -> None:
        self._upstream = upstream
        self.refresh()

    def refresh(self) -> None:
        """(Re)open the stream with what is wanted now; nothing when nothing is."""
        self._stop()
        upstream = self._upstream
        if upstream is None or upstream.closed.is_set():
            return
        server = self._server
        wanted = listen_filter(server.catalog.capabilities, server.routing.subscriptions)
        if wanted:
            self._task = asyncio.ensure_future(self._listen(upstream, wanted))

    def close(self) -> None:
        self._stop()
        self._upstream = None

    def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _listen(self, upstream: Upstream, wanted: dict[str, Any]) -> None:
        params = with_envelope({"notifications": wanted}, OWN_ENVELOPE)
        with contextlib.suppress(ConnectionLost):
            try:
                await upstream.request("subscriptions/listen", params)
            except RpcError as exc:
                self._server.log(f"subscriptions/listen refused ({exc.code}: {exc.message})")
