"""Helpers shared by the registry and heartbeat tests (not a test module)."""

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from core.registry.identity import worker_identity
from core.registry.records import Registration
from core.registry.store import WorkerRegistry
from tests.support.fakes import FakeWallClock

#: The TTL of the synthetic workers: long, so only a fake clock reaches it.
TTL = 900.0
#: Bound on how long a test waits for the heartbeat thread to act on a tick
#: it was given: a safety net against a hang, never a wait for time to pass.
THREAD_STEP_SECONDS = 10.0

#: The fields of one worker row as ``mcp-tray workers --json`` and the API list
#: them, in order (the CLI's rows add ``status``).
WORKER_FIELDS = (
    "worker_identity",
    "client_name",
    "session_id",
    "generation_id",
    "server",
    "pid",
    "started_at",
    "last_heartbeat_at",
    "heartbeat_age_seconds",
    "ttl_seconds",
    "live",
    "fencing_epoch",
)


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


@contextlib.contextmanager
def impatient_registry(
    path: Path, clock: FakeWallClock
) -> Iterator[tuple[WorkerRegistry, Registration]]:
    """A registry whose busy timeout a held write lock outlasts at once, with one worker attached."""
    with WorkerRegistry(path, wall_clock=clock, busy_timeout=0.05) as registry:
        yield registry, attach(registry, clock)


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """Another connection (as another process would) holds the file's write lock inside."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


class ManualTicker:
    """A heartbeat ``Ticker`` whose intervals pass only when a test says so.

    ``tick()`` lets one interval pass and returns once the beat thread has
    finished the beat it caused and is waiting again (or has stopped), so a
    test reads the outcome right after, without polling.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._released = 0
        self._consumed = 0
        self._waits = 0
        self._interrupted = False

    def wait(self, seconds: float) -> bool:
        with self._cond:
            self._waits += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._interrupted or self._consumed < self._released)
            if self._interrupted:
                return True
            self._consumed += 1
            return False

    def interrupt(self) -> None:
        with self._cond:
            self._interrupted = True
            self._cond.notify_all()

    def tick(self) -> None:
        """One interval passes; back once the thread is waiting for the next."""
        with self._cond:
            self._released += 1
            self._cond.notify_all()
            # Wait k (1-based) takes tick k; its beat is done when wait k+1 starts.
            done = self._cond.wait_for(lambda: self._waits > self._released, THREAD_STEP_SECONDS)
        assert done, "the heartbeat thread did not come back to wait for its next interval"
