"""What the surfaces show of the registry and the doctor.

Pure functions: records and diagnostics in, JSON-ready rows and text out.
Call these (and nothing below them) from the surfaces:

- ``mcp-tray workers [--json]``: ``worker_rows(registry, now=...)`` then
  ``json.dumps(rows)`` or ``format_workers_table(rows)``.
- ``mcp-tray doctor`` (through the control API) and the tray snapshot:
  ``warnings_json`` (through core.registry.worker_watch, which keeps it
  fresh).

``worker_rows`` reads sqlite and may probe pids: call it off the event loop.
Tested in tests/registry/test_registry.py and tests/registry/test_envdiag.py.
"""

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Final

from core.registry.envdiag import Diagnostic
from core.registry.records import Liveness, PidProbe, WorkerRecord
from core.registry.store import WorkerRegistry

STATUS_LIVE: Final = "live"
STATUS_STALE: Final = "stale"
STATUS_FENCED: Final = "fenced"

JsonRow = dict[str, str | int | float | bool | None]


def worker_status(record: WorkerRecord, state: Liveness) -> str:
    """live, or why not: fenced when a holder was refused after the last beat.

    A live row stays live even after a refusal: the refused one was an old
    holder, and the row's current holder is still beating.
    """
    if state.live:
        return STATUS_LIVE
    if record.refused_since_renewal:
        return STATUS_FENCED
    return STATUS_STALE


def worker_row(record: WorkerRecord, state: Liveness) -> JsonRow:
    """One row of ``mcp-tray workers --json``."""
    return {
        "worker_identity": record.worker_identity,
        "client_name": record.client_name,
        "session_id": record.session_id,
        "generation_id": record.generation_id,
        "server": record.server,
        "pid": record.pid,
        "started_at": record.started_at.isoformat(),
        "last_heartbeat_at": record.last_heartbeat_at.isoformat(),
        "heartbeat_age_seconds": round(state.heartbeat_age_seconds, 3),
        "ttl_seconds": record.heartbeat_ttl_seconds,
        "live": state.live,
        "fencing_epoch": record.fencing_epoch,
        "status": worker_status(record, state),
    }


def worker_rows(
    registry: WorkerRegistry,
    *,
    now: datetime | None = None,
    pid_probe: PidProbe | None = None,
) -> list[JsonRow]:
    """Every registry row as ``worker_row``, ages measured at one ``now``."""
    moment = registry.wall_clock() if now is None else now
    return [
        worker_row(record, registry.is_live(record, now=moment, pid_probe=pid_probe))
        for record in registry.list_workers()
    ]


_TABLE_COLUMNS: Final = (
    ("worker_identity", "WORKER"),
    ("client_name", "CLIENT"),
    ("session_id", "SESSION"),
    ("server", "SERVER"),
    ("pid", "PID"),
    ("heartbeat_age_seconds", "AGE"),
    ("ttl_seconds", "TTL"),
    ("status", "STATUS"),
    ("fencing_epoch", "EPOCH"),
)


def _cell(value: str | int | float | bool | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}s"
    return str(value)


def format_workers_table(rows: Sequence[JsonRow]) -> str:
    """``mcp-tray workers`` without ``--json``: aligned columns."""
    if not rows:
        return "no workers registered"
    table = [[title for _, title in _TABLE_COLUMNS]]
    table += [[_cell(row.get(key)) for key, _ in _TABLE_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_TABLE_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def warnings_json(diagnostics: Iterable[Diagnostic], own: Iterable[str]) -> list[dict[str, str]]:
    """The Warnings tab and /api/v1/warnings: the doctor's findings, then
    mcp-tray's own problems (``"family: message"`` text, e.g. an unusable registry)."""
    items = [
        {
            "family": d.family.rstrip(":"),
            "subject": d.subject,
            "message": d.message,
            "fix": d.fix,
            "text": str(d),
        }
        for d in diagnostics
    ]
    for text in own:
        family, _, message = text.partition(": ")
        items.append(
            {"family": family, "subject": "mcp-tray", "message": message, "fix": "", "text": text}
        )
    return items
