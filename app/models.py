"""Thin table models fed from core snapshots (vorta's habit, plus per-row updates).

Each model keeps rows keyed by a stable id. ``set_rows`` inserts new rows,
removes gone ones, and emits ``dataChanged`` only for the cells that
changed, so views keep their selection and sort; nothing ever resets a
model. ``tick(now)`` recomputes only the time-derived cells (ages, uptime)
and emits ``dataChanged`` for exactly the rows whose text changed.

Besides the text, a model answers ``SORT_ROLE`` (numbers sort as numbers:
"9.5 MiB" before "68.0 MiB") and, per column, an icon (``decoration``) and
a value for a delegate to draw (``SERIES_ROLE``: a server's activity).
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, ClassVar, Final

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from app.icons import state_icon
from core.base.severity import Severity
from core.base.snapshot import (
    ProfileSnapshot,
    ResourceUsage,
    ServerSnapshot,
    SessionSnapshot,
    WarningSnapshot,
    WorkerSnapshot,
)
from core.registry.identity import client_display_name
from core.serving.observe.activity import Series
from core.supervision.offer import ToolRow

#: A frozen snapshot dataclass (or ``ServerRow``): models read its fields.
Row = Any
Index = QModelIndex | QPersistentModelIndex

#: What the sort proxy sorts by (``RowModel.sort_value``).
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
#: A server's activity ``Series``, for the sparkline delegate.
SERIES_ROLE = Qt.ItemDataRole.UserRole + 2
#: The roles answered from the row object (the text is cached per cell).
_ROW_ROLES = frozenset(
    {Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.DecorationRole, SORT_ROLE, SERIES_ROLE}
)


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
        # Views ask for a dozen roles per painted cell: answer the others at once.
        if role not in _ROW_ROLES:
            return None
        row, column = self._rows[index.row()], self.COLUMNS[index.column()][0]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.tooltip(row, column)
        if role == SORT_ROLE:
            return self.sort_value(row, column, self._text[index.row()][index.column()])
        if role == Qt.ItemDataRole.DecorationRole:
            return self.decoration(row, column)
        return self.value(row, column)

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

    def sort_value(self, row: Row, column: str, text: str) -> Any:
        """What the column sorts by: its text, unless a subclass knows better."""
        return text

    def decoration(self, row: Row, column: str) -> Any:
        return None

    def value(self, row: Row, column: str) -> Any:
        """A cell's value for a delegate to draw (``SERIES_ROLE``)."""
        return None

    @classmethod
    def column(cls, key: str) -> int:
        """The position of the column keyed ``key``."""
        return [k for k, _ in cls.COLUMNS].index(key)

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
    """A server as the Servers tab shows it: its snapshot, its usage while sampled
    (only for the child that was sampled), and its recent activity."""

    server: ServerSnapshot
    usage: ResourceUsage | None = None
    activity: Series | None = None


