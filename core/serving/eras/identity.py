"""Who a 2026-07-28 client is: one session per client process, not per TCP connection.

A stateless client sends no session id, and its HTTP client drops idle
connections (the SDK's after 5 s), so the connection is no identity: a
client that calls every few seconds would be a new session, and get a new
per-session child, every time. A stateless client's session is keyed,
most specific first, by:

- **the bridge's worker identity** (``x-mcp-tray-worker``): one bridge
  process per client process;
- **the client's own process**, found from the connection's source port
  (loopback: the OS knows which process holds the other end; psutil asks
  it, in a thread, once per new connection). mcp-tray's choice for direct
  HTTP clients: the snippets ``client-config`` prints carry the client's
  name (``x-mcp-tray-identity``), which names the session but cannot tell
  two processes of one client apart; the process can;
- else the identity header or the ``clientInfo`` name: one session for that
  client, whatever process or connection.

A worker header is no password: any local process with the token could send
another's. So a bridge's session belongs to the process that opened it (its
connection's peer, where the OS says which): the same header from another
living process is refused (``BORROWED``), and the session it names is left
as it was; once the first process is gone, a newcomer gets a session of its
own under that header (a bridge that really replaces a dead one).

A session whose client is gone is reaped within ``REAP_SECONDS`` of its
process ending (the bridge's row in the worker registry; the client
process), or after ``UNKNOWN_IDLE_SECONDS`` without a request where nothing
says whether it lives; one whose client lives ends after
``STATELESS_IDLE_SECONDS`` without a request, like a handshake-era session.
Its per-session child and parked calls go with it.
"""

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import psutil
from starlette.types import Scope

from core.base.errors import RpcError, shown
from core.protocol.eras import Envelope
from core.protocol.headers import CLIENT_HEADER, IDENTITY_HEADER, WORKER_HEADER
from core.protocol.jsonrpc import INVALID_REQUEST
from core.serving.calls.fanout import Share
from core.serving.sessions.sessions import ClientSession, SessionTable

#: A session whose client lives ends after this long without a request.
STATELESS_IDLE_SECONDS: Final = 30 * 60
#: One whose client cannot be watched ends after this long without a request.
UNKNOWN_IDLE_SECONDS: Final = 5 * 60
#: A session is reaped at most this long after its client process ended
#: (the housekeeping looks this often, with margin).
REAP_SECONDS: Final = 60.0
#: How many connections' owners are remembered (a connection is reused for many requests).
PEER_CACHE: Final = 256
#: How long a connection's owner is taken as known: a closed connection's port
#: is not handed out again while it waits out TCP's TIME_WAIT (60 s on Linux).
PEER_SECONDS: Final = 60.0

#: (pid, its start time) of a process.
Process = tuple[int, float]

#: The error data's ``reason`` when a worker header comes from another process.
BORROWED: Final = "worker_of_another_process"


class SessionHost(Protocol):
    """Where the sessions go: the pipeline (one server's endpoint) or the aggregate (a profile's)."""

    @property
    def sessions(self) -> SessionTable: ...

    def open_session(self, session: ClientSession) -> None: ...

    def close_session(self, session: ClientSession) -> None: ...

    def release(self, session: ClientSession) -> None: ...


class WorkerView(Protocol):
    """Whether a bridge's worker row still lives (None: the registry cannot say)."""

    def __call__(self, identity: str) -> bool | None: ...


def peer_process(port: int, candidates: list[int]) -> Process | None:
    """The process of this user holding the loopback connection from ``port`` (None: unknown).

    The processes of known sessions are asked first (cheap); only a new client
    makes it scan every connection of the machine.
    """
    for pid in candidates:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if any(c.laddr and c.laddr.port == port for c in process.net_connections("tcp")):
                return pid, process.create_time()
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.pid is not None and conn.laddr and conn.laddr.port == port and conn.raddr:
            with contextlib.suppress(psutil.Error):
                return conn.pid, psutil.Process(conn.pid).create_time()
    return None


def _label(headers: Mapping[str, str], envelope: Envelope) -> str:
    """What a direct HTTP client calls itself: its snippet's identity header, else its clientInfo."""
    return headers.get(IDENTITY_HEADER) or str(
        (envelope.client_info or {}).get("name") or "unknown"
    )


def _identity(process: Process | None, headers: Mapping[str, str], envelope: Envelope) -> str:
    if process is not None:
        return f"pid {process[0]} {process[1]:.3f}"
    return f"client {_label(headers, envelope)}"


def process_alive(process: Process) -> bool:
    pid, started = process
    try:
        return psutil.Process(pid).create_time() == started
    except psutil.Error:
        return False


@dataclass
class StatelessSession:
    """A stateless client's session: a member of its child's share, with no stream of its own."""

    session: ClientSession
    #: What keyed it (for the log and the tests).
    identity: str
    #: The client process, when the OS said which it is.
    process: Process | None = None
    last_seen: float = 0.0

    @property
    def key(self) -> str:
        return self.session.id

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def exclusive(self) -> bool:
        return False

    def log_level(self, share: Share) -> str | None:
        return None

    def hears_unlevelled(self) -> bool:
        return False  # its log lines ride its calls (core.serving.calls.fanout.CallMember)

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        return False

    def post(self, message: dict[str, Any]) -> bool:
        return False  # no stream outside a request in this era


