"""Which child serves a client session: the entry's own, or one made for it.

Per config entry (``"sharing"``):

- ``shared`` (the default): the entry's own child, for every session;
- ``per-session``: a child of the session's own, started at its first
  request and stopped when it closes or trips;
- ``per-workspace``: one child per distinct roots set (the folders a client
  works in), so clients in the same project share a child and clients in
  different projects never do; it stops when its last session leaves.

A shared entry whose server was seen asking for roots is served
``per-workspace`` from then on (a server that keeps the roots it was told
would otherwise work in one client's folders for another), unless the entry
pins ``"sharing": "shared"`` itself (core.supervision.routing then owes each
new session the child's next ask).

And per era. The MCP SDK's stdio server settles a connection's era with its
first request and refuses the other era's from then on
(``mcp.server.runner.serve_dual_era_loop``), so one child speaks one era.
An ``"auto"`` entry's child is probed like the SDK's auto mode and, for a
server that speaks 2026-07-28, driven in that era. A handshake-era client
that a server may ask things of (it declared sampling, elicitation or
roots) gets a child driven in *its* era instead: tools that ask the old way
(``ctx.session.create_message``) then work, and the 2026-07-28 child keeps
serving 2026-07-28 clients. Such a child starts with the first client that
needs it; a server that refuses the handshake era's ``initialize`` parks
that child at once, and its handshake-era clients go through the
2026-07-28 child and mcp-tray's translation (core.serving.calls.translate).
"""

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Final

from core.base.errors import TooManyChildren
from core.base.states import ServerState
from core.settings.config import Sharing
from core.supervision.routing import RootsSource
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor

#: A server starting for the first time gets this long to finish its
#: handshake before a client is answered from what is known (or the defaults).
FIRST_START_WAIT_SECONDS: Final = 10.0
#: The ``"protocol"`` a child made for a handshake-era client is pinned to.
HANDSHAKE: Final = "handshake"
#: The entry's own child.
BASE: Final = ""
#: A child made for an era outlives its last session this long (clients of that
#: era come and go: each would otherwise pay for a cold start).
ERA_CHILD_LINGER_SECONDS: Final = 60.0
#: The keys of children made for a session or a workspace: ``max_children`` counts these
#: (an era's child is one per entry).
_CAPPED: Final = ("session:", "workspace:")


async def first_start(server: ManagedServer) -> None:
    """Until a server starting for the first time has listed what it offers."""
    while not server.catalog.known and server.state in (ServerState.STARTING, ServerState.STOPPED):
        if server.state is ServerState.STOPPED and not server.wanted:
            return
        await server.changed().wait()


async def started(server: ManagedServer) -> None:
    """``first_start``, bounded."""
    if not server.catalog.known:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first_start(server), FIRST_START_WAIT_SECONDS)


def refused_era(server: ManagedServer) -> bool:
    """A child made for the handshake era that its server would not speak it with."""
    return server.state is ServerState.PARKED and not server.catalog.known


def workspace_key(roots: Iterable[str]) -> str:
    """A short stable name for a set of root URIs (order and repeats do not matter)."""
    joined = "\n".join(sorted(set(roots)))
    return hashlib.sha256(joined.encode()).hexdigest()[:8]


