"""Who a bridge speaks for, and its row in the worker registry.

The client's identity comes from ``MCP_TRAY_CLIENT``/``_INSTANCE``/``_SESSION``,
else from the parent process (the client that launched the bridge). The row
is registered, or claimed from an older bridge of the same client session
(which is fenced from then on), and renewed from a daemon heartbeat thread.
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
from core.registry.records import BLOCKER_FENCED, ROLE_BRIDGE, HeartbeatOutcome
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

    ``attach`` registers the row (or claims it from an older bridge of the same
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
        #: A newer bridge of the same client session took the row over.
        self.fenced = False

    @classmethod
    def attach(
        cls,
        paths: Paths,
        server: str,
        who: BridgeIdentity,
        on_refused: Callable[[HeartbeatOutcome], None],
    ) -> "Attachment":
        registry = WorkerRegistry(paths.registry_file)
        try:
            holder = next(
                (
                    row
                    for row in registry.list_workers(session_id=who.session)
                    if row.role == ROLE_BRIDGE
                    and row.server == server
                    and registry.is_live(row).live
                ),
                None,
            )
            if holder is not None:
                # Same client session, newer bridge: take the row over; the old
                # holder's next beat is refused as fenced.
                claim = registry.claim_generation(holder.worker_identity, pid=os.getpid())
                attachment = cls(paths, server, who, on_refused, holder.worker_identity)
                attachment._beat(claim.fencing_epoch or holder.fencing_epoch + 1)
                return attachment
            identity = worker_identity(
                normalize_client_name(who.client), who.session, registry.wall_clock()
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
        fenced = self.fenced
        if self.supervisor is not None:
            self.supervisor.stop("bridge exiting")
        if not fenced:
            # Still ours: remove it. A fenced row belongs to the newer bridge.
            self.registry.remove(self.identity)
        self.registry.close()
