"""Whether each open client session's worker row still holds it (docs/design.md §3.6).

The tray knows its client sessions from the gateway; each names the worker
row it stands for (a bridge's comes with its requests, a direct HTTP
session's is the row the tray registered for it). ``assess_claims`` judges
each claim against the rows the tray last knew (``worker_ownership``, the
registry's own rule) and turns the verdict into what the Sessions tab shows:
``owned``, ``fenced`` or ``missing``, with one line of detail. Pure: no
sqlite, so judging one claim costs the same with a thousand rows known as
with one (only the pid probe of a row may ask the OS). Tested in
tests/registry/test_registry_surfaces.py.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple

from core.registry.records import (
    BLOCKER_FENCED,
    OWNED,
    Ownership,
    PidProbe,
    WorkerRecord,
    worker_ownership,
)

OwnershipStatus = Literal["owned", "fenced", "missing"]


class SessionOwnership(NamedTuple):
    """Whether a client session's worker row still holds it."""

    #: owned: a live, unfenced row holds it; fenced: its row was taken over
    #: (or went silent right after refusing its holder); missing: no live row.
    status: OwnershipStatus
    #: One line: who holds it, or why nobody does.
    detail: str


@dataclass(frozen=True)
class SessionClaim:
    """One client session's claim on a worker row, and what can be presented for it."""

    #: The gateway's session id (the key of the answer).
    session_id: str
    worker_identity: str
    #: The registry session and the epoch, known for rows the tray registered
    #: itself. None for a bridge's row: then the row's own session is used.
    registry_session: str | None = None
    fencing_epoch: int | None = None


def assess_claims(
    records: Mapping[str, WorkerRecord],
    claims: Iterable[SessionClaim],
    *,
    now: datetime,
    pid_probe: PidProbe | None = None,
) -> dict[str, SessionOwnership]:
    """Session id -> ownership, every claim judged at one ``now`` against
    ``records`` (worker identity -> row; a missing key is a missing row)."""
    found: dict[str, SessionOwnership] = {}
    for claim in claims:
        record = records.get(claim.worker_identity)
        session_id = claim.registry_session
        if session_id is None:
            # A bridge registers under its client's session (MCP_TRAY_CLIENT_SESSION,
            # or one derived from its parent process), not the gateway's: only
            # the worker identity links the two.
            session_id = claim.session_id if record is None else record.session_id
        verdict = worker_ownership(
            session_id,
            claim.worker_identity,
            record,
            fencing_epoch=claim.fencing_epoch,
            now=now,
            pid_probe=pid_probe,
        )
        found[claim.session_id] = status_of(verdict)
    return found


def status_of(verdict: Ownership) -> SessionOwnership:
    """The Sessions tab's words for one ``assess_ownership`` verdict."""
    if verdict.ownership == OWNED:
        return SessionOwnership("owned", f"held by live worker {verdict.holder}")
    detail = "; ".join(verdict.reasons)
    if verdict.blocker_kind == BLOCKER_FENCED:
        return SessionOwnership("fenced", detail)
    return SessionOwnership("missing", detail)