class Placement:
    """The children made for sessions, eras and workspaces, by entry and key."""

    def __init__(
        self,
        supervisor: Supervisor,
        spawn: Callable[[Any], None],
        on_retired: Callable[[ManagedServer], None] = lambda child: None,
    ) -> None:
        self.supervisor = supervisor
        self._spawn = spawn
        #: Told of every child this placement stops (what was kept for it can go).
        self._on_retired = on_retired
        #: (entry, key) -> child; the entry's own child is never here.
        self._children: dict[tuple[str, str], ManagedServer] = {}
        #: What each child was made from (a config edit replaces it).
        self._made_from: dict[str, tuple[object, ...]] = {}
        #: Entries whose server refused the handshake era (their clients are
        #: translated), as configured when it did (an edit asks again).
        self._modern_only: dict[str, tuple[object, ...]] = {}
        #: Children made for an era (they linger when unused), and the waits.
        self._era_children: set[str] = set()
        self._lingering: set[asyncio.Task[None]] = set()

    def base(self, name: str) -> ManagedServer:
        return self.supervisor.server(name)

    def wants_own_era(self, base: ManagedServer, modern: bool, askable: bool) -> bool:
        """Whether a client of this era gets a child driven in its era rather than the base."""
        return (
            not modern
            and askable
            and base.config.protocol == "auto"
            and self._modern_only.get(base.name) != base.config.launch_key()
        )

    async def child(
        self,
        base: ManagedServer,
        *,
        session: str,
        modern: bool,
        askable: bool,
        roots: Iterable[str] | None,
        roots_source: RootsSource | None = None,
    ) -> ManagedServer:
        """The child that serves this session now (made and started when needed);
        a child made for one session or workspace answers ``roots/list`` from
        ``roots_source`` from its very first request."""
        sharing = base.sharing  # as configured, or as its server showed
        own_era = self.wants_own_era(base, modern, askable)
        if sharing == "per-session":
            key, suffix = f"session:{session}", session[:8]
        elif sharing == "per-workspace":
            ws = workspace_key(roots or ())
            key, suffix = f"workspace:{ws}", f"ws-{ws}"
        else:
            if not own_era:
                return base
            await started(base)
            if not base.catalog.modern:
                return base  # it speaks the handshake era itself
            key, suffix = BASE, HANDSHAKE
        if own_era:
            key, suffix = f"{key}/{HANDSHAKE}", f"{suffix}-hs" if suffix != HANDSHAKE else suffix
        made = await self._made(
            base, key, suffix, HANDSHAKE if own_era else None, sharing, roots_source
        )
        if own_era and refused_era(made):
            # It will not speak the handshake era: its clients are translated from now on.
            self._modern_only[base.name] = base.config.launch_key()
            self.retire(made)
            return await self.child(
                base,
                session=session,
                modern=modern,
                askable=askable,
                roots=roots,
                roots_source=roots_source,
            )
        return made

    async def _made(
        self,
        base: ManagedServer,
        key: str,
        suffix: str,
        protocol: str | None,
        sharing: Sharing,
        roots_source: RootsSource | None,
    ) -> ManagedServer:
        found = self._children.get((base.name, key))
        if found is not None and self._made_from.get(found.name) == base.config.launch_key():
            return found
        if found is not None:
            self.retire(found)  # its entry was edited since
        if key.startswith(_CAPPED):
            self._check_cap(base)
        config = replace(base.config, protocol=protocol or base.config.protocol, sharing=sharing)
        child = self.supervisor.add_private(config, suffix)
        if sharing == "shared":
            # An era's child of a shared entry: its asking for roots is its entry's.
            child.routing.on_shared_roots = base.routing.on_shared_roots
        else:
            child.routing.roots_source = roots_source
        self._children[(base.name, key)] = child
        self._made_from[child.name] = base.config.launch_key()
        if key == f"{BASE}/{HANDSHAKE}":
            self._era_children.add(child.name)
        child.start()
        if protocol is not None:
            # Whether it speaks the era is known only once it answered.
            await started(child)
        return child

    def _check_cap(self, base: ManagedServer) -> None:
        """Refuse a child past the entry's ``max_children`` (each is a whole server)."""
        limit = base.config.max_children
        running = sum(
            1 for entry, key in self._children if entry == base.name and key.startswith(_CAPPED)
        )
        if running >= limit:
            raise TooManyChildren(base.name, limit, base.sharing, str(self.supervisor.config.path))

    def made(self, server: ManagedServer) -> bool:
        """A child of this placement's (not an entry's own)."""
        return server.name in self._made_from

    def unused(self, child: ManagedServer, in_use: Callable[[], bool]) -> None:
        """No session sits on ``child`` any more: it goes (an era's child after a while)."""
        if child.name not in self._era_children:
            self.retire(child)
            return

        async def linger() -> None:
            await asyncio.sleep(ERA_CHILD_LINGER_SECONDS)
            if not in_use():
                self.retire(child)

        task = asyncio.ensure_future(linger())
        self._lingering.add(task)
        task.add_done_callback(self._lingering.discard)

    def aclose(self) -> None:
        """At shutdown nothing lingers (the supervisor stops every child)."""
        for task in self._lingering:
            task.cancel()

    def retire(self, child: ManagedServer) -> None:
        """Stop a child made here and forget it."""
        for key, found in list(self._children.items()):
            if found is child:
                del self._children[key]
        self._era_children.discard(child.name)
        if self._made_from.pop(child.name, None) is not None:
            self._on_retired(child)
            self._spawn(self.supervisor.retire_private(child))
