"""Who a bridge speaks for, and its row in the worker registry.

The client's identity comes from ``MCP_TRAY_CLIENT``/``_INSTANCE``/``_SESSION``,
else from the parent process (the client that launched the bridge). The row
is registered, or claimed from an older bridge of the same client session
(which is fenced from then on), and renewed from a daemon heartbeat thread.
"""

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import psutil

from core import __version__
from core.base.envvars import CLIENT_INSTANCE_ENV, CLIENT_NAME_ENV, CLIENT_SESSION_ENV
from core.registry.heartbeat import WorkerHeartbeatSupervisor, heartbeat_settings
from core.registry.identity import normalize_client_name, worker_identity
from core.registry.records import ROLE_BRIDGE
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
    """This bridge's worker row and its heartbeat."""

    def __init__(
        self, registry: WorkerRegistry, identity: str, supervisor: WorkerHeartbeatSupervisor
    ) -> None:
        self.registry = registry
        self.identity = identity
        self.supervisor = supervisor

    @classmethod
    def attach(cls, paths: Paths, server: str, who: BridgeIdentity, on_fenced: Any) -> "Attachment":
        settings = heartbeat_settings(os.environ)
        registry = WorkerRegistry(paths.registry_file)
        client = normalize_client_name(who.client)
        pid = os.getpid()
        holder = next(
            (
                row
                for row in registry.list_workers(session_id=who.session)
                if row.role == ROLE_BRIDGE and row.server == server and registry.is_live(row).live
            ),
            None,
        )
        if holder is not None:
            # Same client session, newer bridge: take the row over; the old
            # holder's next beat is refused as fenced.
            claim = registry.claim_generation(holder.worker_identity, pid=pid)
            identity, epoch = (
                holder.worker_identity,
                claim.fencing_epoch or holder.fencing_epoch + 1,
            )
        else:
            identity = worker_identity(client, who.session, registry.wall_clock())
            registration = registry.register(
                worker_identity=identity,
                client_name=client,
                client_instance=who.instance,
                session_id=who.session,
                role=ROLE_BRIDGE,
                server=server,
                pid=pid,
                heartbeat_ttl_seconds=settings.ttl_seconds,
                runtime_version=__version__,
            )
            epoch = registration.fencing_epoch
        supervisor = WorkerHeartbeatSupervisor(
            registry,
            worker_identity=identity,
            fencing_epoch=epoch,
            ttl_seconds=settings.ttl_seconds,
            session_id=who.session,
            client_name=client,
            pid=pid,
            interval_seconds=settings.interval_seconds,
            on_refused=on_fenced,
        )
        supervisor.start()
        return cls(registry, identity, supervisor)

    def detach(self) -> None:
        fenced = self.supervisor.stopped_reason is not None
        self.supervisor.stop("bridge exiting")
        if not fenced:
            # Still ours: remove it. A fenced row belongs to the newer bridge.
            self.registry.remove(self.identity)
        self.registry.close()
