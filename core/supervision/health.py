"""The health ping of a ready run: ``ready ⇄ degraded`` while its child lives.

Every ``keepalive_seconds`` the run is proven (it stayed up that long) and
pinged (``ping``, or ``server/discover`` in the stateless era); an answer
within the ping timeout keeps it ready, anything else makes it degraded,
and the next answer makes it ready again. Its end is the run loop's to see.
"""

from collections.abc import Awaitable
from typing import Protocol

from core.base.clock import Clock, wait_within
from core.base.errors import ConnectionLost, RpcError
from core.base.states import ServerState
from core.settings.config import ServerConfig
from core.supervision.catalog import Catalog
from core.supervision.run import Run, Timing
from core.supervision.upstream import Upstream

S = ServerState


class Pinged(Protocol):
    """What the ping reads of its server, and the two writers it uses."""

    @property
    def config(self) -> ServerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def timing(self) -> Timing: ...
    @property
    def state(self) -> ServerState: ...
    @property
    def catalog(self) -> Catalog: ...

    def prove(self, run: Run) -> None: ...
    def change_state(self, new: ServerState, why: str) -> None: ...


async def keep_healthy(server: Pinged, run: Run, upstream: Upstream) -> None:
    while True:
        await server.clock.sleep(server.config.keepalive_seconds)
        if run.dead.is_set():
            return
        # Up a whole keepalive interval: the run is proven.
        server.prove(run)
        answered, pinged = await wait_within(
            server.clock,
            _answered(upstream.ping(None, modern=server.catalog.modern)),
            server.timing.ping_timeout,
        )
        healthy = answered and pinged is True
        if run.dead.is_set():
            return
        if healthy and server.state is S.DEGRADED:
            server.change_state(S.READY, "health ping answered again")
        elif not healthy and server.state is S.READY and run.alive():
            server.change_state(S.DEGRADED, "health ping failed while the child lives")


async def _answered(awaitable: Awaitable[None]) -> bool:
    """True when the health ping answered; any failure is just 'unhealthy'."""
    try:
        await awaitable
    except (RpcError, ConnectionLost, ValueError):
        return False
    return True
