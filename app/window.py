"""The mcp-tray window: Servers (with a details pane), Workers, Sessions, Warnings, Logs,
Activity (app.activity).

Tables are views over the thin models in app.models, behind a sort proxy so
selection and sort survive every update. A button starts a flow on the GUI
loop (qasync's) that awaits its core call on core's loop through the link
(app.core_link); the button is disabled while it runs, and a failure shows
its text in the status bar.

Nothing here runs while the window is hidden: the 1 Hz tick (ages, uptimes,
sparklines sliding), the CPU/RSS sampler and the log follower all start in
``showEvent`` and stop in ``hideEvent`` (minimising hides too). Core events
still update the models, so the window is current the moment it shows.
"""

import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Final

from PySide6.QtCore import QSortFilterProxyModel, Qt, QTimer, QUrl
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QFont,
    QHideEvent,
    QShowEvent,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextDocument,
)
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
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.activity import ActivityTab
from app.approvals import ApprovalsTab
from app.core_link import CoreLink
from app.details import DetailsPane
from app.icons import app_icon
from app.models import (
    SORT_ROLE,
    ProfilesModel,
    RowModel,
    ServersModel,
    SessionsModel,
    WarningsModel,
    WorkersModel,
    server_rows,
)
from app.sparkline import ActivityDelegate
from app.usage import UsageSampler
from core.base.errors import McpTrayError
from core.base.severity import count_warnings
from core.base.snapshot import ServerSnapshot, TraySnapshot
from core.supervision.offer import ServerOffer, offer_of
from core.supervision.timeline import NOTE_SOURCE, LogFollower, LogLine

#: Heartbeat ages, uptimes and sparklines tick this often.
TICK_MS: Final = 1000
#: Lines kept in the Logs tab per server.
LOG_LINES: Final = 2000
#: After a stderr line or a state change, how soon the Logs tab reads the
#: file (the log writer is a thread: give it a moment to write the line).
LOG_SOON_MS: Final = 100
#: Widest texts of the usage columns: sized for them, they never wrap or jump.
WIDEST_CPU: Final = "100.0"
WIDEST_RSS: Final = "1023.9 MiB"


