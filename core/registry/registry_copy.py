"""The tray's copy of the worker registry: every row, and each client session's verdict.

core.registry.worker_watch keeps it, on the event loop, so that what the
surfaces show (the Workers and Sessions tabs, /api/v1/workers) never needs
a read of the file, and so that one row changing costs one row's work:

- ``learn`` / ``forget``: rows the tray wrote or removed itself, applied as
  the write commits;
- ``take``: verdicts on some sessions' claims, merged;
- ``judge`` (pure, run off the loop) then ``apply``: every row and every
  claim judged at once, from a full read of the file or from the copy, for
  the clock's sake. What changed on the loop while a thread judged (a row
  learned, a claim changed) is kept, not overwritten with the older verdict.

Each change publishes a ``workers`` event (a row came, went, or changed
other than its age) or a ``sessions`` event (a verdict changed). Tested in
tests/registry/test_worker_watch_scale.py and tests/registry/test_registry_surfaces.py.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from core.base.snapshot import Event, EventKind
from core.registry.records import PidProbe, WorkerRecord, liveness
from core.registry.session_claims import SessionClaim, SessionOwnership, assess_claims
from core.registry.workers_view import JsonRow, worker_row


@dataclass(frozen=True)
class Judged:
    """Rows and verdicts judged at one ``now`` from ``records``."""

    records: Mapping[str, WorkerRecord]
    rows: dict[str, JsonRow]
    claims: Mapping[str, SessionClaim]
    ownership: dict[str, SessionOwnership]


def judge(
    records: Mapping[str, WorkerRecord],
    claims: Mapping[str, SessionClaim],
    now: datetime,
    pid_probe: PidProbe,
) -> Judged:
    """Every row and claim judged (blocking only through ``pid_probe``)."""
    rows = {
        identity: worker_row(record, liveness(record, now=now, pid_probe=pid_probe))
        for identity, record in records.items()
    }
    ownership = assess_claims(records, claims.values(), now=now, pid_probe=pid_probe)
    return Judged(records, rows, claims, ownership)


class RegistryCopy:
    def __init__(self, publish: Callable[[Event], None], pid_probe: PidProbe, own_pid: int) -> None:
        self._publish = publish
        #: Whether a row's pid runs; tests count judgements through it.
        self.pid_probe = pid_probe
        #: This process's pid: a row of ours never has a dead pid.
        self.own_pid = own_pid
        #: Every row as last known, by worker identity, and as JSON.
        self.records: dict[str, WorkerRecord] = {}
        self._rows: dict[str, JsonRow] = {}
        self._ownership: dict[str, SessionOwnership] = {}

    def rows_at(self, now: datetime) -> list[JsonRow]:
        """Every row, its age measured at ``now`` (its verdict as last judged)."""
        return [
            {**row, "heartbeat_age_seconds": _age(self.records[identity], now)}
            for identity, row in self._rows.items()
        ]

    def due(self, now: datetime) -> dict[str, WorkerRecord]:
        """The rows whose verdict may have changed since they were judged without
        anyone writing: past their TTL, or of another process (its pid may have died)."""
        return {
            identity: record
            for identity, record in self.records.items()
            if record.pid != self.own_pid or _age(record, now) > record.heartbeat_ttl_seconds
        }

    @property
    def ownership(self) -> Mapping[str, SessionOwnership]:
        return MappingProxyType(self._ownership)

    def learn(self, records: Iterable[WorkerRecord], now: datetime) -> None:
        """Rows this process wrote itself."""
        changed = False
        for record in records:
            self.records[record.worker_identity] = record
            state = liveness(record, now=now, pid_probe=self.pid_probe)
            self._rows[record.worker_identity] = worker_row(record, state)
            changed = True
        if changed:
            self._publish(Event(EventKind.WORKERS))

    def forget(self, identity: str) -> None:
        """A row this process removed."""
        if self.records.pop(identity, None) is not None:
            self._rows.pop(identity, None)
            self._publish(Event(EventKind.WORKERS))

    def judge_claims(self, claims: Iterable[SessionClaim], now: datetime) -> None:
        """A few sessions' claims, judged here and now against the copy."""
        self.take(assess_claims(self.records, claims, now=now, pid_probe=self.pid_probe))

    def take(self, ownership: Mapping[str, SessionOwnership]) -> None:
        changed = False
        for session_id, verdict in ownership.items():
            before = self._ownership.get(session_id)
            self._ownership[session_id] = verdict
            # Details carry ages that move with the clock; only a verdict is news.
            changed = changed or before is None or before.status != verdict.status
        if changed:
            self._publish(Event(EventKind.SESSIONS, text="worker ownership changed"))

    def drop_session(self, session_id: str) -> None:
        self._ownership.pop(session_id, None)

    def apply(
        self, judged: Judged, *, read: bool, claim_of: Callable[[str], SessionClaim | None]
    ) -> None:
        """``judge``'s outcome: the whole copy when it came from a full ``read``, else
        the rows still as judged. A verdict stands only while the session's claim
        (``claim_of``; None: closed) and its row are the ones it was judged on."""
        if read:
            changed = _without_ages(judged.rows.values()) != _without_ages(self._rows.values())
            self.records, self._rows = dict(judged.records), judged.rows
        else:
            changed = False
            for identity, row in judged.rows.items():
                if self.records.get(identity) is judged.records[identity]:
                    changed = changed or row["status"] != self._rows[identity]["status"]
                    self._rows[identity] = row
        if changed:
            self._publish(Event(EventKind.WORKERS))
        standing = {}
        for session_id, verdict in judged.ownership.items():
            claim = judged.claims[session_id]
            identity = claim.worker_identity
            if claim_of(session_id) == claim and self.records.get(identity) is judged.records.get(
                identity
            ):
                standing[session_id] = verdict
        self.take(standing)


def _age(record: WorkerRecord, now: datetime) -> float:
    return round((now - record.last_heartbeat_at).total_seconds(), 3)


def _without_ages(rows: Iterable[JsonRow]) -> list[JsonRow]:
    return [{k: v for k, v in row.items() if k != "heartbeat_age_seconds"} for row in rows]
