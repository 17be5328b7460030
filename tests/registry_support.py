"""Helpers shared by the registry and heartbeat tests (not a test module)."""

from core.registry.identity import worker_identity
from core.registry.store import Registration, WorkerRegistry
from tests.fakes import FakeWallClock

#: The TTL of the synthetic workers: long, so only a fake clock reaches it.
TTL = 900.0


def alive(_pid: int) -> bool:
    """Pid probe for synthetic pids: they stand for running processes."""
    return True


def attach(
    registry: WorkerRegistry,
    clock: FakeWallClock,
    *,
    client: str = "claude-code",
    session: str = "sess-0001",
    generation: str = "gen-0001",
    pid: int | None = 4242,
    ttl: float = TTL,
) -> Registration:
    """Register one synthetic worker that started at ``clock.now``."""
    return registry.register(
        worker_identity=worker_identity(client, session, clock.now),
        client_name=client,
        client_instance=f"inst-{session}",
        session_id=session,
        generation_id=generation,
        role="bridge",
        server="files",
        pid=pid,
        heartbeat_ttl_seconds=ttl,
    )
