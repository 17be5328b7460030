"""The Supervisor owns every configured server and tells subscribers what changed.

It is the one object the API, the CLI plumbing, the gateway and the tray talk
to. It publishes frozen snapshots and events through plain callbacks (no Qt):
app/ turns those into signals.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from core import __version__
from core.base.clock import SYSTEM_CLOCK, Clock
from core.base.errors import UnknownServer
from core.base.severity import ROOTS_PER_WORKSPACE, SHARED_ROOTS
from core.base.snapshot import (
    AlertKind,
    ApprovalSnapshot,
    Event,
    EventKind,
    GrantSnapshot,
    ProfileSnapshot,
    SessionSnapshot,
    TraySnapshot,
    WarningSnapshot,
    WorkerSnapshot,
)
from core.settings.config import ServerConfig, TrayConfig
from core.settings.paths import Paths
from core.supervision.catalog_store import CATALOGS_DIR
from core.supervision.child import LIVE_PIDS, ChildProcess, Spawner
from core.supervision.containment import Containment
from core.supervision.logs import LogSink
from core.supervision.run import Timing
from core.supervision.server import EnvResolver, ManagedServer
from core.supervision.sweep import Leftover, end_adopted, new_owner_id, sweep_leftovers
from core.supervision.tool_review import FINGERPRINTS_FILE, ToolChange, ToolReview

logger = logging.getLogger(__name__)

Subscriber = Callable[[Event], None]
T = TypeVar("T")

#: What a roots notice suggests, by its family: the other way to share.
ROOTS_FIXES: Final = {SHARED_ROOTS: "per-workspace", ROOTS_PER_WORKSPACE: "shared"}


def _none() -> tuple[()]:
    return ()


@dataclass
class Views:
    """What the layers above supervision add to every snapshot (the service wires them)."""

    sessions: Callable[[], tuple[SessionSnapshot, ...]] = _none
    workers: Callable[[], tuple[WorkerSnapshot, ...]] = _none
    warnings: Callable[[], tuple[WarningSnapshot, ...]] = _none
    profiles: Callable[[], tuple[ProfileSnapshot, ...]] = _none
    approvals: Callable[[], tuple[ApprovalSnapshot, ...]] = _none
    grants: Callable[[], tuple[GrantSnapshot, ...]] = _none


@dataclass(frozen=True)
class ReloadResult:
    restarted: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


class Supervisor:
    def __init__(
        self,
        config: TrayConfig,
        paths: Paths,
        *,
        clock: Clock = SYSTEM_CLOCK,
        timing: Timing | None = None,
        owner: str | None = None,
        env_resolver: EnvResolver | None = None,
        server_factory: Callable[[ServerConfig], ManagedServer] | None = None,
        spawn: Spawner = ChildProcess.spawn,
        containment: Containment | None = None,
    ) -> None:
        self.config = config
        self.paths = paths
        self.clock = clock
        self.timing = timing or Timing()
        self.owner = owner or new_owner_id()
        self.logs = LogSink(paths.log_dir)
        self._env_resolver = env_resolver
        self._spawn = spawn
        self.containment = containment or Containment(paths.state_dir / "servers")
        self._factory = server_factory or self._make_server
        self._subscribers: list[Subscriber] = []
        self.servers: dict[str, ManagedServer] = {}
        #: Children made for client sessions, workspaces and eras, by NAME@suffix.
        self.private: dict[str, ManagedServer] = {}
        #: Called after every forwarded request: (server, method, seconds, ok).
        self.on_call_done: Callable[[str, str, float, bool], None] | None = None
        self.config_error: str | None = None
        self.swept: list[Leftover] = []
        #: Other parts (sessions, registry, diagnostics) add their view here.
        self.views = Views()
        #: Every server's tool fingerprints; changed tools wait here (docs/design.md §3.14).
        self.review = ToolReview(paths.state_dir / FINGERPRINTS_FILE)
        self.review.on_change = self._review_moved
        for server_config in config.servers.values():
            self.servers[server_config.name] = self._factory(server_config)

    def _make_server(self, config: ServerConfig) -> ManagedServer:
        server = ManagedServer(
            config,
            owner=self.owner,
            logs=self.logs,
            clock=self.clock,
            timing=self.timing,
            emit=self.publish,
            spawn=self._spawn,
            env_resolver=self._env_resolver,
            review=self.review,
            catalog_dir=self.paths.state_dir / CATALOGS_DIR,
            containment=self.containment,
            sign_in_file=self.paths.sign_in_file(config.name),
        )
        server.on_call_done = self._call_done
        return server

    def _call_done(self, server: str, method: str, seconds: float, ok: bool) -> None:
        if self.on_call_done is not None:
            self.on_call_done(server, method, seconds, ok)

    def _review_moved(self, change: ToolChange | None) -> None:
        if change is None:
            self.publish(Event(EventKind.APPROVALS))
            return
        self.publish(
            Event(
                EventKind.APPROVALS,
                change.server,
                text=f"tool {change.tool!r} of {change.server!r} changed ({change.reason}) and "
                f"is held until you approve it (mcp-tray approve {change.id})",
                alert=AlertKind.APPROVAL,
            )
        )

    def accept_tool_change(self, change_id: str) -> ToolChange:
        """The person approved a changed tool: it is offered again, and clients told."""
        change = self.review.accept(change_id)
        for server in self.all_servers():
            if server.name.partition("@")[0] == change.server and server.catalog.rescreen():
                server.log(f"tool {change.tool!r}: the change was approved; offered again")
                server.publish(EventKind.LISTS, "tools")
                server.routing.notify("notifications/tools/list_changed", None)
        return change

    def all_servers(self) -> list[ManagedServer]:
        return [*self.servers.values(), *self.private.values()]

    def add_private(self, config: ServerConfig, suffix: str) -> ManagedServer:
        """A child made for a client session, a workspace or an era: ``NAME@suffix``."""
        name = f"{config.name}@{suffix}"
        server = self._factory(replace(config, name=name))
        self.private[name] = server
        return server

    async def retire_private(self, server: ManagedServer) -> None:
        """The session ended or tripped: stop its own child and forget it."""
        await server.stop()
        if self.private.get(server.name) is server:  # a newer child may have its name by now
            del self.private[server.name]
            # Its log file stays open only while it is running: children come and go by
            # the hundred (issue 27 counted one fd each, never given back).
            self.logs.release(server.name)
        self.publish(Event(EventKind.STATE, server.name, server.snapshot()))

    # ------------------------------------------------------------ publishing

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: (
            self._subscribers.remove(subscriber) if subscriber in self._subscribers else None
        )

    def publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                # A broken view must not take supervision down with it.
                logger.exception("subscriber %r failed on %s", subscriber, event.kind)

    def notices(self) -> tuple[WarningSnapshot, ...]:
        """What supervision itself warns about: a server request it refused to place, a
        shared server that asks for roots (one of each per server)."""
        found = []
        for server in self.all_servers():
            roots = SHARED_ROOTS if server.config.sharing_pinned else ROOTS_PER_WORKSPACE
            for family, message, fix in (
                ("ambiguous-request", server.isolation_warning, "per-session"),
                (roots, server.roots_warning, ROOTS_FIXES[roots]),
            ):
                if message is not None:
                    found.append(
                        WarningSnapshot(
                            family=family,
                            subject=server.name,
                            message=message,
                            fix=f'set "sharing": "{fix}" on {server.name!r}',
                            text=f"{family}: {message}",
                        )
                    )
        return tuple(found)

    def snapshot(self) -> TraySnapshot:
        views = self.views
        return TraySnapshot(
            version=__version__,
            config_path=str(self.config.path),
            servers=tuple(server.snapshot() for server in self.all_servers()),
            config_error=self.config_error,
            sessions=_view(views.sessions, ()),
            workers=_view(views.workers, ()),
            warnings=_view(views.warnings, ()),
            profiles=_view(views.profiles, ()),
            approvals=_view(views.approvals, ()),
            grants=_view(views.grants, ()),
        )

    # ------------------------------------------------------------- lifecycle

    async def start(self, *, sweep: bool = True) -> None:
        """Sweep what a crashed earlier run left, then start every enabled server."""
        self.paths.ensure()
        await asyncio.to_thread(self.review.load)
        if sweep:
            self.swept = await asyncio.to_thread(sweep_leftovers, self.owner)
            for item in self.swept:
                logger.warning(
                    "ended leftover pid %d of dead owner %s: %s",
                    item.pid,
                    item.owner,
                    item.cmdline,
                )
        for server in self.servers.values():
            if not server.config.disabled:
                server.start()

    async def aclose(self) -> None:
        """Stop every child, shared and per-session, by the stop contract (concurrently).

        docs/design.md §3.1: after shutdown nothing of ours is left running, so the
        per-session children go too, not only the shared ones.
        """
        await asyncio.gather(
            *(server.stop() for server in self.all_servers()), return_exceptions=True
        )
        # Escapees the Linux subreaper adopted: no tag, no group, but ours.
        for proc in await asyncio.to_thread(end_adopted, set(LIVE_PIDS)):
            logger.warning("ended pid %d, left behind by a server that has stopped", proc.pid)
        self.private.clear()
        self.logs.close()

    def server(self, name: str) -> ManagedServer:
        try:
            return self.servers[name]
        except KeyError:
            raise UnknownServer(name, list(self.servers)) from None

    async def respawn(self, name: str) -> None:
        await self.server(name).respawn()

    async def stop_server(self, name: str) -> None:
        await self.server(name).stop()

    async def start_server(self, name: str) -> None:
        server = self.server(name)
        if server.running:
            return
        server.start()

    async def call_tool(
        self,
        name: str,
        tool: str,
        arguments: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return await self.server(name).call_tool(tool, arguments, timeout=timeout)

    # --------------------------------------------------------------- reloads

    async def apply_config(self, config: TrayConfig) -> ReloadResult:
        """Move to ``config``: restart only changed servers, start added, stop removed."""
        old = self.servers
        removed = [name for name in old if name not in config.servers]
        added = [name for name in config.servers if name not in old]
        restarted: list[str] = []
        self.config = config
        self.config_error = None
        await asyncio.gather(*(old[name].stop() for name in removed))
        for name in removed:
            del self.servers[name]
        for name, server_config in config.servers.items():
            if name in added:
                server = self._factory(server_config)
                self.servers[name] = server
                if not server_config.disabled:
                    server.start()
            elif await old[name].reconfigure(server_config):
                restarted.append(name)
        result = ReloadResult(tuple(restarted), tuple(added), tuple(removed))
        self.publish(
            Event(
                EventKind.CONFIG,
                text=f"reloaded: restarted {restarted}, added {added}, removed {removed}",
            )
        )
        return result

    def report_config_error(self, message: str) -> None:
        """A config edit was invalid: keep everything running, show the error."""
        self.config_error = message
        self.publish(Event(EventKind.CONFIG, text=message, alert=AlertKind.CONFIG_REFUSED))


def _view(provider: Callable[[], T], fallback: T) -> T:
    """A broken view must not take the snapshot (and every surface) down with it."""
    try:
        return provider()
    except Exception:
        logger.exception("snapshot view %r failed", provider)
        return fallback
