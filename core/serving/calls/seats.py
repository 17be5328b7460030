"""Where each client session sits: the child that serves it and its membership of that child's share.

A session is seated at its first request that needs a child (core.serving.calls.placement
says which), and stays there while the pipeline routes its requests. It moves between
children in one place, here: a ``per-workspace`` session whose roots changed, a shared
entry's session that a child of its own era now serves. It leaves when it trips or
closes (``release``), and a child made only for it goes with it.

A session's roots decide its seat where the entry is not ``shared``, so learning them is
here too: asked once per session, and again when the client says they changed.
"""

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.base.errors import RpcError
from core.protocol.eras import INPUT_REQUIRED_METHODS
from core.protocol.jsonrpc import METHOD_NOT_FOUND
from core.serving.calls.fanout import Member, Share
from core.serving.calls.placement import Placement
from core.serving.calls.request import Client, NoReply, Request
from core.serving.calls.roots import roots_in, roots_source
from core.serving.sessions.sessions import ClientSession
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor


@dataclass
class Seat:
    """Where a client session sits: the child that serves it and its membership there."""

    server: ManagedServer
    share: Share
    member: Member


class _RootsNeeded(Exception):
    """A 2026-07-28 client must be asked for its roots before its request can be placed.

    Private to serving.calls, hence outside core.base.errors' tree: the pipeline turns it
    into the question to the client, and it never leaves the pipeline.
    """


class Seats:
    """Every client session's seat, and the share of each child they sit on."""

    def __init__(self, supervisor: Supervisor, spawn: Callable[[Any], None]) -> None:
        self.supervisor = supervisor
        self.spawn = spawn
        self.placement = Placement(supervisor, spawn, self._forget)
        self._shares: dict[int, Share] = {}
        self._seats: dict[str, Seat] = {}

    def share(self, server: ManagedServer) -> Share:
        share = self._shares.get(id(server))
        if share is None or share.server is not server:
            share = self._shares[id(server)] = Share(server)
        return share

    def _forget(self, server: ManagedServer) -> None:
        """A child made for sessions stopped: its share goes with it."""
        self._shares.pop(id(server), None)

    def seat(self, session: ClientSession) -> Seat | None:
        return self._seats.get(session.id)

    def release(self, session: ClientSession) -> None:
        """The session tripped or closed: it leaves its child, and a child made for it goes."""
        seat = self._seats.pop(session.id, None)
        if seat is not None:
            self._leave(seat)

    def _leave(self, seat: Seat) -> None:
        seat.share.leave(seat.member, self.spawn)
        server = seat.server
        placement = self.placement
        others = [s for s in self._seats.values() if s is not seat and s.server is server]
        if placement.made(server) and not others:
            placement.unused(server, lambda: any(s.server is server for s in self._seats.values()))

    async def server_for(self, request: Request, member: Member) -> ManagedServer:
        """The child that serves this request's session (seated there from now on)."""
        client = request.client
        session = client.session
        base = self.placement.base(session.server)
        seat = self._seats.get(session.id)
        sharing = base.sharing
        roots = None
        source = None
        # A pinned shared server that asks: its session's roots are known before it is owed
        # them (not at initialize, which has no stream to ask on).
        if sharing != "shared" or (base.asks_roots and request.method != "initialize"):
            try:
                roots = await self._roots(request)
            except _RootsNeeded:
                if request.method in INPUT_REQUIRED_METHODS:
                    raise
                # Only these may answer input_required: the rest is the entry's own child's.
                return base
            if sharing != "shared":
                source = roots_source(session if sharing == "per-session" else tuple(roots))
        server = await self.placement.child(
            base,
            session=session.id,
            modern=client.modern,
            askable=client.askable,
            roots=[str(root.get("uri")) for root in roots or ()],
            roots_source=source,
        )
        if seat is not None and seat.server is server:
            return server
        if seat is not None:
            self._leave(seat)
        share = self.share(server)
        self._seats[session.id] = Seat(server, share, member)
        share.join(member, _Attached(client))
        return server

    def stays(self, seat: Seat, client: Client) -> bool:
        """A shared entry's own child keeps serving its session: nothing to decide."""
        server = seat.server
        return (
            server.sharing == "shared"
            and self.supervisor.servers.get(client.session.server) is server
            and (client.modern or not self.placement.wants_own_era(server, False, client.askable))
        )

    # ------------------------------------------------------------- roots

    async def _roots(self, request: Request) -> tuple[dict[str, Any], ...]:
        """The client's roots: asked once per session (and again after it says they changed)."""
        client = request.client
        session = client.session
        if session.roots is not None:
            return session.roots
        if "roots" not in client.capabilities:
            session.roots = ()
            return session.roots
        if client.modern:
            raise _RootsNeeded
        ask = request.ask or client.ask
        if ask is None:
            return ()
        answer = await ask("roots/list", None)
        session.roots = roots_in(answer)
        return session.roots

    async def roots_changed(self, client: Client, member: Member) -> None:
        """The client says its roots changed (a handshake-era ``roots/list_changed``)."""
        session = client.session
        seat = self._seats.get(session.id)
        if seat is None:
            session.roots = None  # asked again when they matter
            return
        server = seat.server
        if server.config.sharing == "shared":
            session.roots = None  # what it says when it is next asked
            # The child asks for roots outside any call: only its one session can answer.
            if server.routing.attached == [member.key]:
                await server.notify_upstream("notifications/roots/list_changed", None)
            return
        # Asking the client now would wait on the very client that waits for this
        # notification to be taken: the session learns its roots right after.
        self.spawn(self._relearn_roots(client, member, seat))

    async def _relearn_roots(self, client: Client, member: Member, seat: Seat) -> None:
        session = client.session
        session.roots = None
        if client.ask is not None:
            with contextlib.suppress(RpcError):
                session.roots = roots_in(await client.ask("roots/list", None))
        server = seat.server
        if server.config.sharing == "per-workspace":
            if session.roots is not None:
                request = Request(client, "roots/list", {}, NoReply(), None)
                await self.server_for(request, member)  # the matching workspace's child
            return
        # Its own child asks again, and is answered from the session's new roots.
        await server.notify_upstream("notifications/roots/list_changed", None)


class _Attached:
    """A seated session, as the router asks it things outside any call."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        ask = self._client.ask
        if ask is None:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the only client session of this server speaks MCP 2026-07-28, "
                "which can be asked things only within its own requests",
            )
        return await ask(method, params)

    async def roots(self) -> dict[str, Any]:
        """What the client said (it says when they change), else asked now."""
        session = self._client.session
        if session.roots is not None:
            return {"roots": [dict(root) for root in session.roots]}
        answer = await self.ask("roots/list", None)
        session.roots = roots_in(answer)
        return answer
