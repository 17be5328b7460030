"""Client sessions (one per AI-client connection) and their circuit breakers.

A session counts its consecutive non-retryable failures: a call path that
ended in an error of docs/design.md §3.3/3.4 (the child exited, exited again, exited
mid-call, broke the protocol) or a parked server. Fast-fails of an open
server breaker are neither: they leave the count where it was; and so does
a failure the server breaker took over (it opened on it, or was open) when
the call was only waiting for a respawn that died too: a server dying over
and over is one incident, which the server breaker contains, not a reason to
block every session that happened to call. A call that was inside the child
when it died always counts: it may be what kills it.
A success of any kind resets the count; a tool result with ``isError`` is a
success here (the server answered). At ``SESSION_BREAKER_THRESHOLD`` the
session trips: its requests are answered at once with the reset hint and
nothing is spawned or sent for it until the user resets it. A reset means
working again: the failures that tripped the session usually opened its
server's breaker too (each one was a child's death), so a reset also closes
that breaker where a child can answer (``on_reset``; the service wires it).
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from core.base.errors import (
    CallError,
    ServerParked,
    SessionTripped,
    TransportFailure,
    UnknownSession,
)
from core.base.snapshot import AlertKind, Event, EventKind, SessionSnapshot
from core.registry.identity import client_display_name, normalize_client_name
from core.registry.session_claims import SessionOwnership
from core.supervision.breakers import SessionBreaker

SessionKind = Literal["http", "bridge"]

#: Errors that count toward a session's breaker (docs/design.md §3.5). Not
#: ``BreakerOpen``: its fast-fails cost nothing, and the server breaker
#: already contains that incident; counting them would turn one server
#: incident into every session tripped.
COUNTED_FAILURES: Final = (TransportFailure, ServerParked)


@dataclass
class ClientSession:
    id: str
    server: str
    kind: SessionKind
    client_name: str = "unknown"
    opened_at: float = field(default_factory=time.time)
    requests: int = 0
    breaker: SessionBreaker = field(default_factory=SessionBreaker)
    worker_identity: str | None = None
    closed: bool = False
    last_error: str | None = None
    #: Called when the session trips or closes, to release what it holds
    #: (a per-session child). Set by the gateway.
    release: Callable[[], Any] | None = None
    #: The client's roots (``roots/list`` result's ``roots``), once asked; None: not yet.
    roots: tuple[dict[str, Any], ...] | None = None
    #: The aggregate endpoint the client reaches ``server`` through ("": its own endpoint).
    via: str = ""
    #: The client's process where the OS or the worker registry said (the call journal).
    pid: int | None = None
    #: How the client was told apart ("" until something more than its name said so).
    identified_by: str = ""

    @property
    def tripped(self) -> bool:
        return self.breaker.tripped

    def check(self) -> None:
        """Refuse at once when tripped: nothing reaches the server."""
        if self.breaker.tripped:
            raise SessionTripped(self.server, self.id, self.breaker.consecutive_failures)

    def snapshot(self, ownership: SessionOwnership | None = None) -> SessionSnapshot:
        return SessionSnapshot(
            id=self.id,
            server=self.server,
            kind=self.kind,
            client_name=self.client_name,
            client=client_display_name(self.client_name),
            opened_at=self.opened_at,
            requests=self.requests,
            consecutive_failures=self.breaker.consecutive_failures,
            tripped=self.breaker.tripped,
            last_error=self.last_error,
            worker_identity=self.worker_identity,
            ownership=ownership.status if ownership else None,
            ownership_detail=ownership.detail if ownership else "",
            via=self.via,
        )

    def to_json(self) -> dict[str, Any]:
        return session_json(self.snapshot())


class SessionTable:
    def __init__(self, publish: Callable[[Event], None]) -> None:
        self._sessions: dict[str, ClientSession] = {}
        self._publish = publish
        #: Told of every reset, so the server the session calls is tried again too
        #: (set by the service: it closes that server's breaker).
        self.on_reset: Callable[[ClientSession], None] | None = None

    def open(self, session: ClientSession) -> ClientSession:
        self._sessions[session.id] = session
        self._changed(f"opened {session.id}")
        return session

    def close(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.closed = True
            self._release(session)
            self._changed(f"closed {session_id}")

    def get(self, session_id: str) -> ClientSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSession(session_id, list(self._sessions)) from None

    def all(self) -> list[ClientSession]:
        return list(self._sessions.values())

    def identify(self, session: ClientSession, client_name: str) -> None:
        session.client_name = normalize_client_name(client_name)
        self._changed(f"identified {session.id}")

    def succeeded(self, session: ClientSession) -> None:
        session.requests += 1
        if session.breaker.consecutive_failures:
            session.breaker.success()
            self._changed(f"{session.id} recovered")

    def refused(self, session: ClientSession) -> None:
        """A tripped session asked again: answered at once, not counted as a new failure."""
        session.requests += 1
        self._changed(f"{session.id} refused while tripped")

    def failed(self, session: ClientSession, error: CallError) -> None:
        """Count a call path error; trips the session at the threshold."""
        session.requests += 1
        session.last_error = str(error)
        if not isinstance(error, COUNTED_FAILURES):
            return
        if isinstance(error, TransportFailure) and error.contained:
            # The server breaker opened on this incident and holds it now: it
            # stops the respawns, so the session has nothing to stop.
            self._changed(f"{session.id} failed (the server breaker holds it)")
            return
        if session.breaker.failure():
            self._release(session)
            self._publish(
                Event(
                    EventKind.SESSIONS,
                    session.server,
                    text=f"tripped {session.id}",
                    alert=AlertKind.TRIPPED,
                )
            )
        else:
            self._changed(f"{session.id} failed")

    def reset(self, session_id: str) -> ClientSession:
        session = self.get(session_id)
        session.breaker.reset()
        session.last_error = None
        if self.on_reset is not None:
            self.on_reset(session)
        self._publish(Event(EventKind.SESSIONS, session.server, text=f"reset {session_id}"))
        return session

    def reset_all(self) -> list[str]:
        tripped = [s.id for s in self._sessions.values() if s.tripped]
        for session_id in tripped:
            self.reset(session_id)
        return tripped

    def to_json(
        self, ownership: Mapping[str, SessionOwnership] | None = None
    ) -> list[dict[str, Any]]:
        return [session_json(snapshot) for snapshot in self.snapshots(ownership)]

    def snapshots(
        self, ownership: Mapping[str, SessionOwnership] | None = None
    ) -> tuple[SessionSnapshot, ...]:
        claims = ownership or {}
        return tuple(
            session.snapshot(claims.get(session.id)) for session in self._sessions.values()
        )

    def _release(self, session: ClientSession) -> None:
        if session.release is not None:
            session.release()

    def _changed(self, text: str) -> None:
        self._publish(Event(EventKind.SESSIONS, text=text))


def session_json(session: SessionSnapshot) -> dict[str, Any]:
    """A session as the API and ``mcp-tray sessions --json`` show it."""
    return {
        "id": session.id,
        "client_name": session.client_name,
        "client": session.client,
        "server": session.server,
        "kind": session.kind,
        "opened_at": session.opened_at,
        "requests": session.requests,
        "consecutive_failures": session.consecutive_failures,
        "breaker": "tripped" if session.tripped else "closed",
        "last_error": session.last_error,
        "worker_identity": session.worker_identity,
        "ownership": session.ownership,
        "ownership_detail": session.ownership_detail,
        "via": session.via,
    }
