"""What the worker registry holds and answers: rows, outcomes, liveness.

- ``WorkerRecord``: one row as read back (client name already normalised);
  ``NewWorker``: one row to write.
- Outcomes of the writes and questions: ``Registration``, ``HeartbeatOutcome``,
  ``GenerationClaim``, ``Ownership``; refusals carry a blocker kind
  (``BLOCKER_FENCED``, ``BLOCKER_NO_ATTACHMENT``) and the ``Drift`` found.
- ``liveness``: heartbeat age against the TTL, and the pid when known.
- ``worker_ownership`` / ``session_ownership``: the verdicts behind
  ``WorkerRegistry.assess_ownership``, from rows already read.
- The roles a worker registers with, and the default TTL.

Plain data and pure functions: no sqlite here (core/registry/schema.py
has the file, core/registry/store.py the reads and writes).
"""

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, NamedTuple

import psutil

from core.registry.identity import normalize_client_name

#: Default liveness window. Beats go every TTL/3 (see core.registry.heartbeat), so a
#: worker can miss two beats and stay live, and a dead one is noticed within
#: a minute, which is how long the Workers tab may show a ghost.
DEFAULT_HEARTBEAT_TTL_SECONDS: Final = 60.0

#: Blocker kinds; consumers switch on these literals, so never rename them.
BLOCKER_FENCED: Final = "fenced"
BLOCKER_NO_ATTACHMENT: Final = "session_attachment_missing"

OWNED: Final = "owned"
UNOWNED: Final = "unowned"

#: Roles a worker registers with.
ROLE_BRIDGE: Final = "bridge"
ROLE_HTTP_SESSION: Final = "http-session"

#: Tells whether a pid is running (injected in tests: synthetic pids).
PidProbe = Callable[[int], bool]


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

    @property
    def refused_since_renewal(self) -> bool:
        """A holder was refused after the row's last renewal (or claim)."""
        return self.fenced_at is not None and self.fenced_at >= self.last_heartbeat_at

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
            started_at=datetime.fromisoformat(row["started_at"]),
            last_heartbeat_at=datetime.fromisoformat(row["last_heartbeat_at"]),
            heartbeat_ttl_seconds=float(row["heartbeat_ttl_seconds"]),
            fencing_epoch=int(row["fencing_epoch"]),
            runtime_version=row["runtime_version"],
            beats=int(row["beats"]),
            fenced_at=None if fenced_at is None else datetime.fromisoformat(fenced_at),
        )


def _no_registration(worker_identity: str) -> str:
    return f"no registration for worker {worker_identity}"


class Drift(NamedTuple):
    """One field where what a caller presented differs from the row."""

    field: str
    recorded: str | int | None
    presented: str | int | None

    def __str__(self) -> str:
        return f"{self.field}: recorded {self.recorded!r}, presented {self.presented!r}"


def expectation_drift(
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


@dataclass(frozen=True)
class NewWorker:
    """One row to write: ``WorkerRegistry.register``'s arguments, for ``register_many``."""

    worker_identity: str
    client_name: str
    session_id: str
    role: str
    server: str | None = None
    pid: int | None = None
    heartbeat_ttl_seconds: float = DEFAULT_HEARTBEAT_TTL_SECONDS
    runtime_version: str | None = None
    generation_id: str | None = None
    client_instance: str | None = None


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

    @classmethod
    def missing(cls, worker_identity: str) -> "HeartbeatOutcome":
        """Refused: no row to renew."""
        reason = _no_registration(worker_identity)
        return cls(False, worker_identity, BLOCKER_NO_ATTACHMENT, (reason,))

    @classmethod
    def fenced(cls, worker_identity: str, drift: tuple[Drift, ...]) -> "HeartbeatOutcome":
        """Refused: the epoch or an expectation differs from the row."""
        reasons = tuple(f"fenced: {item}" for item in drift)
        return cls(False, worker_identity, BLOCKER_FENCED, reasons, expectation_drift=drift)

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

    @classmethod
    def missing(cls, worker_identity: str) -> "GenerationClaim":
        """Refused: no row to claim."""
        reason = _no_registration(worker_identity)
        return cls(False, worker_identity, None, None, BLOCKER_NO_ATTACHMENT, (reason,))


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


def _unowned(
    session_id: str, blocker_kind: str, reasons: tuple[str, ...], drift: tuple[Drift, ...] = ()
) -> Ownership:
    return Ownership(
        session_id,
        UNOWNED,
        blocker_kind=blocker_kind,
        reasons=reasons,
        expectation_drift=drift,
    )


def _fenced(session_id: str, drift: tuple[Drift, ...]) -> Ownership:
    return _unowned(session_id, BLOCKER_FENCED, tuple(f"fenced: {item}" for item in drift), drift)


def worker_ownership(
    session_id: str,
    worker_identity: str,
    record: WorkerRecord | None,
    *,
    now: datetime,
    fencing_epoch: int | None = None,
    generation_id: str | None = None,
    pid_probe: PidProbe | None = None,
) -> Ownership:
    """Does the worker whose row is ``record`` (None: no row) hold ``session_id``?

    Owned when the row holds the session with the presented epoch and
    generation (None: not checked) and is live. A row that differs is
    ``fenced``, and so is an expired row whose last holder was refused after
    its last renewal. No row, or an otherwise expired one, is
    ``session_attachment_missing``.
    """
    if record is None:
        return _unowned(session_id, BLOCKER_NO_ATTACHMENT, (_no_registration(worker_identity),))
    drift = expectation_drift(
        record, fencing_epoch=fencing_epoch, session_id=session_id, generation_id=generation_id
    )
    if drift:
        return _fenced(session_id, drift)
    state = liveness(record, now=now, pid_probe=pid_probe)
    if state.live:
        return Ownership(session_id, OWNED, holder=worker_identity)
    if record.refused_since_renewal:
        # Its last holder was turned away and nobody renewed it since: the
        # row died fenced (the Workers tab says "fenced" too).
        refused = (
            f"fenced: a holder of worker {worker_identity} was refused at "
            f"{record.fenced_at}, after its last renewal"
        )
        return _unowned(session_id, BLOCKER_FENCED, (refused, *state.reasons))
    return _unowned(session_id, BLOCKER_NO_ATTACHMENT, state.reasons)


def session_ownership(
    session_id: str,
    records: Iterable[WorkerRecord],
    *,
    now: datetime,
    generation_id: str | None = None,
    pid_probe: PidProbe | None = None,
) -> Ownership:
    """Is ``session_id`` held by any live row of ``records`` (the session's rows)?

    The holder is the live row with the highest epoch. When a
    ``generation_id`` is presented and no live row carries it, ``fenced``;
    no live row at all is ``session_attachment_missing``.
    """
    live = [r for r in records if liveness(r, now=now, pid_probe=pid_probe).live]
    if not live:
        return _unowned(
            session_id, BLOCKER_NO_ATTACHMENT, (f"no live worker holds session {session_id}",)
        )
    holders = [r for r in live if generation_id is None or r.generation_id == generation_id]
    if not holders:
        return _fenced(
            session_id, tuple(Drift("generation_id", r.generation_id, generation_id) for r in live)
        )
    holder = max(holders, key=lambda r: (r.fencing_epoch, r.last_heartbeat_at))
    return Ownership(session_id, OWNED, holder=holder.worker_identity)
