"""A client session of an aggregate endpoint, and its session with each member server.

A ``Parent`` is one client session of ``/mcp`` or ``/mcp/@NAME``, of either
era. It reaches each member through a ``Link``: a client session of its own
with that member (``PARENT.SERVER`` in the session table, made at the first
request for the member), which the pipeline (core.serving.calls.pipeline) places,
guards with its own breaker and routes to exactly as it would a session of
``/mcp/SERVER``. So a member that keeps failing trips only its own link: the
client's other servers keep working.

A link is a member of its child's share (core.serving.calls.fanout) and hands on
what the child says unprompted:

- ``list_changed``: to the aggregate, which tells the parent once per burst
  (core.serving.aggregate.aggregate);
- a log line made during a call: on the parent's newest call to that member
  (a handshake-era client; a 2026-07-28 call hears its own through the
  pipeline, as on a server's own endpoint);
- ``resources/updated``, a log line outside any call, anything else a child
  of the link's own says: the parent's GET stream (a 2026-07-28 client hears
  resource updates on its listen stream instead).
"""

import itertools
from collections.abc import Callable
from typing import Any

from core.protocol.http_session import HttpSession
from core.serving.calls.fanout import LIST_CHANGED, Share
from core.serving.calls.request import Client, Reply
from core.serving.calls.seats import Seat
from core.serving.eras.stateless import Listener
from core.serving.sessions.sessions import ClientSession


class Parent:
    """One client session of an aggregate endpoint."""

    def __init__(
        self,
        session: ClientSession,
        profile: str,
        *,
        modern: bool,
        on_lists: Callable[["Parent", str], None],
    ) -> None:
        self.session = session
        self.profile = profile
        #: Speaks 2026-07-28 (its ``Client`` comes with each request).
        self.modern = modern
        #: A handshake-era client: what it declared at initialize, and its HTTP session.
        self.client: Client | None = None
        self.http: HttpSession | None = None
        #: Its session with each member, by server.
        self.links: dict[str, Link] = {}
        #: The log level a handshake-era client set (each new link gets it too).
        self.level: str | None = None
        #: A 2026-07-28 client's open ``subscriptions/listen`` streams.
        self.listeners: dict[str, Listener] = {}
        self._on_lists = on_lists
        #: Requests in flight, oldest first: (member, its reply).
        self._calls: dict[int, tuple[str, Reply]] = {}
        self._call_ids = itertools.count(1)

    def link_id(self, server: str) -> str:
        return f"{self.session.id}.{server}"

    def calling(self, server: str, reply: Reply) -> int:
        call = next(self._call_ids)
        self._calls[call] = (server, reply)
        return call

    def called(self, call: int) -> None:
        self._calls.pop(call, None)

    def newest_call(self, server: str) -> Reply | None:
        for member, reply in reversed(self._calls.values()):
            if member == server:
                return reply
        return None

    def lists_changed(self, kind: str) -> None:
        self._on_lists(self, kind)

    def post(self, message: dict[str, Any]) -> bool:
        """A message not tied to a request: the GET stream, or the listen streams."""
        if self.http is not None:
            return self.http.post(message)
        delivered = False
        for listener in list(self.listeners.values()):
            delivered = listener.post(message) or delivered
        return delivered


class Link:
    """A parent's session with one member: what the member's share sees of the parent."""

    def __init__(
        self,
        parent: Parent,
        server: str,
        session: ClientSession,
        seat_of: Callable[[ClientSession], Seat | None],
    ) -> None:
        self.parent = parent
        self.server = server
        self.session = session
        self.key = session.id
        self.session_id = session.id
        self._seat_of = seat_of

    def client(self, of: Client) -> Client:
        """The parent's client, as this link's session."""
        return Client(
            self.session,
            modern=of.modern,
            capabilities=of.capabilities,
            info=of.info,
            log_level=of.log_level,
            ask=of.ask,
        )

    # --------------------------------------------------------- share member

    @property
    def exclusive(self) -> bool:
        seat = self._seat_of(self.session)
        return (
            not self.parent.modern
            and seat is not None
            and seat.server.config.sharing == "per-session"
        )

    def log_level(self, share: Share) -> str | None:
        return None if self.parent.modern else share.levels.get(self.key)

    def hears_unlevelled(self) -> bool:
        return not self.parent.modern  # a 2026-07-28 call hears logs only when it asked

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        if self.parent.modern:
            return False
        reply = self.parent.newest_call(self.server)
        if reply is None:
            return False
        reply.related(message)
        return True

    def post(self, message: dict[str, Any]) -> bool:
        method = message.get("method")
        if method in LIST_CHANGED:
            self.parent.lists_changed(str(method).split("/")[1])
            return True
        if self.parent.modern:
            return False  # no stream outside a request (resource updates ride listen streams)
        return self.parent.post(message)
