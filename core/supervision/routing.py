"""Server -> client traffic of one child: whose is it? One rule, for requests and logs alike.

A stdio pipe says nothing about which call a child's own request (sampling,
elicitation) or log line belongs to: one made by a tool during its call and
one made later by work that tool left running look the same. So mcp-tray
attributes by what it can see, and refuses what it cannot (docs/design.md §3.10):

- **during calls of exactly one client session**: that session (its newest
  call). "Exactly one" counts every session whose call ran since the last
  moment no call was in flight: a session whose call ended while another's
  was running may have left work behind that asks now, and nothing tells
  the two apart;
- **during calls of several sessions**: nobody. A request is refused with an
  error naming the sharing modes (the tray warns once); a log line stays in
  the tray's own log;
- **outside any call**: the server's only attached session; with several,
  refused (requests) or kept in the tray (logs). Never a session merely
  because its call happens to be in flight.

A call waiting for its client's answer (a 2026-07-28 client's parked call)
asks nothing meanwhile, so it does not count as in flight.

Roots follow a stricter rule: a shared child is never given one session's
roots on another's behalf. A child of one session (or of one workspace) is
answered from that session's (workspace's) roots. A shared child (one whose
entry pins ``"sharing": "shared"``: the others get a child per workspace once
they ask) is answered by its only attached session; when the sessions
attached to it change it is told ``roots/list_changed`` so it asks again, and
a session that attached is owed that answer: its first request waits (at
most ``ROOTS_SETTLE_SECONDS``) until the child has asked and been given the
session's own roots.

Subscriptions and the log level clients set are replayed on every new
child, so a respawn does not silently drop them.
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

from core.base.errors import ConnectionLost, RpcError
from core.protocol.eras import Envelope
from core.protocol.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, ProgressFn
from core.supervision.upstream import Upstream

ServerRequestRouter = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
NotificationListener = Callable[[str, str, Mapping[str, Any] | None], None]
#: Told (method, why) when a server request could not be placed (the server warns once).
AmbiguityListener = Callable[[str, str], None]
#: The roots of the one session (or workspace) a child serves.
RootsSource = Callable[[], Awaitable[dict[str, Any]]]

#: How long a session's first request waits for a shared child to have asked for its roots.
ROOTS_SETTLE_SECONDS: Final = 1.0
ROOTS_LIST: Final = "roots/list"
ROOTS_CHANGED: Final = "notifications/roots/list_changed"


class CallObserver(Protocol):
    """Told what became of a forwarded request (the call journal, core.serving.observe.call_journal)."""

    def attempt(self, generation: int, replay: bool) -> None:
        """It is sent to the child of ``generation``; ``replay``: again, after a crash."""
        ...

    def settle(self, outcome: str, refused_by: str = "") -> None:
        """How it ended, where its answer does not say (``denied`` by ``approval``)."""
        ...

    @property
    def traceparent(self) -> str | None:
        """The W3C trace context a 2026-07-28 child gets in the request's ``_meta``."""
        ...


@dataclass(frozen=True)
class Caller:
    """Who a forwarded request is for, and where what belongs to it goes."""

    #: The client session the request comes from (None: mcp-tray itself, the CLI).
    session: str | None = None
    #: Seconds the server gets to answer (None: as long as it takes).
    timeout: float | None = None
    #: Receives the server's progress notifications of this request.
    on_progress: ProgressFn | None = None
    #: Answers the server's own requests (sampling, elicitation) made during this call.
    on_server_request: ServerRequestRouter | None = None
    #: The client's envelope (its capabilities, info and log level), sent to a
    #: 2026-07-28 child with the request (None: mcp-tray's own).
    envelope: Envelope | None = None
    #: True while the call waits for its client's answer (it asks nothing then).
    waiting: Callable[[], bool] | None = None
    #: Told each time the request is sent (the call journal: which child, replayed or not).
    observer: CallObserver | None = None


#: A request on mcp-tray's own behalf (the CLI, the API): no client behind it.
NO_CALLER: Final = Caller()


class Attached(Protocol):
    """A client session attached to a child, as the router sees it."""

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """A server request outside any call (``RpcError`` when the client cannot be asked)."""
        ...

    async def roots(self) -> dict[str, Any]:
        """The session's answer to ``roots/list``."""
        ...


