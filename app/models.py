"""Thin table models fed from core snapshots (vorta's habit, plus per-row updates).

Each model keeps rows keyed by a stable id. ``set_rows`` inserts new rows,
removes gone ones, and emits ``dataChanged`` only for the cells that
changed, so views keep their selection and sort; nothing ever resets a
model. ``tick(now)`` recomputes only the time-derived cells (ages, uptime)
and emits ``dataChanged`` for exactly the rows whose text changed.
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, ClassVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from core.base.snapshot import (
    ResourceUsage,
    ServerSnapshot,
    SessionSnapshot,
    WarningSnapshot,
    WorkerSnapshot,
)
from core.registry.identity import client_display_name

#: A frozen snapshot dataclass (or ``ServerRow``): models read its fields.
Row = Any
Index = QModelIndex | QPersistentModelIndex


@lru_cache(maxsize=4096)
def _epoch(stamp: str) -> float:
    """Registry timestamps, parsed once each (a thousand rows tick every second)."""
    return datetime.fromisoformat(stamp).timestamp()


def human_bytes(value: int | None) -> str:
    if not value:
        return ""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def human_duration(seconds: float | None, *, precise: bool) -> str:
    """An age or an uptime. Not ``precise``: minutes only after the first minute,
    so a table of servers does not repaint every second to say they are still up."""
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s" if precise else f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class RowModel(QAbstractTableModel):
    #: (key in the row dict, header) per column.
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: Columns whose text depends on the time (recomputed by ``tick``).
    TICKING: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[Row] = []
        self._keys: list[str] = []
        self._text: list[list[str]] = []
        #: key -> position, so a thousand-row update is not quadratic.
        self._where: dict[str, int] = {}
        self._now: float = time.time()

    # --------------------------------------------------------------- Qt API

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's own signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text[index.row()][index.column()]
        if role == Qt.ItemDataRole.UserRole:
            return self._keys[index.row()]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.tooltip(self._rows[index.row()], self.COLUMNS[index.column()][0])
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.COLUMNS[section][1]
        return None

    # ------------------------------------------------------------- feeding

    def key(self, row: Row) -> str:
        raise NotImplementedError

    def text(self, row: Row, column: str) -> str:
        value = getattr(row, column, None)
        return "" if value is None else str(value)

    def tooltip(self, row: Row, column: str) -> str | None:
        return None

    def row(self, key: str) -> Row | None:
        position = self._where.get(key)
        return None if position is None else self._rows[position]

    def keys(self) -> list[str]:
        return list(self._keys)

    def _render(self, row: Row) -> list[str]:
        return [self.text(row, column) for column, _ in self.COLUMNS]

    def set_rows(self, rows: Sequence[Row], now: float | None = None) -> None:
        if now is not None:
            self._now = now
        incoming = {self.key(row): row for row in rows}
        removed = False
        for position in range(len(self._keys) - 1, -1, -1):
            if self._keys[position] not in incoming:
                self.beginRemoveRows(QModelIndex(), position, position)
                del self._rows[position], self._keys[position], self._text[position]
                self.endRemoveRows()
                removed = True
        if removed:
            self._where = {key: position for position, key in enumerate(self._keys)}
        for key, row in incoming.items():
            found = self._where.get(key)
            if found is None:
                position = len(self._rows)
                self.beginInsertRows(QModelIndex(), position, position)
                self._rows.append(row)
                self._keys.append(key)
                self._text.append(self._render(row))
                self._where[key] = position
                self.endInsertRows()
            elif row != self._rows[found]:
                self._rows[found] = row
                self._refresh(found)

    def tick(self, now: float) -> int:
        """Re-render the time-derived cells; returns how many rows changed.

        ``dataChanged`` covers only the ticking columns of the rows whose
        text changed, one signal per run of consecutive such rows.
        """
        self._now = now
        ticking = [i for i, (column, _) in enumerate(self.COLUMNS) if column in self.TICKING]
        if not ticking:
            return 0
        changed: list[tuple[int, int, int]] = []
        for position, row in enumerate(self._rows):
            old = self._text[position]
            dirty = []
            for column in ticking:
                text = self.text(row, self.COLUMNS[column][0])
                if text != old[column]:
                    old[column] = text
                    dirty.append(column)
            if dirty:
                changed.append((position, min(dirty), max(dirty)))
        start = 0
        while start < len(changed):
            end = start
            while end + 1 < len(changed) and changed[end + 1][0] == changed[end][0] + 1:
                end += 1
            run = changed[start : end + 1]
            self.dataChanged.emit(
                self.index(run[0][0], min(c[1] for c in run)),
                self.index(run[-1][0], max(c[2] for c in run)),
                [Qt.ItemDataRole.DisplayRole],
            )
            start = end + 1
        return len(changed)

    def _refresh(self, position: int) -> None:
        fresh = self._render(self._rows[position])
        old = self._text[position]
        dirty = [c for c in range(len(fresh)) if fresh[c] != old[c]]
        for c in dirty:
            old[c] = fresh[c]
        if dirty:
            self.dataChanged.emit(
                self.index(position, min(dirty)),
                self.index(position, max(dirty)),
                [Qt.ItemDataRole.DisplayRole],
            )


@dataclass(frozen=True)
class ServerRow:
    """A server as the Servers tab shows it: its snapshot and, while sampled, its usage."""

    server: ServerSnapshot
    usage: ResourceUsage | None = None


class ServersModel(RowModel):
    COLUMNS = (
        ("name", "Server"),
        ("state", "State"),
        ("pid", "PID"),
        ("generation", "Gen"),
        ("uptime", "Uptime"),
        ("restarts", "Restarts"),
        ("breaker", "Breaker"),
        ("protocol", "Protocol"),
        ("cpu", "CPU %"),
        ("rss", "RSS"),
        ("last_error", "Last error"),
    )
    TICKING = frozenset({"uptime"})

    def key(self, row: ServerRow) -> str:
        return row.server.name

    def text(self, row: ServerRow, column: str) -> str:
        server, usage = row.server, row.usage
        if column == "state":
            return server.state.value
        if column == "breaker":
            return server.breaker.value
        if column == "uptime":
            started = server.started_at
            return human_duration(self._now - started, precise=False) if started else ""
        if column == "cpu":
            cpu = usage.cpu_percent if usage else None
            return "" if cpu is None else f"{cpu:.1f}"
        if column == "rss":
            return human_bytes(usage.rss_bytes if usage else None)
        if column == "last_error":
            return server.parked_reason or server.last_error or ""
        return super().text(server, column)

    def tooltip(self, row: ServerRow, column: str) -> str | None:
        server = row.server
        if column in ("last_error", "state"):
            return server.parked_reason or server.last_error or server.state.value
        if column == "name":
            return server.command
        return None


def server_rows(
    servers: Sequence[ServerSnapshot], resources: Mapping[str, ResourceUsage]
) -> list[ServerRow]:
    return [ServerRow(server, resources.get(server.name)) for server in servers]


class WorkersModel(RowModel):
    COLUMNS = (
        ("client_name", "Client"),
        ("session_id", "Session"),
        ("server", "Server"),
        ("pid", "PID"),
        ("age", "Heartbeat age"),
        ("ttl_seconds", "TTL"),
        ("status", "Status"),
    )
    TICKING = frozenset({"age", "status"})

    def key(self, row: WorkerSnapshot) -> str:
        return row.worker_identity

    def _age(self, row: WorkerSnapshot) -> float | None:
        if not row.last_heartbeat_at:
            return None
        return self._now - _epoch(row.last_heartbeat_at)

    def text(self, row: WorkerSnapshot, column: str) -> str:
        if column == "client_name":
            return client_display_name(row.client_name)
        if column == "age":
            return human_duration(self._age(row), precise=True)
        if column == "ttl_seconds":
            return f"{row.ttl_seconds:g} s"
        if column == "status":
            age = self._age(row)
            # Between registry reads the clock keeps going: a row past its
            # TTL is shown stale now, not at the next refresh.
            if row.status == "live" and age is not None and age > row.ttl_seconds:
                return "stale"
            return row.status
        return super().text(row, column)


class SessionsModel(RowModel):
    COLUMNS = (
        ("client", "Client"),
        ("server", "Server"),
        ("requests", "Requests"),
        ("consecutive_failures", "Failures"),
        ("breaker", "Breaker"),
        ("kind", "Via"),
        ("ownership", "Owner"),
        ("id", "Session"),
    )

    def key(self, row: SessionSnapshot) -> str:
        return row.id

    def text(self, row: SessionSnapshot, column: str) -> str:
        if column == "breaker":
            return "tripped" if row.tripped else "closed"
        return super().text(row, column)

    def tooltip(self, row: SessionSnapshot, column: str) -> str | None:
        if column == "ownership":
            return row.ownership_detail or None
        return row.last_error or None


class WarningsModel(RowModel):
    COLUMNS = (
        ("family", "Family"),
        ("subject", "Key or process"),
        ("message", "Message"),
        ("fix", "Fix"),
    )

    def key(self, row: WarningSnapshot) -> str:
        return row.text or f"{row.family}|{row.subject}|{row.message}"
