"""Who a bridge speaks for, and its row in the worker registry.

The client's identity comes from ``MCP_TRAY_CLIENT``/``_INSTANCE``/``_SESSION``,
else from the parent process (the client that launched the bridge). Each
bridge is a client session of its own, with a row of its own: a client
process runs several bridges to one server at once (one per chat, per
window), and none may knock another out. Only a bridge that replaces a dead
one takes that one's row over (same client session and server, its process
gone), so the session the tray kept for it goes on; a bridge that still runs
is never fenced by a newer one. The row is renewed from a daemon heartbeat
thread.
"""

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from core import __version__
from core.base.envvars import CLIENT_INSTANCE_ENV, CLIENT_NAME_ENV, CLIENT_SESSION_ENV
from core.registry.heartbeat import WorkerHeartbeatSupervisor, heartbeat_settings
from core.registry.identity import normalize_client_name, worker_identity
from core.registry.records import (
    BLOCKER_FENCED,
    ROLE_BRIDGE,
    HeartbeatOutcome,
    PidProbe,
    WorkerRecord,
)
from core.registry.store import WorkerRegistry
from core.settings.paths import Paths


@dataclass(frozen=True)
class BridgeIdentity:
    client: str
    instance: str
    session: str


def bridge_identity(environ: dict[str, str] | os._Environ[str], parent_pid: int) -> BridgeIdentity:
    """Who launched us: the MCP_TRAY_CLIENT* variables, else the parent process."""
    parent_name, parent_started = "unknown", 0
    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(parent_pid)
        parent_name = parent.name()
        parent_started = int(parent.create_time())
    client = environ.get(CLIENT_NAME_ENV) or parent_name
    instance = environ.get(CLIENT_INSTANCE_ENV) or str(parent_pid)
    session = (
        environ.get(CLIENT_SESSION_ENV)
        or f"{normalize_client_name(client)}-{parent_pid}-{parent_started}"
    )
    return BridgeIdentity(client, instance, session)


class Attachment:
    """This bridge's worker row and its heartbeat.

    ``attach`` registers the row (or takes it over from a dead bridge of the same
    client session); ``ensure`` registers it again, under the same identity,
    when it vanished (a deleted registry, a long sleep past its expiry), so a
    bridge that outlives such things keeps showing in the Workers tab.
    """

    def __init__(
        self,
        paths: Paths,
        server: str,
        who: BridgeIdentity,
        on_refused: Callable[[HeartbeatOutcome], None],
        identity: str,
    ) -> None:
        self.paths = paths
        self.server = server
        self.who = who
        self.client = normalize_client_name(who.client)
        self.identity = identity
        self._on_refused = on_refused
        self.settings = heartbeat_settings(os.environ)
        self.registry = WorkerRegistry(paths.registry_file)
        self.supervisor: WorkerHeartbeatSupervisor | None = None
        #: Another bridge took the row over (it found this one's process gone).
        self.fenced = False

    @classmethod
    def attach(
        cls,
        paths: Paths,
        server: str,
        who: BridgeIdentity,
        on_refused: Callable[[HeartbeatOutcome], None],
        pid_alive: PidProbe | None = None,
    ) -> "Attachment":
        registry = WorkerRegistry(paths.registry_file)
        try:
            rows = registry.list_workers(session_id=who.session)
            alive = pid_alive or running
            predecessor = next((r for r in rows if _replaces(r, server, alive)), None)
            if predecessor is not None:
                # A bridge of this client session and server whose process is gone:
                # this one replaces it, under its identity (a holder that somehow
                # still beats is refused as fenced from now on).
                claim = registry.claim_generation(predecessor.worker_identity, pid=os.getpid())
                attachment = cls(paths, server, who, on_refused, predecessor.worker_identity)
                attachment._beat(claim.fencing_epoch or predecessor.fencing_epoch + 1)
                return attachment
            # An identity of its own, even beside a live bridge of the same client
            # session and server (the same start instant included: the pid tells them apart).
            identity = worker_identity(
                normalize_client_name(who.client),
                f"{who.session}\0{os.getpid()}",
                registry.wall_clock(),
            )
        finally:
            registry.close()
        attachment = cls(paths, server, who, on_refused, identity)
        attachment.ensure()
        return attachment

    def ensure(self) -> None:
        """Register the row (again), under this identity, unless it is there and beating."""
        registry = self.registry
        supervisor = self.supervisor
        replaced = registry.replaced()
        if (
            supervisor is not None
            and supervisor.stopped_reason is None
            and not replaced
            and registry.get(self.identity) is not None
        ):
            return
        if replaced:
            # Deleted or moved aside under us: the connection still holds the
            # old file; a fresh one opens (or creates) what the path names now.
            registry.close()
            self.registry = registry = WorkerRegistry(self.paths.registry_file)
        registration = registry.register(
            worker_identity=self.identity,
            client_name=self.client,
            client_instance=self.who.instance,
            session_id=self.who.session,
            role=ROLE_BRIDGE,
            server=self.server,
            pid=os.getpid(),
            heartbeat_ttl_seconds=self.settings.ttl_seconds,
            runtime_version=__version__,
        )
        self._beat(registration.fencing_epoch)

    def _beat(self, epoch: int) -> None:
        if self.supervisor is not None:
            self.supervisor.stop("registered again")
        self.supervisor = WorkerHeartbeatSupervisor(
            self.registry,
            worker_identity=self.identity,
            fencing_epoch=epoch,
            ttl_seconds=self.settings.ttl_seconds,
            session_id=self.who.session,
            client_name=self.client,
            pid=os.getpid(),
            interval_seconds=self.settings.interval_seconds,
            on_refused=self._refused,
        )
        self.supervisor.start()

    def _refused(self, outcome: HeartbeatOutcome) -> None:
        if outcome.blocker_kind == BLOCKER_FENCED:
            self.fenced = True
        self._on_refused(outcome)

    def detach(self) -> None:
        """Stop beating; remove the row unless another bridge took it over."""
        fenced = self.fenced
        if self.supervisor is not None:
            self.supervisor.stop("bridge exiting")
        if not fenced:
            # Still ours: remove it. A fenced row belongs to the newer bridge.
            self.registry.remove(self.identity)
        self.registry.close()


def _replaces(row: WorkerRecord, server: str, pid_alive: PidProbe) -> bool:
    """Whether a new bridge for ``server`` replaces ``row``'s: a bridge's row of the
    same server whose process is gone (never one that still runs: that is another
    client session of the same client, and stays)."""
    if row.role != ROLE_BRIDGE or row.server != server or row.pid is None:
        return False
    return row.pid != os.getpid() and not pid_alive(row.pid)


def running(pid: int) -> bool:
    """A process runs with ``pid``: not gone, and not a zombie (dead, its exit not yet
    collected: a SIGKILLed bridge whose client has not reaped it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
