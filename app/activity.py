"""The Activity tab: every call through mcp-tray as it ends (the call journal, docs/design.md §3.16).

Core hands written records to its subscribers on core's loop
(``CallJournal.subscribe``); ``ActivityFeed`` subscribes there and re-emits
them as a Qt signal, queued to the GUI thread. The list keeps the newest
``MAX_ROWS`` (older ones are in ``mcp-tray calls``); a record appears once
the journal wrote it, a tenth of a second or so after the call ended.
Filters (server, outcome, text) sit in a proxy; the detail pane shows the
selected call whole: who, where, its arguments (as kept: redacted, cut) and
its result's first lines.
"""

import contextlib
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core_link import CoreLink
from app.models import SORT_ROLE, RowModel
from core.registry.journal_rows import OUTCOMES, CallRecord

#: Rows the list keeps (the journal keeps the rest).
MAX_ROWS: Final = 2000
ALL: Final = "All"
#: (glyph, colour) per outcome: the glyph reads without colour too.
LOOKS: Final = {
    "ok": ("✓", "#2e7d32"),
    "retried": ("↻", "#2e7d32"),
    "tool-error": ("!", "#b26a00"),
    "error": ("✗", "#c62828"),
    "exited": ("✗", "#c62828"),
    "timeout": ("⏱", "#c62828"),
    "cancelled": ("–", "#616161"),
    "refused": ("⊘", "#6a1b9a"),
    "denied": ("⊘", "#6a1b9a"),
}
Index = QModelIndex | QPersistentModelIndex


class ActivityFeed(QObject):
    """The journal's new records, on the GUI thread."""

    records = Signal(object)

    def __init__(self, link: CoreLink) -> None:
        super().__init__()
        self._link = link
        journal = link.service.journal

        def heard(records: list[CallRecord]) -> None:
            # On core's loop; Qt queues the signal to the GUI thread.
            with contextlib.suppress(RuntimeError):  # the window went first
                self.records.emit(records)

        def attach() -> tuple[list[CallRecord], Callable[[], None]]:
            # On core's loop: what was written so far and the subscription, nothing between.
            return list(journal.recent), journal.subscribe(heard)

        self.first, self._unsubscribe = link.call(attach)

    def close(self) -> None:
        self._link.call(self._unsubscribe)


def duration_text(ms: float) -> str:
    """A call's duration as a person reads it: ms under a second (a held call's wait is
    seconds or minutes)."""
    if ms < 1000:
        return f"{ms:.1f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds} s"


class ActivityModel(RowModel):
    COLUMNS = (
        ("time", "Time"),
        ("client", "Client"),
        ("server", "Server"),
        ("tool", "Tool"),
        ("outcome", "Outcome"),
        ("duration_ms", "Duration"),
    )

    def key(self, row: CallRecord) -> str:
        return row.id

    def text(self, row: CallRecord, column: str) -> str:
        if column == "time":
            return datetime.fromtimestamp(row.started).strftime("%H:%M:%S.%f")[:-3]
        if column == "tool":
            return row.tool or row.method
        if column == "outcome":
            glyph = LOOKS.get(row.outcome, ("?", ""))[0]
            by = f" ({row.refused_by})" if row.refused_by else ""
            code = f" {row.error_code}" if row.error_code is not None else ""
            return f"{glyph} {row.outcome}{by}{code}"
        if column == "duration_ms":
            return duration_text(row.duration_ms)
        return super().text(row, column)

    def sort_value(self, row: CallRecord, column: str, text: str) -> Any:
        if column in ("time", "duration_ms"):
            return row.started if column == "time" else row.duration_ms
        return text

    def tooltip(self, row: CallRecord, column: str) -> str | None:
        return row.detail or None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if (
            role == Qt.ItemDataRole.ForegroundRole
            and index.isValid()
            and self.COLUMNS[index.column()][0] == "outcome"
        ):
            return QColor(LOOKS.get(self._rows[index.row()].outcome, ("", "#000000"))[1])
        return super().data(index, role)

    def add(self, records: Sequence[CallRecord]) -> None:
        """New records at the end; the oldest go past ``MAX_ROWS``."""
        fresh = [r for r in records if r.id not in self._where][-MAX_ROWS:]
        if not fresh:
            return
        over = len(self._rows) + len(fresh) - MAX_ROWS
        if over > 0:
            self.beginRemoveRows(QModelIndex(), 0, over - 1)
            del self._rows[:over], self._keys[:over], self._text[:over]
            self._where = {key: position for position, key in enumerate(self._keys)}
            self.endRemoveRows()
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
        for record in fresh:
            self._where[record.id] = len(self._rows)
            self._rows.append(record)
            self._keys.append(record.id)
            self._text.append(self._render(record))
        self.endInsertRows()


