"""The worker registry: one sqlite file that bridges and the tray share.

Every process attached on behalf of a client session (each ``mcp-tray
connect`` bridge, each direct HTTP session) is one row, keyed by its worker
identity. Several processes write the file at once, so:

- WAL journal, so readers (the tray's Workers tab) never block writers;
- every write runs in ``BEGIN IMMEDIATE``: the write lock is taken before
  the row is read, so a read-then-write can never fail half-way with a busy
  snapshot that the busy handler does not retry;
- a busy timeout, so a writer waits its turn instead of failing;
- the schema version lives in ``PRAGMA user_version`` and is migrated
  forward on open; a file that is not sqlite, not ours, or from a newer
  mcp-tray raises ``RegistryFileError`` and is never touched.

Refusals (wrong fencing epoch, expectation drift, no row) are outcomes, not
exceptions. A sqlite error that outlives the busy timeout ("database is
locked") does raise: it is transient and the caller (the heartbeat
supervisor) counts it and tries again.

The API is synchronous and thread-safe (one connection behind a lock); the
async core calls it through ``asyncio.to_thread``. Every method takes
``now`` so tests drive time by hand. Tested in tests/test_registry.py and,
across real processes, tests/test_registry_multiprocess.py.
"""

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal, NamedTuple

import psutil

from core import __version__
from core.base.clock import WallClock, utc_now
from core.registry.identity import normalize_client_name

#: The schema this code writes. Bump it only together with a new migration.
SCHEMA_VERSION: Final = 1
#: How long a writer waits for another process's write lock before sqlite
#: reports "database is locked". A write holds the lock for well under a
#: millisecond, so five seconds only runs out when a process is wedged.
BUSY_TIMEOUT_SECONDS: Final = 5.0
#: Default liveness window. Beats go every TTL/3 (see core.registry.heartbeat), so a
#: worker can miss two beats and stay live, and a dead one is noticed within
#: a minute, which is how long the Workers tab may show a ghost.
DEFAULT_HEARTBEAT_TTL_SECONDS: Final = 60.0
#: The epoch ``register`` hands out; ``claim_generation`` counts up from it.
INITIAL_FENCING_EPOCH: Final = 1

#: Blocker kinds; consumers switch on these literals, so never rename them.
BLOCKER_FENCED: Final = "fenced"
BLOCKER_NO_ATTACHMENT: Final = "session_attachment_missing"

OWNED: Final = "owned"
UNOWNED: Final = "unowned"

#: Roles a worker registers with.
ROLE_BRIDGE: Final = "bridge"
ROLE_HTTP_SESSION: Final = "http-session"

PidProbe = Callable[[int], bool]

