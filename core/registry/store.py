"""The worker registry: one sqlite file that bridges and the tray share.

Every process attached on behalf of a client session (each ``mcp-tray
connect`` bridge, each direct HTTP session) is one row, keyed by its worker
identity. ``WorkerRegistry`` holds the reads and writes; the file itself
(schema, migrations, the checks before opening) is core/registry/schema.py,
and the rows and outcomes it returns are core/registry/records.py.
Several processes write the file at once, so:

- WAL journal, so readers (the tray's Workers tab) never block writers;
- every write runs in ``BEGIN IMMEDIATE``: the write lock is taken before
  the row is read, so a read-then-write can never fail half-way with a busy
  snapshot that the busy handler does not retry;
- a busy timeout, so a writer waits its turn instead of failing.

Refusals (wrong fencing epoch, expectation drift, no row) are outcomes, not
exceptions. A sqlite error that outlives the busy timeout ("database is
locked") does raise: it is transient and the caller (the heartbeat
supervisor) counts it and tries again.

The API is synchronous and thread-safe (one connection behind a lock); the
async core calls it through ``asyncio.to_thread``. Every method takes
``now`` so tests drive time by hand. Tested in tests/registry/test_registry.py and,
across real processes, tests/registry/test_registry_multiprocess.py.
"""

import dataclasses
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Concatenate, Final, ParamSpec, TypeVar

from core import __version__
from core.base.clock import WallClock, utc_now
from core.base.errors import RegistryFileError
from core.registry.identity import normalize_client_name
from core.registry.records import (
    DEFAULT_HEARTBEAT_TTL_SECONDS,
    ROLE_BRIDGE,
    GenerationClaim,
    HeartbeatOutcome,
    Liveness,
    NewWorker,
    Ownership,
    PidProbe,
    Registration,
    WorkerRecord,
    expectation_drift,
    liveness,
    session_ownership,
    worker_ownership,
)
from core.registry.schema import (
    BUSY_TIMEOUT_SECONDS,
    WORKER_COLUMNS,
    damaged,
    open_registry_file,
    stored_time,
)

# Re-exported for callers that still import them from here; their homes are
# core.registry.records and core.base.errors.
__all__ = [
    "INITIAL_FENCING_EPOCH",
    "ROLE_BRIDGE",
    "HeartbeatOutcome",
    "RegistryFileError",
    "WorkerRegistry",
]

#: The epoch ``register`` hands out; ``claim_generation`` counts up from it.
INITIAL_FENCING_EPOCH: Final = 1