class ActivityFilter(QSortFilterProxyModel):
    """Server, outcome and free text (client, tool, arguments, error)."""

    def __init__(self, model: ActivityModel) -> None:
        super().__init__()
        self.setSourceModel(model)
        self.setSortRole(SORT_ROLE)
        self._model = model
        self.server = ALL
        self.outcome = ALL
        self.words = ""

    def set_filters(self, server: str, outcome: str, words: str) -> None:
        self.beginFilterChange()
        self.server, self.outcome, self.words = server, outcome, words.strip().lower()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        record: CallRecord = self._model._rows[source_row]
        if self.server != ALL and record.server != self.server:
            return False
        if self.outcome != ALL and record.outcome != self.outcome:
            return False
        if self.words:
            haystack = " ".join(
                (record.client, record.tool, record.method, record.arguments or "", record.detail)
            ).lower()
            return self.words in haystack
        return True


def describe(record: CallRecord) -> str:
    """The detail pane's text for one call."""
    lines = [
        f"{record.time}  {record.method} {record.tool}".rstrip(),
        f"client   {record.client} ({record.client_name})"
        + (f", pid {record.pid}" if record.pid else "")
        + f", {record.identified_by}",
        f"door     {record.door}" + (f", session {record.session}" if record.session else ""),
        f"server   {record.server or '-'}"
        + (f", generation {record.generation}" if record.generation is not None else ""),
        f"outcome  {ActivityModel().text(record, 'outcome')}, {duration_text(record.duration_ms)}, "
        f"result {record.result_size} bytes",
    ]
    if record.detail:
        lines.append(f"detail   {record.detail}")
    lines.append("")
    lines.append("arguments")
    if record.arguments is None:
        lines.append('  (not kept: the config says "journal": {"arguments": false})')
    else:
        try:
            lines.append(json.dumps(json.loads(record.arguments), indent=2, ensure_ascii=False))
        except ValueError:
            lines.append(record.arguments)  # cut at 4 KiB: not JSON any more
    if record.result_head:
        lines += ["", "result (first lines)", record.result_head]
    return "\n".join(lines)


class ActivityTab(QWidget):
    def __init__(self, link: CoreLink) -> None:
        super().__init__()
        self.model = ActivityModel()
        self.proxy = ActivityFilter(self.model)
        self.feed = ActivityFeed(link)
        self.server = QComboBox()
        self.server.addItem(ALL)
        self.outcome = QComboBox()
        self.outcome.addItems([ALL, *OUTCOMES])
        self.words = QLineEdit()
        self.words.setPlaceholderText("Filter: client, tool, arguments…")
        self.words.setClearButtonEnabled(True)
        filters = QHBoxLayout()
        for label, widget in (("Server", self.server), ("Outcome", self.outcome)):
            filters.addWidget(QLabel(label))
            filters.addWidget(widget)
        filters.addWidget(self.words, 1)

        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(ActivityModel.column("time"), Qt.SortOrder.DescendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        self.view.verticalHeader().setVisible(False)
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for key, width in (("time", 100), ("client", 130), ("server", 120), ("tool", 220)):
            self.view.setColumnWidth(ActivityModel.column(key), width)
        self.view.setColumnWidth(ActivityModel.column("outcome"), 150)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setFont(QFont("monospace"))
        self.detail.setPlaceholderText("Select a call to see its arguments and result.")
        self.empty = QLabel("No calls yet: each call through mcp-tray appears here as it ends.")
        self.empty.setStyleSheet("color: gray; padding: 6px;")

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.view)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(filters)
        layout.addWidget(self.empty)
        layout.addWidget(split)

        self.server.currentTextChanged.connect(lambda _: self._filter())
        self.outcome.currentTextChanged.connect(lambda _: self._filter())
        self.words.textChanged.connect(lambda _: self._filter())
        self.view.selectionModel().currentRowChanged.connect(lambda *_: self._show_detail())
        self.feed.records.connect(self.add)
        self.add(self.feed.first)

    def add(self, records: Sequence[CallRecord]) -> None:
        self.model.add(records)
        known = {self.server.itemText(i) for i in range(self.server.count())}
        for name in sorted({r.server for r in records if r.server} - known):
            self.server.addItem(name)
        self.empty.setVisible(self.model.rowCount() == 0)

    def _filter(self) -> None:
        self.proxy.set_filters(
            self.server.currentText(), self.outcome.currentText(), self.words.text()
        )

    def selected(self) -> CallRecord | None:
        index = self.view.currentIndex()
        if not index.isValid():
            return None
        key = self.proxy.data(index, Qt.ItemDataRole.UserRole)
        found: CallRecord | None = self.model.row(str(key))
        return found

    def _show_detail(self) -> None:
        record = self.selected()
        self.detail.setPlainText(describe(record) if record is not None else "")

    def close_down(self) -> None:
        self.feed.close()