#: Migration i moves a file from schema i to i + 1. Each runs inside the
#: opener's ``BEGIN IMMEDIATE`` together with the ``user_version`` bump.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE workers (
            worker_identity TEXT PRIMARY KEY,
            client_name TEXT NOT NULL,
            client_instance TEXT,
            session_id TEXT NOT NULL,
            generation_id TEXT,
            role TEXT NOT NULL,
            server TEXT,
            pid INTEGER,
            started_at TEXT NOT NULL,
            last_heartbeat_at TEXT NOT NULL,
            heartbeat_ttl_seconds REAL NOT NULL,
            fencing_epoch INTEGER NOT NULL,
            runtime_version TEXT,
            beats INTEGER NOT NULL DEFAULT 0,
            fenced_at TEXT
        )
        """,
        "CREATE INDEX workers_by_session ON workers (session_id)",
    ),
)

_COLUMNS: Final = (
    "worker_identity, client_name, client_instance, session_id, generation_id, role, "
    "server, pid, started_at, last_heartbeat_at, heartbeat_ttl_seconds, fencing_epoch, "
    "runtime_version, beats, fenced_at"
)

_OUR_TABLES: Final = frozenset({"workers"})


class RegistryFileError(Exception):
    """The registry file cannot be used as it is; it was left untouched."""

    def __init__(self, path: Path, problem: str, remedy: str) -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        super().__init__(
            f"worker registry {str(path)!r} {problem}. mcp-tray left it untouched. {remedy}"
        )


_MOVE_IT: Final = "To fix: "


def _move_aside(path: Path) -> str:
    return (
        f"move it aside (for example: mv '{path}' '{path}.bak') and mcp-tray will create "
        "a fresh registry on its next start"
    )


def _stamp(moment: datetime) -> str:
    """Fixed-width UTC text, so text order is time order in SQL and by eye."""
    if moment.tzinfo is None:
        raise ValueError(f"registry times must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


def default_pid_probe(pid: int) -> bool:
    """True when a process with ``pid`` exists (it may be a recycled pid)."""
    return psutil.pid_exists(pid)


@dataclass(frozen=True)
class WorkerRecord:
    """One row, as the registry holds it (client name already normalised)."""

    worker_identity: str
    client_name: str
    client_instance: str | None
    session_id: str
    generation_id: str | None
    role: str
    server: str | None
    pid: int | None
    started_at: datetime
    last_heartbeat_at: datetime
    heartbeat_ttl_seconds: float
    fencing_epoch: int
    runtime_version: str | None
    #: Renewals since registration; lets tests prove no beat was lost.
    beats: int
    #: When a holder with a stale epoch or drifted expectations last tried
    #: to renew this row; None if that never happened.
    fenced_at: datetime | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "WorkerRecord":
        fenced_at = row["fenced_at"]
        return cls(
            worker_identity=row["worker_identity"],
            client_name=row["client_name"],
            client_instance=row["client_instance"],
            session_id=row["session_id"],
            generation_id=row["generation_id"],
            role=row["role"],
            server=row["server"],
            pid=row["pid"],
            started_at=_parse(row["started_at"]),
            last_heartbeat_at=_parse(row["last_heartbeat_at"]),
            heartbeat_ttl_seconds=float(row["heartbeat_ttl_seconds"]),
            fencing_epoch=int(row["fencing_epoch"]),
            runtime_version=row["runtime_version"],
            beats=int(row["beats"]),
            fenced_at=None if fenced_at is None else _parse(fenced_at),
        )


class Drift(NamedTuple):
    """One field where what a caller presented differs from the row."""

    field: str
    recorded: str | int | None
    presented: str | int | None

    def __str__(self) -> str:
        return f"{self.field}: recorded {self.recorded!r}, presented {self.presented!r}"


@dataclass(frozen=True)
class Registration:
    """What ``register`` did. ``created`` is False when the row existed."""

    worker_identity: str
    fencing_epoch: int
    created: bool
    record: WorkerRecord


@dataclass(frozen=True)
class HeartbeatOutcome:
    """One renewal attempt. ``renewed`` False always comes with reasons."""

    renewed: bool
    worker_identity: str
    blocker_kind: str | None = None
    reasons: tuple[str, ...] = ()
    expectation_drift: tuple[Drift, ...] = ()
    #: The attempt failed for a reason that may pass (e.g. "database is
    #: locked"); beating should go on.
    transient: bool = False
    #: False when nothing reached the registry (a stopped supervisor).
    beat_attempted: bool = True
    last_heartbeat_at: datetime | None = None

    def __str__(self) -> str:
        if self.renewed:
            return f"worker {self.worker_identity} renewed"
        kind = "transient failure" if self.transient else (self.blocker_kind or "not renewed")
        return f"worker {self.worker_identity} not renewed ({kind}): " + "; ".join(self.reasons)


@dataclass(frozen=True)
class GenerationClaim:
    """What ``claim_generation`` did; the old epoch is fenced from now on."""

    claimed: bool
    worker_identity: str
    fencing_epoch: int | None
    previous_epoch: int | None
    blocker_kind: str | None = None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Liveness:
    """Heartbeat age against the TTL, and the pid when it is known."""

    live: bool
    heartbeat_fresh: bool
    heartbeat_age_seconds: float
    ttl_seconds: float
    #: None when the row has no pid or nobody could tell.
    pid_alive: bool | None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ownership:
    """Whether a session is held by a live, unfenced worker."""

    session_id: str
    ownership: Literal["owned", "unowned"]
    holder: str | None = None
    blocker_kind: str | None = None
    reasons: tuple[str, ...] = ()
    expectation_drift: tuple[Drift, ...] = ()

    @property
    def owned(self) -> bool:
        return self.ownership == OWNED


def liveness(
    record: WorkerRecord,
    *,
    now: datetime,
    pid_alive: bool | None = None,
    pid_probe: PidProbe | None = None,
) -> Liveness:
    """Live = heartbeat age <= TTL, and the pid alive when it is known.

    A live pid never keeps a silent row live: the pid may have been recycled,
    or the process may be wedged and no longer beating.
    """
    age = (now - record.last_heartbeat_at).total_seconds()
    ttl = record.heartbeat_ttl_seconds
    fresh = age <= ttl
    if pid_alive is None and record.pid is not None:
        pid_alive = (pid_probe or default_pid_probe)(record.pid)
    reasons: list[str] = []
    if not fresh:
        reasons.append(f"last heartbeat {age:.1f}s ago, beyond the {ttl:g}s TTL")
    if pid_alive is False:
        reasons.append(f"pid {record.pid} is not running")
    return Liveness(
        live=fresh and pid_alive is not False,
        heartbeat_fresh=fresh,
        heartbeat_age_seconds=age,
        ttl_seconds=ttl,
        pid_alive=pid_alive,
        reasons=tuple(reasons),
    )


def _read_schema_version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        }
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
            raise RegistryFileError(
                path, f"is not a sqlite database ({exc})", f"{_MOVE_IT}{_move_aside(path)}."
            ) from exc
        raise
    if version > SCHEMA_VERSION:
        raise RegistryFileError(
            path,
            f"was written by a newer mcp-tray (registry schema {version}; "
            f"this mcp-tray {__version__} reads up to schema {SCHEMA_VERSION})",
            f"Run the newer mcp-tray, or {_move_aside(path)} (its worker rows are then lost).",
        )
    if version == 0 and tables - _OUR_TABLES:
        raise RegistryFileError(
            path,
            f"is a sqlite database but not an mcp-tray registry (tables: {sorted(tables)})",
            f"{_MOVE_IT}{_move_aside(path)}.",
        )
    return version


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode (isolation_level=None): transactions are explicit,
        # so every write can say BEGIN IMMEDIATE. check_same_thread=False
        # because the heartbeat thread shares it, serialised by our lock.
        return sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as exc:
        raise RegistryFileError(
            path, f"cannot be opened ({exc})", "Check that its folder exists and is writable."
        ) from exc


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
        #: Commits through this connection (PRAGMA data_version counts only others').
        self._writes = 0
        conn = _connect(self.path, busy_timeout)
        try:
            version = _read_schema_version(conn, self.path)
            # Checked before this line so a foreign or newer file is never
            # converted to WAL. Both settings persist or apply per connection.
            conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL is safe from corruption in WAL mode; it may lose the last
            # beats on power loss, which the next beat repairs. FULL would
            # fsync every beat and cap the fleet at disk latency.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.row_factory = sqlite3.Row
            if version < SCHEMA_VERSION:
                self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "WorkerRegistry":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def change_stamp(self) -> tuple[int, int]:
        """Differs from the last one whenever anyone committed since: lets a
        reader skip re-reading an unchanged file (one cheap PRAGMA)."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0]), self._writes

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have
            # migrated the file between our first look and now.
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    conn.execute(statement)
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; rolled back on any error."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
                self._writes += 1
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _now(self, now: datetime | None) -> datetime:
        return self.wall_clock() if now is None else now

    @staticmethod
    def _select(conn: sqlite3.Connection, worker_identity: str) -> WorkerRecord | None:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM workers WHERE worker_identity = ?", (worker_identity,)
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
        if not heartbeat_ttl_seconds > 0:
            raise ValueError(f"heartbeat_ttl_seconds must be > 0, got {heartbeat_ttl_seconds!r}")
        stamp = _stamp(self._now(now))
        client = normalize_client_name(client_name)
        values = (
            client_instance,
            generation_id,
            role,
            server,
            pid,
            heartbeat_ttl_seconds,
            runtime_version,
            stamp,
        )
        with self._write() as conn:
            existing = self._select(conn, worker_identity)
            if existing is None:
                conn.execute(
                    "INSERT INTO workers (client_instance, generation_id, role, server, pid, "
                    "heartbeat_ttl_seconds, runtime_version, last_heartbeat_at, "
                    "worker_identity, client_name, session_id, started_at, fencing_epoch) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, worker_identity, client, session_id, stamp, INITIAL_FENCING_EPOCH),
                )
            else:
                conn.execute(
                    "UPDATE workers SET client_instance = ?, generation_id = ?, role = ?, "
                    "server = ?, pid = ?, heartbeat_ttl_seconds = ?, runtime_version = ?, "
                    "last_heartbeat_at = ? WHERE worker_identity = ?",
                    (*values, worker_identity),
                )
            record = self._select(conn, worker_identity)
        assert record is not None  # written in this very transaction
        return Registration(worker_identity, record.fencing_epoch, existing is None, record)

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

        A missing row is refused with ``BLOCKER_NO_ATTACHMENT``; a wrong epoch
        or any drift with ``BLOCKER_FENCED`` and the drifts listed. Omitted
        expectations are not checked. Client names compare normalised.
        """
        moment = self._now(now)
        with self._write() as conn:
            record = self._select(conn, worker_identity)
            if record is None:
                return HeartbeatOutcome(
                    renewed=False,
                    worker_identity=worker_identity,
                    blocker_kind=BLOCKER_NO_ATTACHMENT,
                    reasons=(f"no registration for worker {worker_identity}",),
                )
            drift = _drift(
                record,
                fencing_epoch=fencing_epoch,
                session_id=expected_session_id,
                generation_id=expected_generation_id,
                client_name=expected_client_name,
                pid=expected_pid,
            )
            if drift:
                # Recorded so the Workers tab can tell "fenced" from "stale".
                conn.execute(
                    "UPDATE workers SET fenced_at = ? WHERE worker_identity = ?",
                    (_stamp(moment), worker_identity),
                )
                return HeartbeatOutcome(
                    renewed=False,
                    worker_identity=worker_identity,
                    blocker_kind=BLOCKER_FENCED,
                    reasons=tuple(f"fenced: {item}" for item in drift),
                    expectation_drift=drift,
                )
            conn.execute(
                "UPDATE workers SET last_heartbeat_at = ?, beats = beats + 1 "
                "WHERE worker_identity = ?",
                (_stamp(moment), worker_identity),
            )
        return HeartbeatOutcome(
            renewed=True, worker_identity=worker_identity, last_heartbeat_at=moment
        )

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
        stamp = _stamp(self._now(now))
        with self._write() as conn:
            record = self._select(conn, worker_identity)
            if record is None:
                return GenerationClaim(
                    claimed=False,
                    worker_identity=worker_identity,
                    fencing_epoch=None,
                    previous_epoch=None,
                    blocker_kind=BLOCKER_NO_ATTACHMENT,
                    reasons=(f"no registration for worker {worker_identity}",),
                )
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
        with self._write() as conn:
            cursor = conn.execute(
                "DELETE FROM workers WHERE worker_identity = ?", (worker_identity,)
            )
            return cursor.rowcount > 0

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
                    WorkerRecord.from_row, conn.execute(f"SELECT {_COLUMNS} FROM workers")
                )
                if (moment - record.last_heartbeat_at).total_seconds()
                > record.heartbeat_ttl_seconds + grace_seconds
            ]
            conn.executemany(
                "DELETE FROM workers WHERE worker_identity = ?", [(i,) for i in expired]
            )
        return len(expired)

    # -- reads -------------------------------------------------------------

    def get(self, worker_identity: str) -> WorkerRecord | None:
        with self._lock:
            return self._select(self._conn, worker_identity)

    def list_workers(self, *, session_id: str | None = None) -> tuple[WorkerRecord, ...]:
        """All rows (or one session's), oldest first."""
        query = f"SELECT {_COLUMNS} FROM workers"
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

        With ``worker_identity`` the question is about that worker: its row
        must hold the session with the presented epoch and generation, or it
        is ``fenced``; a missing or expired row is ``session_attachment_missing``.
        Without it, any live row of the session owns it, unless a
        ``generation_id`` is presented and no live row carries it (fenced).
        """
        moment = self._now(now)
        if worker_identity is not None:
            return self._assess_worker(
                session_id, worker_identity, fencing_epoch, generation_id, moment, pid_probe
            )
        live = [
            record
            for record in self.list_workers(session_id=session_id)
            if liveness(record, now=moment, pid_probe=pid_probe).live
        ]
        if not live:
            return Ownership(
                session_id,
                UNOWNED,
                blocker_kind=BLOCKER_NO_ATTACHMENT,
                reasons=(f"no live worker holds session {session_id}",),
            )
        holders = [r for r in live if generation_id is None or r.generation_id == generation_id]
        if not holders:
            drift = tuple(Drift("generation_id", r.generation_id, generation_id) for r in live)
            return Ownership(
                session_id,
                UNOWNED,
                blocker_kind=BLOCKER_FENCED,
                reasons=tuple(f"fenced: {item}" for item in drift),
                expectation_drift=drift,
            )
        holder = max(holders, key=lambda r: (r.fencing_epoch, r.last_heartbeat_at))
        return Ownership(session_id, OWNED, holder=holder.worker_identity)

    def _assess_worker(
        self,
        session_id: str,
        worker_identity: str,
        fencing_epoch: int | None,
        generation_id: str | None,
        moment: datetime,
        pid_probe: PidProbe | None,
    ) -> Ownership:
        record = self.get(worker_identity)
        if record is None:
            return Ownership(
                session_id,
                UNOWNED,
                blocker_kind=BLOCKER_NO_ATTACHMENT,
                reasons=(f"no registration for worker {worker_identity}",),
            )
        drift = _drift(
            record, fencing_epoch=fencing_epoch, session_id=session_id, generation_id=generation_id
        )
        if drift:
            return Ownership(
                session_id,
                UNOWNED,
                blocker_kind=BLOCKER_FENCED,
                reasons=tuple(f"fenced: {item}" for item in drift),
                expectation_drift=drift,
            )
        state = liveness(record, now=moment, pid_probe=pid_probe)
        if not state.live:
            return Ownership(
                session_id,
                UNOWNED,
                blocker_kind=BLOCKER_NO_ATTACHMENT,
                reasons=state.reasons,
            )
        return Ownership(session_id, OWNED, holder=worker_identity)


def _drift(
    record: WorkerRecord,
    *,
    fencing_epoch: int | None = None,
    session_id: str | None = None,
    generation_id: str | None = None,
    client_name: str | None = None,
    pid: int | None = None,
) -> tuple[Drift, ...]:
    """Every presented value that differs from the row; None is not checked."""
    found: list[Drift] = []
    if fencing_epoch is not None and fencing_epoch != record.fencing_epoch:
        found.append(Drift("fencing_epoch", record.fencing_epoch, fencing_epoch))
    if session_id is not None and session_id != record.session_id:
        found.append(Drift("session_id", record.session_id, session_id))
    if generation_id is not None and generation_id != record.generation_id:
        found.append(Drift("generation_id", record.generation_id, generation_id))
    if client_name is not None:
        presented = normalize_client_name(client_name)
        if presented != record.client_name:
            found.append(Drift("client_name", record.client_name, presented))
    if pid is not None and pid != record.pid:
        found.append(Drift("pid", record.pid, pid))
    return tuple(found)