P = ParamSpec("P")
R = TypeVar("R")


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _damage_is_a_file_error(
    method: "Callable[Concatenate[WorkerRegistry, P], R]",
) -> "Callable[Concatenate[WorkerRegistry, P], R]":
    """A file sqlite finds damaged mid-use says so as ``RegistryFileError`` (path and fix),
    like one found damaged at open; other sqlite errors (a busy file) stay as they are."""

    @functools.wraps(method)
    def guarded(registry: "WorkerRegistry", /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(registry, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            problem = damaged(registry.path, exc)
            if problem is None:
                raise
            raise problem from exc

    return guarded


class WorkerRegistry:
    """Register, renew, fence and inspect workers in one sqlite file."""

    def __init__(
        self,
        path: Path | str,
        *,
        wall_clock: WallClock = utc_now,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
    ) -> None:
        self.path = Path(path)
        #: Where ``now`` comes from when a method is not given one.
        self.wall_clock = wall_clock
        self._lock = threading.RLock()
        self._conn = open_registry_file(self.path, busy_timeout)
        self._file = _file_identity(self.path)

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def replaced(self) -> bool:
        """The path no longer names the file this registry opened (deleted, or moved
        aside and recreated): the connection still writes to the old one."""
        return _file_identity(self.path) != self._file

    def __enter__(self) -> "WorkerRegistry":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @_damage_is_a_file_error
    def others_version(self) -> int:
        """Moves whenever another connection (a bridge, the CLI) committed, never
        for this one's own commits, whose effect its caller knows: lets a reader
        that applies its own writes to a copy skip re-reading (one cheap PRAGMA)."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; rolled back on any error."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _now(self, now: datetime | None) -> datetime:
        return self.wall_clock() if now is None else now

    @staticmethod
    def _select(conn: sqlite3.Connection, worker_identity: str) -> WorkerRecord | None:
        row = conn.execute(
            f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_identity = ?", (worker_identity,)
        ).fetchone()
        return None if row is None else WorkerRecord.from_row(row)

    # -- writes ------------------------------------------------------------

    def register(
        self,
        *,
        worker_identity: str,
        client_name: str,
        session_id: str,
        role: str,
        generation_id: str | None = None,
        client_instance: str | None = None,
        server: str | None = None,
        pid: int | None = None,
        heartbeat_ttl_seconds: float = DEFAULT_HEARTBEAT_TTL_SECONDS,
        runtime_version: str | None = __version__,
        now: datetime | None = None,
    ) -> Registration:
        """Insert the row, stamping started_at = last_heartbeat_at = now.

        Registering an identity that already has a row updates that row
        (never a second one), refreshes its heartbeat and keeps its
        started_at and fencing epoch, which it returns.
        """
        worker = NewWorker(
            worker_identity=worker_identity,
            client_name=client_name,
            session_id=session_id,
            role=role,
            server=server,
            pid=pid,
            heartbeat_ttl_seconds=heartbeat_ttl_seconds,
            runtime_version=runtime_version,
            generation_id=generation_id,
            client_instance=client_instance,
        )
        return self.register_many([worker], now=now)[0]

    @_damage_is_a_file_error
    def register_many(
        self, workers: Iterable[NewWorker], *, now: datetime | None = None
    ) -> list[Registration]:
        """``register`` for each of ``workers``, in one transaction: the tray
        registers a burst of HTTP sessions' rows at once, one commit for all."""
        workers = list(workers)
        for worker in workers:
            if not worker.heartbeat_ttl_seconds > 0:
                raise ValueError(
                    f"heartbeat_ttl_seconds must be > 0, got {worker.heartbeat_ttl_seconds!r}"
                )
        stamp = stored_time(self._now(now))
        with self._write() as conn:
            return [self._upsert(conn, worker, stamp) for worker in workers]

    def _upsert(self, conn: sqlite3.Connection, worker: NewWorker, stamp: str) -> Registration:
        identity = worker.worker_identity
        values = (
            worker.client_instance,
            worker.generation_id,
            worker.role,
            worker.server,
            worker.pid,
            worker.heartbeat_ttl_seconds,
            worker.runtime_version,
            stamp,
        )
        existing = self._select(conn, identity)
        if existing is None:
            client = normalize_client_name(worker.client_name)
            conn.execute(
                "INSERT INTO workers (client_instance, generation_id, role, server, pid, "
                "heartbeat_ttl_seconds, runtime_version, last_heartbeat_at, "
                "worker_identity, client_name, session_id, started_at, fencing_epoch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, identity, client, worker.session_id, stamp, INITIAL_FENCING_EPOCH),
            )
        else:
            conn.execute(
                "UPDATE workers SET client_instance = ?, generation_id = ?, role = ?, "
                "server = ?, pid = ?, heartbeat_ttl_seconds = ?, runtime_version = ?, "
                "last_heartbeat_at = ? WHERE worker_identity = ?",
                (*values, identity),
            )
        record = self._select(conn, identity)
        assert record is not None  # written in this very transaction
        return Registration(identity, record.fencing_epoch, existing is None, record)

    @_damage_is_a_file_error
    def heartbeat(
        self,
        worker_identity: str,
        fencing_epoch: int,
        *,
        expected_session_id: str | None = None,
        expected_generation_id: str | None = None,
        expected_client_name: str | None = None,
        expected_pid: int | None = None,
        now: datetime | None = None,
    ) -> HeartbeatOutcome:
        """Renew the row if ``fencing_epoch`` and every given expectation match.

        A missing row (or a file deleted or replaced since it was opened) is
        refused with ``BLOCKER_NO_ATTACHMENT``; a wrong epoch
        or any drift with ``BLOCKER_FENCED`` and the drifts listed. Omitted
        expectations are not checked. Client names compare normalised.
        """
        moment = self._now(now)
        if self.replaced():
            # Renewing a row in a file nobody else can see any more would keep
            # the worker invisible forever: say "no row", so it registers again.
            return HeartbeatOutcome.missing(worker_identity)
        with self._write() as conn:
            return self._renew(
                conn,
                worker_identity,
                moment,
                fencing_epoch=fencing_epoch,
                session_id=expected_session_id,
                generation_id=expected_generation_id,
                client_name=expected_client_name,
                pid=expected_pid,
            )

    @_damage_is_a_file_error
    def heartbeat_many(
        self, workers: Iterable[tuple[str, int]], *, now: datetime | None = None
    ) -> list[HeartbeatOutcome]:
        """``heartbeat`` for every (worker identity, fencing epoch), in one transaction:
        the tray renews all its HTTP sessions' rows at once, and a thousand
        commits would cost a thousand times what one does."""
        moment = self._now(now)
        workers = list(workers)
        if self.replaced():
            return [HeartbeatOutcome.missing(identity) for identity, _ in workers]
        stamp = stored_time(moment)
        renewed = HeartbeatOutcome(renewed=True, worker_identity="", last_heartbeat_at=moment)
        with self._write() as conn:
            # Every row still held at its epoch, in one statement (the common case)...
            before = conn.total_changes
            conn.executemany(
                "UPDATE workers SET last_heartbeat_at = ?, beats = beats + 1 "
                "WHERE worker_identity = ? AND fencing_epoch = ?",
                [(stamp, identity, epoch) for identity, epoch in workers],
            )
            if conn.total_changes - before == len(workers):
                return [dataclasses.replace(renewed, worker_identity=i) for i, _ in workers]
            # ...and the refusals told apart row by row, as ``heartbeat`` does.
            held = dict(
                conn.execute(
                    "SELECT worker_identity, fencing_epoch FROM workers WHERE last_heartbeat_at = ?",
                    (stamp,),
                ).fetchall()
            )
            return [
                dataclasses.replace(renewed, worker_identity=identity)
                if held.get(identity) == epoch
                else self._renew(conn, identity, moment, fencing_epoch=epoch)
                for identity, epoch in workers
            ]

    def _renew(
        self,
        conn: sqlite3.Connection,
        worker_identity: str,
        moment: datetime,
        *,
        fencing_epoch: int,
        session_id: str | None = None,
        generation_id: str | None = None,
        client_name: str | None = None,
        pid: int | None = None,
    ) -> HeartbeatOutcome:
        record = self._select(conn, worker_identity)
        if record is None:
            return HeartbeatOutcome.missing(worker_identity)
        drift = expectation_drift(
            record,
            fencing_epoch=fencing_epoch,
            session_id=session_id,
            generation_id=generation_id,
            client_name=client_name,
            pid=pid,
        )
        if drift:
            # Recorded so the Workers tab can tell "fenced" from "stale".
            conn.execute(
                "UPDATE workers SET fenced_at = ? WHERE worker_identity = ?",
                (stored_time(moment), worker_identity),
            )
            return HeartbeatOutcome.fenced(worker_identity, drift)
        conn.execute(
            "UPDATE workers SET last_heartbeat_at = ?, beats = beats + 1 WHERE worker_identity = ?",
            (stored_time(moment), worker_identity),
        )
        return HeartbeatOutcome(
            renewed=True, worker_identity=worker_identity, last_heartbeat_at=moment
        )

    @_damage_is_a_file_error
    def claim_generation(
        self,
        worker_identity: str,
        *,
        generation_id: str | None = None,
        pid: int | None = None,
        now: datetime | None = None,
    ) -> GenerationClaim:
        """Bump the fencing epoch; whoever held the old one is fenced from now.

        The claimer becomes the holder: its heartbeat is refreshed and, when
        given, the generation and pid are replaced. Nothing ever hands the new
        epoch to the previous holder.
        """
        stamp = stored_time(self._now(now))
        with self._write() as conn:
            record = self._select(conn, worker_identity)
            if record is None:
                return GenerationClaim.missing(worker_identity)
            epoch = record.fencing_epoch + 1
            conn.execute(
                "UPDATE workers SET fencing_epoch = ?, last_heartbeat_at = ?, "
                "generation_id = COALESCE(?, generation_id), pid = COALESCE(?, pid) "
                "WHERE worker_identity = ?",
                (epoch, stamp, generation_id, pid, worker_identity),
            )
        return GenerationClaim(True, worker_identity, epoch, record.fencing_epoch)

    def remove(self, worker_identity: str) -> bool:
        """Delete the row; True when there was one."""
        return self.remove_many([worker_identity]) > 0

    @_damage_is_a_file_error
    def remove_many(self, worker_identities: Iterable[str]) -> int:
        """Delete these rows in one transaction; how many there were."""
        with self._write() as conn:
            cursor = conn.executemany(
                "DELETE FROM workers WHERE worker_identity = ?", [(i,) for i in worker_identities]
            )
            return cursor.rowcount

    @_damage_is_a_file_error
    def remove_expired(self, *, grace_seconds: float, now: datetime | None = None) -> int:
        """Delete rows silent for longer than TTL + ``grace_seconds``.

        Crashed bridges never remove their own rows; without this the file
        and the Workers tab grow forever. Returns how many rows went.
        """
        moment = self._now(now)
        with self._write() as conn:
            expired = [
                record.worker_identity
                for record in map(
                    WorkerRecord.from_row, conn.execute(f"SELECT {WORKER_COLUMNS} FROM workers")
                )
                if (moment - record.last_heartbeat_at).total_seconds()
                > record.heartbeat_ttl_seconds + grace_seconds
            ]
            conn.executemany(
                "DELETE FROM workers WHERE worker_identity = ?", [(i,) for i in expired]
            )
        return len(expired)

    # -- reads -------------------------------------------------------------

    @_damage_is_a_file_error
    def get(self, worker_identity: str) -> WorkerRecord | None:
        with self._lock:
            return self._select(self._conn, worker_identity)

    @_damage_is_a_file_error
    def list_workers(self, *, session_id: str | None = None) -> tuple[WorkerRecord, ...]:
        """All rows (or one session's), oldest first."""
        query = f"SELECT {WORKER_COLUMNS} FROM workers"
        params: tuple[str, ...] = ()
        if session_id is not None:
            query += " WHERE session_id = ?"
            params = (session_id,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY started_at, worker_identity", params)
            return tuple(WorkerRecord.from_row(row) for row in rows)

    def is_live(
        self,
        record: WorkerRecord,
        *,
        now: datetime | None = None,
        pid_alive: bool | None = None,
        pid_probe: PidProbe | None = None,
    ) -> Liveness:
        """See ``liveness``; ``now`` defaults to the registry's wall clock."""
        return liveness(record, now=self._now(now), pid_alive=pid_alive, pid_probe=pid_probe)

    @_damage_is_a_file_error
    def assess_ownership(
        self,
        session_id: str,
        *,
        worker_identity: str | None = None,
        fencing_epoch: int | None = None,
        generation_id: str | None = None,
        now: datetime | None = None,
        pid_probe: PidProbe | None = None,
    ) -> Ownership:
        """Is ``session_id`` held by a live, unfenced worker?

        With ``worker_identity`` the question is about that worker's row (see
        ``worker_ownership``); without it, about every row of the session (see
        ``session_ownership``). ``now`` defaults to the registry's wall clock.
        """
        moment = self._now(now)
        if worker_identity is not None:
            return worker_ownership(
                session_id,
                worker_identity,
                self.get(worker_identity),
                fencing_epoch=fencing_epoch,
                generation_id=generation_id,
                now=moment,
                pid_probe=pid_probe,
            )
        return session_ownership(
            session_id,
            self.list_workers(session_id=session_id),
            generation_id=generation_id,
            now=moment,
            pid_probe=pid_probe,
        )