class Owner(NamedTuple):
    """The one session a server message belongs to, and its call (None: outside any call)."""

    session: str | None
    call: Caller | None


class Unplaced(NamedTuple):
    """Nobody can be told: why, and whether it is ambiguity (several candidates)."""

    why: str
    ambiguous: bool


class Routing:
    def __init__(self, server: str, *, shared: bool = True) -> None:
        self.server = server
        #: Several client sessions may attach (``"sharing": "shared"``).
        self.shared = shared
        self.listeners: list[NotificationListener] = []
        self.on_ambiguous: AmbiguityListener | None = None
        #: Told once, the first time this shared child asks for roots.
        self.on_shared_roots: Callable[[], None] | None = None
        #: Called when the attached sessions changed and the child should ask for roots again.
        self.on_roots_stale: Callable[[], None] | None = None
        #: A child of one session or one workspace: where its roots come from.
        self.roots_source: RootsSource | None = None
        #: Calls in flight, oldest first.
        self._calls: dict[int, Caller] = {}
        self._call_ids = 0
        #: How many of them may wait for their client (``Caller.waiting``).
        self._may_wait = 0
        #: Sessions whose calls ran since the last moment no call was in flight.
        self._window: set[str | None] = set()
        #: Client sessions attached to this child, in attach order.
        self._attached: dict[str, Attached] = {}
        #: The child asked for roots in its current run (it is told when they change).
        self.asked_roots = False
        #: Sessions attached since, oldest first, each owed the child's next ask (set once given).
        self._owed: dict[str, asyncio.Event] = {}
        #: Client-set state replayed on every new child.
        self.subscriptions: set[str] = set()
        self.log_level: str | None = None
        #: Requests of the child waiting for a client's answer now.
        self.server_requests = 0
        #: Told when a call or a server request begins or ends (core.supervision.idle).
        self.on_activity: Callable[[], None] | None = None

    # ------------------------------------------------------- calls in flight

    @property
    def calls_open(self) -> bool:
        """A call is in flight (or parked for its client's answer)."""
        return bool(self._calls)

    def _moved(self) -> None:
        if self.on_activity is not None:
            self.on_activity()

    def open_call(self, caller: Caller) -> int:
        self._moved()
        self._call_ids += 1
        self._calls[self._call_ids] = caller
        self._window.add(caller.session)
        if caller.waiting is not None:
            self._may_wait += 1
        return self._call_ids

    def close_call(self, call_id: int) -> None:
        self._moved()
        caller = self._calls.pop(call_id, None)
        if caller is not None and caller.waiting is not None:
            self._may_wait -= 1
        if not self._calls:
            self._window.clear()  # the common case: nothing else was in flight
        elif self._may_wait:
            self.settle()
        # Else every call in flight is active, and each one's session has been in the
        # window since it opened (only a moment with none active empties it): nothing
        # to settle, and no walk of the calls in flight on every call's way out.

    def settle(self) -> None:
        """Forget who called once nothing is in flight (a waiting call asks nothing)."""
        if not self._active():
            self._window.clear()
        else:
            self._window.update(caller.session for caller in self._active())

    def _active(self) -> list[Caller]:
        return [c for c in self._calls.values() if c.waiting is None or not c.waiting()]

    def sessions_in_flight(self) -> set[str | None]:
        return {caller.session for caller in self._active()}

    # ------------------------------------------------------ attached sessions

    def attach(self, session: str, attached: Attached) -> None:
        new = session not in self._attached
        self._attached[session] = attached
        if new:
            if self.shared and self.asked_roots:
                self._owed[session] = asyncio.Event()
            self._roots_changed()

    def detach(self, session: str) -> None:
        self._settle_owed(session)
        if self._attached.pop(session, None) is not None:
            self._roots_changed()

    async def roots_settled(self, session: str | None) -> None:
        """Until this newly attached session's roots were given to the child (bounded:
        a server that does not ask again owes it nothing more)."""
        owed = self._owed.get(session) if session is not None else None
        if owed is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(owed.wait(), ROOTS_SETTLE_SECONDS)
            self._settle_owed(session)

    def _settle_owed(self, session: str | None) -> None:
        owed = self._owed.pop(session, None) if session is not None else None
        if owed is not None:
            owed.set()

    @property
    def attached(self) -> list[str]:
        return list(self._attached)

    def _roots_changed(self) -> None:
        # Whose roots a shared child may use changed: it asks again (and is
        # answered, or refused, by the rule below).
        if self.shared and self.asked_roots and self.on_roots_stale is not None:
            self.on_roots_stale()

    def new_run(self) -> None:
        """A new child: it has asked nothing yet (and is owed nothing)."""
        self.asked_roots = False
        for session in list(self._owed):
            self._settle_owed(session)

    # ------------------------------------------------------------- the rule

    def attribute(self) -> Owner | Unplaced:
        """The one session a server request or log line made now belongs to."""
        active = self._active()
        if active:
            calling = {caller.session for caller in active}
            if len(calling) > 1:
                return Unplaced(f"calls of {len(calling)} client sessions are in flight", True)
            if len(self._window | calling) > 1:
                return Unplaced(
                    "another client session's call ended while this one's ran, and whatever "
                    "that call left running cannot be told apart from this one",
                    True,
                )
            return Owner(active[-1].session, active[-1])
        if len(self._attached) == 1:
            return Owner(next(iter(self._attached)), None)
        if not self._attached:
            return Unplaced("no client session is connected to answer it", False)
        return Unplaced(
            f"{len(self._attached)} client sessions are connected and no call is in flight", True
        )

    async def route_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Hand a server's own request to the one session it can belong to."""
        if method == "ping":
            return {}  # a liveness check of mcp-tray itself: no client needs to hear it
        self.server_requests += 1
        self._moved()
        try:
            return await self._route_request(method, params)
        finally:
            self.server_requests -= 1
            self._moved()

    async def _route_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        if method == ROOTS_LIST:
            return await self._roots()
        owner = self.attribute()
        if isinstance(owner, Unplaced):
            raise self._refusal(method, owner)
        if owner.call is None:
            return await self._attached[str(owner.session)].ask(method, params)
        router = owner.call.on_server_request
        if router is None:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the call in flight came from mcp-tray itself (the command "
                "line or the window), which cannot answer it",
            )
        return await router(method, params)

    async def _roots(self) -> dict[str, Any]:
        self.asked_roots = True
        if self.roots_source is not None:
            return await self.roots_source()
        if self.on_shared_roots is not None:
            self.on_shared_roots()
        owed = next(iter(self._owed), None)
        if owed is not None and owed in self._attached:
            # The ask that a session's attaching caused: its own roots, whoever else is here.
            answer = await self._attached[owed].roots()
            self._settle_owed(owed)
            return answer
        if len(self._attached) == 1:
            ((session, attached),) = self._attached.items()
            calls = [c for c in self._active() if c.session == session and c.on_server_request]
            if calls and calls[-1].on_server_request is not None:
                # Its call in flight is a stream to ask on, open or not the session's own.
                return await calls[-1].on_server_request(ROOTS_LIST, None)
            return await attached.roots()
        if not self._attached:
            raise RpcError(
                METHOD_NOT_FOUND, f"{ROOTS_LIST!r}: no client session is connected to answer it"
            )
        # The warning was given above (once per server), this refusal names the fix too.
        raise RpcError(
            INTERNAL_ERROR,
            f"mcp-tray will not give shared server {self.server!r} one client session's roots "
            f"on behalf of the {len(self._attached)} sessions that share it. Set "
            f'"sharing": "per-workspace" on {self.server!r} in mcp-tray\'s config (one child '
            'per project) or "sharing": "per-session" (one child per client session)',
        )

    def _refusal(self, method: str, unplaced: Unplaced) -> RpcError:
        if not unplaced.ambiguous:
            return RpcError(METHOD_NOT_FOUND, f"{method!r}: {unplaced.why}")
        text = (
            f"mcp-tray cannot tell which client session {method!r} is for ({unplaced.why} on "
            f"shared server {self.server!r}), so it refused it rather than guess. "
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
            self._moved()

    async def replay(self, upstream: Upstream, capabilities: Mapping[str, Any]) -> None:
        """Subscriptions and the log level clients set survive a respawn."""
        with contextlib.suppress(RpcError, ConnectionLost):
            if self.log_level is not None and "logging" in capabilities:
                await upstream.request("logging/setLevel", {"level": self.log_level})
            for uri in sorted(self.subscriptions):
                await upstream.request("resources/subscribe", {"uri": uri})