class Table(QWidget):
    def __init__(
        self,
        model: RowModel,
        empty_text: str,
        *,
        wrap: bool = True,
        widest: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(model)
        self.proxy.setSortRole(SORT_ROLE)
        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(wrap)
        self.view.verticalHeader().setVisible(False)
        # Sized to the contents once, when rows first appear, then left to the
        # user: ResizeToContents re-measures every cell on every row update,
        # which with a thousand ticking rows is more work than a second holds.
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.horizontalHeader().setStretchLastSection(True)
        self._widest = dict(widest or {})
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
            QTimer.singleShot(0, self.size_columns)

    def size_columns(self) -> None:
        """Fit the columns to their contents, and the usage columns to their widest text
        (their cells are empty until the first sample: sized on those, "68.1 MiB"
        would wrap onto two lines)."""
        self.view.resizeColumnsToContents()
        metrics = self.view.fontMetrics()
        for key, widest in self._widest.items():
            column = self.model.column(key)
            wanted = metrics.horizontalAdvance(widest) + 16
            header = metrics.horizontalAdvance(str(self.model.COLUMNS[column][1])) + 28
            self.view.setColumnWidth(column, max(self.view.columnWidth(column), wanted, header))

    def selected_keys(self) -> list[str]:
        keys = []
        for index in self.view.selectionModel().selectedRows():
            keys.append(str(self.proxy.data(index, Qt.ItemDataRole.UserRole)))
        return keys

    def current_key(self) -> str | None:
        index = self.view.currentIndex()
        if not index.isValid():
            return None
        return str(self.proxy.data(index, Qt.ItemDataRole.UserRole))

    def add_button(self, text: str) -> QPushButton:
        button = QPushButton(text)
        self.buttons.addWidget(button)
        return button


class TimelineHighlighter(QSyntaxHighlighter):
    """mcp-tray's notes in blue, the child's stderr as it wrote it."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self.note = QTextCharFormat()
        self.note.setForeground(QColor("#1f5fae"))
        self.marker = f"  {NOTE_SOURCE}  "

    def highlightBlock(self, text: str) -> None:
        if self.marker in text[:32]:
            self.setFormat(0, len(text), self.note)


class MainWindow(QMainWindow):
    def __init__(self, link: CoreLink) -> None:
        super().__init__()
        self.link = link
        self.service = service = link.service
        self.setWindowTitle("mcp-tray")
        self.setWindowIcon(app_icon())
        self.resize(1120, 680)
        self._snapshot: TraySnapshot = link.snapshot()

        self.servers = Table(
            ServersModel(),
            "No servers configured. Add them to your config file.",
            wrap=False,
            widest={"cpu": WIDEST_CPU, "rss": WIDEST_RSS},
        )
        self.servers.view.setItemDelegateForColumn(
            ServersModel.column("activity"), ActivityDelegate(self.servers.view)
        )
        self.workers = Table(
            WorkersModel(),
            "No workers yet: a row appears for each client connected through `mcp-tray connect` or over HTTP.",
        )
        self.sessions = Table(
            SessionsModel(),
            "No client sessions. Point a client at mcp-tray (mcp-tray client-config).",
        )
        self.profiles = Table(ProfilesModel(), "No profiles.")
        self.warnings = Table(WarningsModel(), "No warnings.")
        # Warnings are few and their texts long: wrapped in place, no sideways scrolling.
        warnings_header = self.warnings.view.horizontalHeader()
        for key in ("message", "fix"):
            warnings_header.setSectionResizeMode(
                WarningsModel.column(key), QHeaderView.ResizeMode.Stretch
            )
        self.warnings.view.verticalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents
        )
        self.heartbeat = QLabel()
        self.workers.layout().insertWidget(0, self.heartbeat)  # type: ignore[union-attr]

        self.respawn_button = self.servers.add_button("Respawn")
        self.stop_button = self.servers.add_button("Stop")
        self.start_button = self.servers.add_button("Start")
        self.servers.buttons.addStretch()
        self.open_log_button = self.servers.add_button("Open log file")
        self.respawn_button.clicked.connect(
            lambda: self._on_servers(self.respawn_button, service.supervisor.respawn)
        )
        self.stop_button.clicked.connect(
            lambda: self._on_servers(self.stop_button, service.supervisor.stop_server)
        )
        self.start_button.clicked.connect(
            lambda: self._on_servers(self.start_button, service.supervisor.start_server)
        )
        self.open_log_button.clicked.connect(self._open_selected_log)

        self.details = DetailsPane(self._offer, lambda: link.snapshot().config_path)
        self.servers_split = QSplitter(Qt.Orientation.Vertical)
        self.servers_split.addWidget(self.servers)
        self.servers_split.addWidget(self.details)
        self.servers_split.setStretchFactor(0, 3)
        self.servers_split.setStretchFactor(1, 2)
        self.servers.view.selectionModel().currentRowChanged.connect(
            lambda current, previous: self._show_details()
        )
        self.servers.model.rowsInserted.connect(self._select_first_server)

        self.reset_button = self.sessions.add_button("Reset")
        self.reset_all_button = self.sessions.add_button("Reset all")
        self.sessions.buttons.addStretch()
        self.reset_button.clicked.connect(self._reset_selected)
        self.reset_all_button.clicked.connect(self._reset_all)

        self.logs = self._logs_tab()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.servers_split, "Servers")
        self.tabs.addTab(self.workers, "Workers")
        self.tabs.addTab(self.sessions, "Sessions")
        self.tabs.addTab(self.profiles, "Profiles")
        self.tabs.addTab(self.warnings, "Warnings")
        self.tabs.addTab(self.logs, "Logs")
        self.activity = ActivityTab(link)
        self.tabs.addTab(self.activity, "Activity")
        self.approvals = ApprovalsTab(link, lambda text: self.statusBar().showMessage(text, 8000))
        self.tabs.addTab(self.approvals, "Approvals")
        self.tabs.currentChanged.connect(lambda _: self._logs_maybe_open())
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
        self.sampler = UsageSampler(service.stats, self._live_pids)
        self.sampler.changed.connect(self._refresh_servers)
        link.changed.connect(self.refresh)
        link.stderr.connect(self._stderr_arrived)
        self.refresh(self._snapshot, set())

    # ------------------------------------------------------------ updates

    def refresh(self, snapshot: TraySnapshot, kinds: object = None) -> None:
        self._snapshot = snapshot
        now = time.time()
        self._refresh_servers(now)
        self.workers.model.set_rows(snapshot.workers, now)
        self.sessions.model.set_rows(snapshot.sessions, now)
        self.profiles.model.set_rows(snapshot.profiles, now)
        self.warnings.model.set_rows(snapshot.warnings, now)
        self.config_error.setVisible(bool(snapshot.config_error))
        self.config_error.setText(
            f"Config edit refused — still running the last good config.\n{snapshot.config_error or ''}"
        )
        self._refresh_log_servers(snapshot.servers)
        # Only warnings count; advice and information are listed, not counted.
        count = count_warnings(warning.family for warning in snapshot.warnings)
        # By widget, never by position: a tab added before one would take its title.
        self.tabs.setTabText(self.tabs.indexOf(self.warnings), f"Warnings ({count})")
        waiting = len(snapshot.approvals)
        self.tabs.setTabText(
            self.tabs.indexOf(self.approvals), f"Approvals ({waiting})" if waiting else "Approvals"
        )
        self._heartbeat_status()
        self._show_details()
        if self.isVisible() and self.tabs.currentWidget() is self.logs:
            self._poll_log_soon()

    def _refresh_servers(self, now: float | None = None) -> None:
        servers = self._snapshot.servers
        series = self.link.series([s.name for s in servers])
        rows = server_rows(servers, self.sampler.usage, series.__getitem__)
        self.servers.model.set_rows(rows, time.time() if now is None else now)

    def tick(self) -> None:
        now = time.time()
        # Sparklines slide (a new bucket every 10 s: rows change only then).
        self._refresh_servers(now)
        self.servers.model.tick(now)
        self.workers.model.tick(now)
        if self.tabs.currentWidget() is self.logs:
            self.poll_log()

    def _live_pids(self) -> dict[str, int]:
        return {s.name: s.pid for s in self._snapshot.servers if s.pid is not None}

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

    # ------------------------------------------------------------ details

    def _server_snapshot(self, name: str | None) -> ServerSnapshot | None:
        for server in self._snapshot.servers:
            if server.name == name:
                return server
        return None

    def _offer(self, name: str) -> ServerOffer | None:
        def read() -> ServerOffer | None:
            for server in self.service.supervisor.all_servers():
                if server.name == name:
                    return offer_of(server)
            return None

        # On core's loop, which owns the catalog; a quick read.
        return self.link.call(read)

    def _show_details(self) -> None:
        self.details.show_server(self._server_snapshot(self.servers.current_key()))

    def _select_first_server(self) -> None:
        view = self.servers.view
        if not view.currentIndex().isValid() and self.servers.proxy.rowCount() > 0:
            view.setCurrentIndex(self.servers.proxy.index(0, 0))

    def select_server(self, name: str) -> None:
        proxy = self.servers.proxy
        for row in range(proxy.rowCount()):
            index = proxy.index(row, 0)
            if proxy.data(index, Qt.ItemDataRole.UserRole) == name:
                self.servers.view.setCurrentIndex(index)
                return
        raise McpTrayError(f"no row for server {name!r}")

    # ------------------------------------------------------------ actions

    def run(self, button: QPushButton | None, coro: Coroutine[Any, Any, Any], done: str) -> None:
        """A core call as a flow on the GUI loop (``act``); the button disabled at once."""
        if button is not None:
            button.setEnabled(False)
        self.link.spawn(self.act(button, self.link.ask(coro), done))

    async def act(self, button: QPushButton | None, call: Awaitable[Any], done: str) -> None:
        """Await the core call, then its outcome in the status bar and the button back."""
        try:
            await call
        except McpTrayError as error:
            self.statusBar().showMessage(str(error), 15000)
        except Exception as error:
            self.statusBar().showMessage(f"{type(error).__name__}: {error}", 15000)
        else:
            self.statusBar().showMessage(done, 5000)
        finally:
            if button is not None:
                button.setEnabled(True)

    def _on_servers(self, button: QPushButton, act: Callable[[str], Awaitable[None]]) -> None:
        names = self.servers.selected_keys()
        if not names:
            self.statusBar().showMessage("Select a server first.", 5000)
            return

        async def all_of() -> None:
            for name in names:
                await act(name)

        self.run(button, all_of(), f"{button.text()}: {', '.join(names)} done")

    def _open_selected_log(self) -> None:
        server = self._server_snapshot(self.servers.current_key())
        if server is None:
            self.statusBar().showMessage("Select a server first.", 5000)
            return
        QDesktopServices.openUrl(QUrl.fromLocalFile(server.log_path))

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
        self.log_server.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.follow = QCheckBox("Follow")
        self.follow.setChecked(True)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter lines…")
        self.filter.setClearButtonEnabled(True)
        self.log_view = QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LINES)
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.log_view.setFont(QFont("monospace"))
        self._highlighter = TimelineHighlighter(self.log_view.document())
        legend = QLabel(
            f"<span style='color:#1f5fae'>{NOTE_SOURCE}</span>: mcp-tray's notes · "
            "stderr: the server's own output"
        )
        legend.setStyleSheet("color: gray;")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Server"))
        bar.addWidget(self.log_server)
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.follow)
        layout = QVBoxLayout(widget)
        layout.addLayout(bar)
        layout.addWidget(self.log_view)
        layout.addWidget(legend)
        self._log_paths: dict[str, str] = {}
        self._follower: LogFollower | None = None
        self._log_lines: deque[LogLine] = deque(maxlen=LOG_LINES)
        self._log_soon = QTimer(self)
        self._log_soon.setSingleShot(True)
        self._log_soon.setInterval(LOG_SOON_MS)
        self._log_soon.timeout.connect(self.poll_log)
        self.log_server.currentTextChanged.connect(lambda _: self.open_log())
        self.filter.textChanged.connect(lambda _: self._render_log())
        return widget

    def _refresh_log_servers(self, servers: tuple[ServerSnapshot, ...]) -> None:
        self._log_paths = {s.name: s.log_path for s in servers}
        names = [s.name for s in servers]
        if names == [self.log_server.itemText(i) for i in range(self.log_server.count())]:
            return
        current = self.log_server.currentText()
        self.log_server.blockSignals(True)
        self.log_server.clear()
        self.log_server.addItems(names)
        if current in names:
            self.log_server.setCurrentText(current)
        self.log_server.blockSignals(False)
        if self.log_server.currentText() != current or self._follower is None:
            self.open_log()

    def _logs_showing(self) -> bool:
        return self.isVisible() and self.tabs.currentWidget() is self.logs

    def _logs_maybe_open(self) -> None:
        if self.tabs.currentWidget() is not self.logs:
            return
        if self._follower is None or self._follower.path != self._current_log_path():
            self.open_log()
        else:
            self.poll_log()

    def _current_log_path(self) -> Path | None:
        path = self._log_paths.get(self.log_server.currentText())
        return Path(path) if path else None

    def open_log(self) -> None:
        """Read the selected server's timeline afresh (its file's last LOG_LINES lines).

        Only when the Logs tab is the current one: a window on the Servers
        tab reads no log file.
        """
        if self._follower is not None:
            self._follower.close()
            self._follower = None
        self._log_lines.clear()
        path = self._current_log_path()
        name = self.log_server.currentText()
        self.log_view.setPlaceholderText(
            f"No log lines yet for {name}: mcp-tray writes its notes about it and its stderr to {path}."
            if name
            else "No servers configured."
        )
        if path is not None and self.tabs.currentWidget() is self.logs:
            self._follower = LogFollower(path, LOG_LINES)
            self._log_lines.extend(self._follower.open())
        self._render_log()

    def poll_log(self) -> None:
        """Show what was appended to the followed file since the last look."""
        follower = self._follower
        if follower is None:
            return
        fresh = follower.poll()
        if not fresh:
            return
        self._log_lines.extend(fresh)
        needle = self.filter.text().lower()
        shown = [line.display() for line in fresh]
        if needle:
            shown = [text for text in shown if needle in text.lower()]
        if not shown:
            return
        scrollbar = self.log_view.verticalScrollBar()
        at_end = scrollbar.value() == scrollbar.maximum()
        self.log_view.appendPlainText("\n".join(shown))
        if self.follow.isChecked() or at_end:
            scrollbar.setValue(scrollbar.maximum())

    def _render_log(self) -> None:
        needle = self.filter.text().lower()
        shown = [line.display() for line in self._log_lines]
        if needle:
            shown = [text for text in shown if needle in text.lower()]
        self.log_view.setPlainText("\n".join(shown))
        if self.follow.isChecked():
            self.log_view.moveCursor(self.log_view.textCursor().MoveOperation.End)
            self.log_view.verticalScrollBar().setValue(self.log_view.verticalScrollBar().maximum())

    def log_text(self) -> str:
        return self.log_view.toPlainText()

    def _poll_log_soon(self) -> None:
        if self._follower is not None and not self._log_soon.isActive():
            self._log_soon.start()

    def _stderr_arrived(self, server: str, line: str) -> None:
        if server == self.log_server.currentText() and self._logs_showing():
            self._poll_log_soon()

    # ------------------------------------------------------- show and hide

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._ticker.start()
        self.sampler.start()
        self.tick()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._ticker.stop()
        self.sampler.stop()
        self._log_soon.stop()

    def close_down(self) -> None:
        """Hide and let a sample under way finish (before the service stops)."""
        self.hide()
        self.approvals.close_down()
        if self._follower is not None:
            self._follower.close()
            self._follower = None
        self.sampler.close()
        self.activity.close_down()

    def bring_up(self) -> None:
        self.show()
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.raise_()
        self.activateWindow()