class ServersModel(RowModel):
    COLUMNS = (
        ("name", "Server"),
        ("state", "State"),
        ("activity", "Calls, 10 min"),
        ("latency", "Latency"),
        ("pid", "PID"),
        ("generation", "Gen"),
        ("uptime", "Uptime"),
        ("restarts", "Restarts"),
        ("breaker", "Breaker"),
        ("protocol", "Protocol"),
        ("sandbox", "Sandbox"),
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
        if server.remote and column in ("pid", "cpu", "rss"):
            # No process of ours: the mark says why the cell holds no number.
            return "remote" if column == "pid" else ""
        if column == "latency":
            latency = server.latency_ms
            return "" if latency is None else f"{latency:.1f} ms"
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
        if column == "activity":
            return row.activity.summary() if row.activity else ""
        if column == "last_error":
            # One line in the table; the details pane shows it whole.
            return " ".join((server.parked_reason or server.last_error or "").split())
        return super().text(server, column)

    def tooltip(self, row: ServerRow, column: str) -> str | None:
        server = row.server
        if column in ("last_error", "state"):
            return server.parked_reason or server.last_error or server.state.value
        if column == "name":
            return server.command
        if column == "activity" and row.activity is not None:
            return (
                row.activity.summary()
                + ". Blue: calls; red: failed calls; a mark: a restart (amber after a crash)."
            )
        if server.remote and column in ("pid", "cpu", "rss"):
            return f"A remote server, reached over HTTP at {server.command}"
        if column == "latency":
            return "The median time of its latest 100 answered tool calls, through mcp-tray."
        if column in ("cpu", "rss"):
            return (
                "The child and its descendants, sampled every few seconds while this window shows."
            )
        return None

    def sort_value(self, row: ServerRow, column: str, text: str) -> Any:
        server, usage = row.server, row.usage
        if column in ("pid", "generation", "restarts"):
            return getattr(server, column) or 0
        if column == "uptime":
            return self._now - server.started_at if server.started_at else -1.0
        if column == "latency":
            return server.latency_ms if server.latency_ms is not None else -1.0
        if column == "cpu":
            return usage.cpu_percent if usage and usage.cpu_percent is not None else -1.0
        if column == "rss":
            return usage.rss_bytes if usage and usage.rss_bytes is not None else -1
        if column == "activity":
            return row.activity.total_calls if row.activity else 0
        return text

    def decoration(self, row: ServerRow, column: str) -> Any:
        if column == "state":
            return state_icon(row.server.state)
        return None

    def value(self, row: ServerRow, column: str) -> Any:
        return row.activity if column == "activity" else None


#: A server's sampled usage, with the pid that was sampled: (pid, usage).
SampledUsage = tuple[int, ResourceUsage]


def server_rows(
    servers: Sequence[ServerSnapshot],
    usage: Mapping[str, SampledUsage],
    activity: Callable[[str], Series] | None = None,
) -> list[ServerRow]:
    """Rows for the Servers tab. A figure shows only beside the child it was
    sampled from: a stopped server shows none, a respawned one none until
    its new child is sampled."""
    rows = []
    for server in servers:
        sampled = usage.get(server.name)
        current = (
            sampled[1] if sampled and server.pid is not None and sampled[0] == server.pid else None
        )
        rows.append(ServerRow(server, current, activity(server.name) if activity else None))
    return rows


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
        if column == "kind" and row.via:
            return f"{row.kind} {row.via}"  # its session with one server of /mcp or a profile
        return super().text(row, column)

    def tooltip(self, row: SessionSnapshot, column: str) -> str | None:
        if column == "ownership":
            return row.ownership_detail or None
        return row.last_error or None


#: How the Warnings tab labels a finding that is not a warning.
_SEVERITY_WORDS: Final = {Severity.ADVICE: "advice", Severity.INFO: "information"}


class WarningsModel(RowModel):
    COLUMNS = (
        ("family", "Family"),
        ("subject", "Key or process"),
        ("message", "Message"),
        ("fix", "Fix"),
    )

    def key(self, row: WarningSnapshot) -> str:
        return row.text or f"{row.family}|{row.subject}|{row.message}"

    def text(self, row: WarningSnapshot, column: str) -> str:
        if column == "family" and not row.is_warning:
            # Listed for the record; it does not turn the tray amber.
            return f"{row.family} ({_SEVERITY_WORDS[row.severity]})"
        if column == "fix" and not row.fix:
            # mcp-tray's own warnings carry their fix inside the message.
            _, found, fix = row.message.rpartition(" Fix: ")
            return fix if found else ""
        if column == "message":
            message, found, _ = row.message.rpartition(" Fix: ")
            return message if found and not row.fix else row.message
        return super().text(row, column)

    def tooltip(self, row: WarningSnapshot, column: str) -> str | None:
        return row.text or None


class ProfilesModel(RowModel):
    """Each profile (and ``all``): what it offers a client, what that costs, who uses it."""

    COLUMNS = (
        ("name", "Profile"),
        ("path", "Endpoint"),
        ("servers", "Servers"),
        ("tools", "Tools"),
        ("tokens", "≈ Tokens"),
        ("discovery_tokens", "≈ Tokens (search)"),
        ("sessions", "Connected"),
        ("warnings", "Warnings"),
    )

    def key(self, row: ProfileSnapshot) -> str:
        return row.name

    def text(self, row: ProfileSnapshot, column: str) -> str:
        if column == "servers":
            return ", ".join(row.servers)
        if column == "sessions":
            return ", ".join(client_display_name(name) for name in row.sessions)
        if column == "warnings":
            return "; ".join(row.warnings)
        if column in ("tokens", "discovery_tokens"):
            # The figure this profile's clients read is marked.
            read = (column == "discovery_tokens") == (row.discovery == "search")
            return f"{getattr(row, column):,}" + (" *" if read else "")
        return super().text(row, column)

    def tooltip(self, row: ProfileSnapshot, column: str) -> str | None:
        if column == "tokens":
            return f"{row.tools_bytes} bytes of tools/list JSON ÷ 4 (an estimate)"
        if column == "discovery_tokens":
            return (
                'With "discovery": "search" its clients list three tools (search_tools, '
                "describe_tools, call_tool) instead of every tool: one more round trip per "
                f"new tool. * marks what they read now ({row.discovery})."
            )
        if column == "warnings" and row.renamed:
            shortened = "\n".join(f"{short} = {full}" for short, full in row.renamed)
            return f"Shortened names (as clients see them = full name):\n{shortened}"
        return "\n".join(row.warnings) if column == "warnings" and row.warnings else None


class ToolsModel(RowModel):
    """A server's tools, for the details pane (rows from core.supervision.offer)."""

    COLUMNS = (
        ("name", "Tool"),
        ("title", "Title"),
        ("retried", "After a crash"),
        ("description", "Description"),
    )

    def key(self, row: ToolRow) -> str:
        return row.name

    def text(self, row: ToolRow, column: str) -> str:
        if column == "retried":
            return "↻ retried" if row.retried_after_crash else "not retried"
        if column == "description":
            return " ".join(row.description.split())
        return super().text(row, column)

    def tooltip(self, row: ToolRow, column: str) -> str | None:
        if column == "retried":
            if row.retried_after_crash:
                return f"A call cut by a crash is sent once more to the fresh child: {row.retry_reason}."
            return (
                "A call cut by a crash is answered with an error saying it may or may not "
                f"have taken effect: {row.retry_reason}."
            )
        return row.description or None
