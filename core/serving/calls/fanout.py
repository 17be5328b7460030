"""Who of a child's client sessions hears what the child says unprompted.

A child shared by several sessions must not leak one session's traffic to
another (docs/design.md §3.10). ``Share`` keeps, per child, the members that share
it (a session of either era, one call of a 2026-07-28 client, a
``subscriptions/listen`` stream), what they set, and who receives what:

- ``list_changed`` reaches every member;
- ``resources/updated`` reaches the members subscribed to that URI; the
  child sees one subscribe per URI (reference-counted over members) and the
  unsubscribe when the last one leaves;
- ``notifications/message`` follows the router's one rule
  (core.supervision.routing.Routing.attribute), like the child's own
  requests: it reaches the one session it can belong to, on that session's
  call in flight (or, outside any call, its GET stream), at or above the
  level that session asked for; a line nobody can be given stays in the
  tray's own log. Setting a level is no licence to hear another session's
  logs. The child logs at the most verbose level any member asked for;
- anything else the child says unprompted reaches only a member that has
  the child to itself (nothing says whose it is). Progress travels with its
  call.
"""

import contextlib
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from core.base.errors import CallError
from core.supervision.routing import Attached, Caller, Unplaced
from core.supervision.server import ManagedServer

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
LIST_CHANGED: Final = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    }
)
#: How much of an undeliverable log line the tray's own log keeps.
KEPT_LOG_CHARS: Final = 500


class Member(Protocol):
    """Who shares a child: a session of either era, or one call or stream of a stateless client."""

    @property
    def key(self) -> str:
        """Unique among the child's members."""
        ...

    @property
    def session_id(self) -> str:
        """The client session it belongs to."""
        ...

    @property
    def exclusive(self) -> bool:
        """Has the child to itself (per-session sharing): may hear everything."""
        ...

    def log_level(self, share: "Share") -> str | None:
        """The level its client asked for (None: a handshake session hears every level,
        a 2026-07-28 call none)."""
        ...

    def hears_unlevelled(self) -> bool:
        """Whether it hears log lines when its client set no level (the handshake era does)."""
        ...

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        """Put a message on the member's call in flight; False when there is none."""
        ...

    def post(self, message: dict[str, Any]) -> bool:
        """A message not tied to a call; False where there is no stream for it."""
        ...


def log_severity(level: object) -> int:
    """Position in ``LOG_LEVELS`` (unknown levels count as the most severe)."""
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else len(LOG_LEVELS)


class Share:
    """One child's client sessions: who subscribed to what, and who hears its logs."""

    def __init__(self, server: ManagedServer) -> None:
        self.server = server
        self.members: dict[str, Member] = {}
        self.subscribers: dict[str, set[str]] = {}
        self.levels: dict[str, str] = {}
        server.routing.listeners.append(self._on_notification)

    # --------------------------------------------------------------- members

    def join(self, member: Member, attached: Attached | None = None) -> None:
        """A new member; ``attached``, it may also answer the child outside any call."""
        self.members[member.key] = member
        if attached is not None:
            self.server.routing.attach(member.key, attached)

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

    async def subscribe(self, key: str, uri: str, caller: Caller) -> dict[str, Any]:
        who = self.subscribers.get(uri)
        if not who:
            # The first subscriber: the child hears of it. Later ones share it.
            await self.server.watch(uri, caller)
            who = self.subscribers.setdefault(uri, set())
        who.add(key)
        return {}

    async def unsubscribe(self, key: str, uri: str, caller: Caller | None = None) -> dict[str, Any]:
        who = self.subscribers.get(uri, set())
        who.discard(key)
        if not who and uri in self.subscribers:
            del self.subscribers[uri]
            with contextlib.suppress(CallError):
                await self.server.unwatch(uri, caller or Caller())
        return {}

    # -------------------------------------------------------------- logging

    async def set_level(self, key: str, level: str, caller: Caller) -> dict[str, Any]:
        self.levels[key] = level
        await self._sync_level(caller)
        return {}

    async def _sync_level(self, caller: Caller) -> None:
        """The child logs at the most verbose level any live member asked for."""
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
            self._log(message, params or {})
        else:
            # Whose is it? Only a member with a child of its own can be sure.
            for member in list(self.members.values()):
                if member.exclusive and not member.deliver_with_call(message):
                    member.post(message)

    def _log(self, message: dict[str, Any], params: Mapping[str, Any]) -> None:
        """One log line, to the one session the router says it belongs to (else the tray's log)."""
        owner = self.server.routing.attribute()
        if isinstance(owner, Unplaced):
            self._keep(params, owner.why)
            return
        if owner.session is None:
            self._keep(params, "it came during a call of mcp-tray's own")
            return
        severity = log_severity(params.get("level"))
        wanted = False
        # Newest first: a session's newest call (or stream) takes it.
        for member in [m for m in reversed(self.members.values()) if m.session_id == owner.session]:
            level = member.log_level(self)
            if level is None and not member.hears_unlevelled():
                continue  # a 2026-07-28 call that asked for no logs
            if level is not None and severity < log_severity(level):
                return  # the session asked not to hear this one
            wanted = True
            delivered = (
                member.deliver_with_call(message)
                if owner.call is not None
                else member.post(message)
            )
            if delivered:
                return
        if wanted:
            self._keep(params, "its client session has no stream open for it")

    def _keep(self, params: Mapping[str, Any], why: str) -> None:
        data = str(params.get("data"))[:KEPT_LOG_CHARS]
        self.server.log(
            f"log ({params.get('level')}) kept here, not sent to a client ({why}): {data}"
        )


class CallMember:
    """One request of a client without a session stream (2026-07-28): a member of its
    child's share while it runs, hearing the log lines of its own call on its own stream."""

    _ids = itertools.count(1)

    def __init__(self, session: str, related: Callable[[dict[str, Any]], None], level: str | None):
        self.key = f"{session}#{next(self._ids)}"
        self.session_id = session
        self.exclusive = False
        self._related = related
        self._level = level

    def log_level(self, share: Share) -> str | None:
        return self._level

    def hears_unlevelled(self) -> bool:
        return False  # a 2026-07-28 request hears logs only when it asked for a level

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        self._related(message)
        return True

    def post(self, message: dict[str, Any]) -> bool:
        return False
