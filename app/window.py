"""The mcp-tray window: Servers, Workers, Sessions, Warnings, Logs.

Tables are views over the thin models in app.models, behind a sort proxy so
selection and sort survive every update. Buttons run core calls as asyncio
tasks; a button is disabled while its call runs, and a failure shows its
text in the status bar.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from PySide6.QtCore import QSortFilterProxyModel, Qt, QTimer
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QPushButton,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core_link import CoreLink
from app.icons import app_icon
from app.models import (
    RowModel,
    ServersModel,
    SessionsModel,
    WarningsModel,
    WorkersModel,
    server_rows,
)
from core.base.errors import McpTrayError
from core.base.snapshot import TraySnapshot

#: Heartbeat ages and uptimes tick this often.
TICK_MS: Final = 1000
#: Lines kept in the Logs tab per server.
LOG_LINES: Final = 2000


class Table(QWidget):
    def __init__(self, model: RowModel, empty_text: str) -> None:
        super().__init__()
        self.model = model
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(model)
        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setAlternatingRowColors(True)
        self.view.verticalHeader().setVisible(False)
        # Sized to the contents once, when rows first appear, then left to the
        # user: ResizeToContents re-measures every cell on every row update,
        # which with a thousand ticking rows is more work than a second holds.
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.horizontalHeader().setStretchLastSection(True)
        self._sized = False
        self.empty = QLabel(empty_text)
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet("color: gray; padding: 6px;")
        self.buttons = QHBoxLayout()
        layout = QVBoxLayout(self)
        layout.addWidget(self.empty)
        layout.addWidget(self.view)
        layout.addLayout(self.buttons)
        model.rowsInserted.connect(self._update_empty)
        model.rowsRemoved.connect(self._update_empty)
        self._update_empty()

    def _update_empty(self) -> None:
        has_rows = self.model.rowCount() > 0
        self.empty.setVisible(not has_rows)
        if has_rows and not self._sized:
            self._sized = True
            QTimer.singleShot(0, self.view.resizeColumnsToContents)

    def selected_keys(self) -> list[str]:
        keys = []
        for index in self.view.selectionModel().selectedRows():
            keys.append(str(self.proxy.data(index, Qt.ItemDataRole.UserRole)))
        return keys

    def add_button(self, text: str) -> QPushButton:
        button = QPushButton(text)
        self.buttons.addWidget(button)
        return button


class MainWindow(QMainWindow):
    def __init__(self, link: CoreLink, service: Any) -> None:
        super().__init__()
        self.link = link
        self.service = service
        self.setWindowTitle("mcp-tray")
        self.setWindowIcon(app_icon())
        self.resize(1000, 520)
        self._tasks: set[asyncio.Task[Any]] = set()

        self.servers = Table(ServersModel(), "No servers configured. Add them to your config file.")
        self.workers = Table(
            WorkersModel(),
            "No workers yet: a row appears for each client connected through `mcp-tray connect` or over HTTP.",
        )
        self.sessions = Table(
            SessionsModel(),
            "No client sessions. Point a client at mcp-tray (mcp-tray client-config).",
        )
        self.warnings = Table(WarningsModel(), "No warnings.")
        self.heartbeat = QLabel()
        self.workers.layout().insertWidget(0, self.heartbeat)  # type: ignore[union-attr]

        self.respawn_button = self.servers.add_button("Respawn")
        self.stop_button = self.servers.add_button("Stop")
        self.start_button = self.servers.add_button("Start")
        self.servers.buttons.addStretch()
        self.respawn_button.clicked.connect(
            lambda: self._on_servers(self.respawn_button, service.supervisor.respawn)
        )
        self.stop_button.clicked.connect(
            lambda: self._on_servers(self.stop_button, service.supervisor.stop_server)
        )
        self.start_button.clicked.connect(
            lambda: self._on_servers(self.start_button, service.supervisor.start_server)
        )

        self.reset_button = self.sessions.add_button("Reset")
        self.reset_all_button = self.sessions.add_button("Reset all")
        self.sessions.buttons.addStretch()
        self.reset_button.clicked.connect(self._reset_selected)
        self.reset_all_button.clicked.connect(self._reset_all)

        self.logs = self._logs_tab()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.servers, "Servers")
        self.tabs.addTab(self.workers, "Workers")
        self.tabs.addTab(self.sessions, "Sessions")
        self.tabs.addTab(self.warnings, "Warnings")
        self.tabs.addTab(self.logs, "Logs")
        self.config_error = QLabel()
        self.config_error.setWordWrap(True)
        self.config_error.setStyleSheet("background: #fff3cd; color: #5c4400; padding: 6px;")
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(self.config_error)
        layout.addWidget(self.tabs)
        self.setCentralWidget(central)

        # Ticks only while the window shows (showEvent/hideEvent).
        self._ticker = QTimer(self)
        self._ticker.setInterval(TICK_MS)
        self._ticker.timeout.connect(self.tick)
        link.changed.connect(self.refresh)
        link.stderr.connect(self._stderr_line)
        self.refresh(link.snapshot(), set())

    # ------------------------------------------------------------ updates

    def refresh(self, snapshot: TraySnapshot, kinds: object = None) -> None:
        now = time.time()
        self.servers.model.set_rows(server_rows(snapshot.servers, snapshot.resources), now)
        self.workers.model.set_rows(snapshot.workers, now)
        self.sessions.model.set_rows(snapshot.sessions, now)
        self.warnings.model.set_rows(snapshot.warnings, now)
        self.config_error.setVisible(bool(snapshot.config_error))
        self.config_error.setText(
            f"Config edit refused — still running the last good config.\n{snapshot.config_error or ''}"
        )
        names = [s.name for s in snapshot.servers]
        if names != [self.log_server.itemText(i) for i in range(self.log_server.count())]:
            current = self.log_server.currentText()
            self.log_server.blockSignals(True)
            self.log_server.clear()
            self.log_server.addItems(names)
            if current in names:
                self.log_server.setCurrentText(current)
            self.log_server.blockSignals(False)
            self._show_log()
        self.tabs.setTabText(3, f"Warnings ({len(snapshot.warnings)})")
        self._heartbeat_status()

    def tick(self) -> None:
        now = time.time()
        self.servers.model.tick(now)
        self.workers.model.tick(now)

    def _heartbeat_status(self) -> None:
        workers = self.service.workers
        if workers is None or workers.registry is None:
            self.heartbeat.setText("Worker registry unavailable (see Warnings).")
            return
        count = len(workers.rows)
        self.heartbeat.setText(
            f"Registry {self.service.paths.registry_file} — {count} row(s). "
            f"mcp-tray heartbeats its {workers.http_sessions} HTTP session row(s) every "
            f"{workers.ttl / 3:g} s (TTL {workers.ttl:g} s); bridges beat their own."
        )

    # ------------------------------------------------------------ actions

    def run(self, button: QPushButton | None, coro: Awaitable[Any], done: str) -> None:
        """Run a core call: button disabled meanwhile, the outcome in the status bar."""
        if button is not None:
            button.setEnabled(False)

        async def runner() -> None:
            try:
                await coro
            except McpTrayError as exc:
                self.statusBar().showMessage(str(exc), 15000)
            except Exception as exc:
                self.statusBar().showMessage(f"{type(exc).__name__}: {exc}", 15000)
            else:
                self.statusBar().showMessage(done, 5000)
            finally:
                if button is not None:
                    button.setEnabled(True)

        task = asyncio.get_running_loop().create_task(runner())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_servers(self, button: QPushButton, act: Callable[[str], Awaitable[None]]) -> None:
        names = self.servers.selected_keys()
        if not names:
            self.statusBar().showMessage("Select a server first.", 5000)
            return

        async def all_of() -> None:
            for name in names:
                await act(name)

        self.run(button, all_of(), f"{button.text()}: {', '.join(names)} done")

    def _reset_selected(self) -> None:
        ids = self.sessions.selected_keys()
        if not ids:
            self.statusBar().showMessage("Select a session first.", 5000)
            return

        async def reset() -> None:
            for session_id in ids:
                self.service.sessions.reset(session_id)

        self.run(self.reset_button, reset(), f"reset {len(ids)} session(s)")

    def _reset_all(self) -> None:
        async def reset() -> None:
            self.service.sessions.reset_all()

        self.run(self.reset_all_button, reset(), "reset every tripped session")

    # --------------------------------------------------------------- logs

    def _logs_tab(self) -> QWidget:
        widget = QWidget()
        self.log_server = QComboBox()
        self.follow = QCheckBox("Follow")
        self.follow.setChecked(True)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter lines…")
        self.log_view = QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LINES)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Server"))
        bar.addWidget(self.log_server)
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.follow)
        layout = QVBoxLayout(widget)
        layout.addLayout(bar)
        layout.addWidget(self.log_view)
        self.log_server.currentTextChanged.connect(lambda _: self._show_log())
        self.filter.textChanged.connect(lambda _: self._show_log())
        return widget

    def _show_log(self) -> None:
        name = self.log_server.currentText()
        self.log_view.clear()
        if not name:
            return
        try:
            lines = list(self.service.supervisor.server(name).stderr_tail)
        except McpTrayError:
            lines = []
        needle = self.filter.text().lower()
        self.log_view.setPlainText("\n".join(line for line in lines if needle in line.lower()))
        if self.follow.isChecked():
            self.log_view.moveCursor(self.log_view.textCursor().MoveOperation.End)

    def _stderr_line(self, server: str, line: str) -> None:
        if server != self.log_server.currentText():
            return
        needle = self.filter.text().lower()
        if needle and needle not in line.lower():
            return
        scrollbar = self.log_view.verticalScrollBar()
        at_end = scrollbar.value() == scrollbar.maximum()
        self.log_view.appendPlainText(line)
        if not self.follow.isChecked() and not at_end:
            return
        scrollbar.setValue(scrollbar.maximum())

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._ticker.start()
        self.service.stats.watch(True)
        self.tick()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._ticker.stop()
        self.service.stats.watch(False)

    def bring_up(self) -> None:
        self.show()
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.raise_()
        self.activateWindow()