class StatelessClients:
    """The gateway's stateless client sessions, by identity."""

    def __init__(
        self,
        pipeline: SessionHost,
        worker_alive: WorkerView,
        *,
        lookup: Callable[[int, list[int]], Process | None] = peer_process,
        alive: Callable[[Process], bool] = process_alive,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pipeline = pipeline
        self._worker_alive = worker_alive
        self._lookup = lookup
        self._alive = alive
        self._clock = clock
        self._sessions: dict[tuple[str, str], StatelessSession] = {}
        #: (client host, port) -> the process holding that connection.
        self._peers: dict[tuple[str, int], Process | None] = {}
        #: (client host, port, identity header or clientInfo name) -> the session's identity.
        self._known: dict[tuple[str, int, str], str] = {}
        #: When each connection's owner was looked up.
        self._looked_up: dict[tuple[str, int], float] = {}

    def known(
        self, name: str, envelope: Envelope, scope: Scope, headers: Mapping[str, str]
    ) -> StatelessSession | None:
        """The session of a client already seen on this connection (no lookup, no wait)."""
        bridge = headers.get(WORKER_HEADER)
        peer = scope.get("client")
        if bridge:
            identity = f"bridge {bridge}"
            seated = self._sessions.get((name, identity))
            # Only on a connection whose process is known to be the session's own.
            if peer is None or seated is None or seated.process is None:
                return None
            if self._peers.get((peer[0], int(peer[1]))) != seated.process:
                return None
        else:
            if not peer:
                return None
            found = self._known.get((peer[0], peer[1], _label(headers, envelope)))
            if found is None:
                return None
            identity = found
        seated = self._sessions.get((name, identity))
        if seated is None or seated.session.closed:
            return None
        seated.last_seen = self._clock()
        return seated

    async def session_for(
        self, name: str, envelope: Envelope, scope: Scope, headers: Mapping[str, str]
    ) -> StatelessSession:
        bridge = headers.get(WORKER_HEADER)
        label = _label(headers, envelope)
        process: Process | None = None
        if bridge:
            identity = f"bridge {bridge}"
            process = await self._process(scope)
            self._check_owner(name, identity, process, bridge)
        else:
            process = await self._process(scope)
            identity = _identity(process, headers, envelope)
            peer = scope.get("client")
            if peer:
                if len(self._known) >= PEER_CACHE:
                    self._known.pop(next(iter(self._known)))
                self._known[(peer[0], peer[1], label)] = identity
        key = (name, identity)
        seated = self._sessions.get(key)
        if seated is None or seated.session.closed:
            session = ClientSession(
                id=uuid.uuid4().hex,
                server=name,
                kind="bridge" if bridge else "http",
                worker_identity=bridge,
            )
            if process is not None:
                session.pid, session.identified_by = process[0], "client process"
            seated = StatelessSession(session, identity, process)
            session.release = lambda: self.pipeline.release(session)
            self._sessions[key] = seated
            self.pipeline.open_session(session)
            self.pipeline.sessions.identify(session, headers.get(CLIENT_HEADER) or label)
        seated.last_seen = self._clock()
        return seated

    def _check_owner(self, name: str, identity: str, process: Process | None, bridge: str) -> None:
        """Refuse a worker header sent by a process other than its session's, while that
        one lives (where the OS names both)."""
        seated = self._sessions.get((name, identity))
        if seated is None or seated.session.closed or process is None:
            return
        owner = seated.process
        if owner is None or owner == process:
            return
        if self._alive(owner):
            raise RpcError(
                INVALID_REQUEST,
                f"the {WORKER_HEADER} header {shown(bridge)} belongs to another process "
                f"(pid {owner[0]}), whose session and per-session child it names; this request "
                f"comes from pid {process[0]}. A bridge sends its own header: leave the header "
                "out (a direct client is told apart by its process)",
                {"reason": BORROWED},
            )
        # Its process is gone: this one gets a session of its own under that header.
        del self._sessions[(name, identity)]
        self.pipeline.close_session(seated.session)

    async def _process(self, scope: Scope) -> Process | None:
        peer = scope.get("client")
        if not peer:
            return None
        host, port = peer[0], int(peer[1])
        if (host, port) in self._peers:
            return self._peers[(host, port)]
        known = [s.process[0] for s in self._sessions.values() if s.process is not None]
        found = await asyncio.to_thread(self._lookup, port, known)
        if len(self._peers) >= PEER_CACHE:
            self._forget_peer(next(iter(self._peers)))
        self._peers[(host, port)] = found
        self._looked_up[(host, port)] = self._clock()
        return found

    def expire(self) -> None:
        """End the sessions whose client is gone, or idle past their time."""
        now = self._clock()
        for key, seated in list(self._sessions.items()):
            if self._gone(seated, now - seated.last_seen):
                del self._sessions[key]
                self.pipeline.close_session(seated.session)
        # A connection's port may serve another process once it is closed long enough.
        for peer, when in list(self._looked_up.items()):
            if now - when > PEER_SECONDS:
                self._forget_peer(peer)

    def _forget_peer(self, peer: tuple[str, int]) -> None:
        self._peers.pop(peer, None)
        self._looked_up.pop(peer, None)
        for known in [k for k in self._known if k[:2] == peer]:
            del self._known[known]

    def _gone(self, seated: StatelessSession, idle: float) -> bool:
        session = seated.session
        if session.closed:
            return True
        if seated.process is not None:
            return not self._alive(seated.process) or idle > STATELESS_IDLE_SECONDS
        if session.worker_identity is not None:
            alive = self._worker_alive(session.worker_identity)
            if alive is not None:
                return not alive or idle > STATELESS_IDLE_SECONDS
        return idle > UNKNOWN_IDLE_SECONDS

    def sessions(self) -> list[StatelessSession]:
        return list(self._sessions.values())
