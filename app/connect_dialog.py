"""The "Connect a client…" dialog: write chosen servers, or one profile, into a client's config.

Only the widgets live here. What would be written, the diff, the backup and
the atomic write are ``core.cli.install``'s ``plan_install`` and
``apply_install``, the same ones ``mcp-tray client-config --install`` uses,
so the dialog and the command cannot disagree. The dialog takes its inputs
(server names, a function that makes the entries, the home folder) as
arguments, so tests run it offscreen on a tmp_path home; ``for_service``
wires it to the running tray. Install is a flow on the GUI loop (qasync's):
the write runs on a worker thread and is awaited, so the window and the
tray stay live while a slow disk or a synced folder takes its time; the
preview is planned again once it is done. A profile (``all``, or one of the config's
``profiles``) is one entry that serves all of its servers
(core.settings.profiles); the chosen servers are one entry each.
"""

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from core.base.errors import McpTrayError
from core.cli.install import (
    Entries,
    InstallPlan,
    InstallResult,
    apply_install,
    plan_install,
    snippet_entries,
)
from core.cli.integrations import CLIENTS, client_config_path, installable_clients
from core.settings.profiles import ALL_PROFILE, target

#: Makes the entries for (client, server names, over HTTP rather than the bridge).
MakeEntries = Callable[[str, Sequence[str], bool], Entries]
#: Writes a plan (``apply_install``; a seam for tests that hold the write).
Apply = Callable[[InstallPlan], InstallResult]

#: Errors and conflicts stand out from the plain status text.
ERROR_STYLE: Final = "color: #b3261e;"
#: Pixels: about six servers show before the list scrolls.
SERVER_LIST_MAX_HEIGHT: Final = 130
#: What the user can do about a conflict here (the CLI says --overwrite instead).
CONFLICT_FIX: Final = "tick 'Replace entries…' to replace it, or untick that server"


class ConnectDialog(QDialog):
    """Choose a client, servers and bridge or HTTP; see the diff; install it."""

    #: An install wrote the client's file (the InstallResult).
    installed = Signal(object)

    def __init__(
        self,
        server_names: Sequence[str],
        make_entries: MakeEntries,
        *,
        profiles: Sequence[str] = (),
        home: Path | None = None,
        xdg_config_home: Path | None = None,
        parent: QWidget | None = None,
        apply: Apply = apply_install,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect a client")
        self.resize(720, 560)
        self._make_entries = make_entries
        self._home = home
        self._xdg_config_home = xdg_config_home
        self._apply = apply
        #: The write under way (a task on the GUI loop), if any.
        self.writing: asyncio.Task[None] | None = None
        #: The plan the preview shows; Install writes exactly this one.
        self.plan: InstallPlan | None = None
        #: The last install's outcome.
        self.outcome: InstallResult | None = None

        self.client_box = QComboBox()
        for client in installable_clients():
            self.client_box.addItem(CLIENTS[client].label, client)
        self.target_label = QLabel()
        self.target_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.server_list = QListWidget()
        for name in server_names:
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            self.server_list.addItem(item)
        # The diff is what needs the room; a long server list scrolls.
        self.server_list.setMaximumHeight(SERVER_LIST_MAX_HEIGHT)
        #: One entry per chosen server (no data), or one for a profile (its ``@NAME``).
        self.what_box = QComboBox()
        self.what_box.addItem("The servers ticked below, one entry each", None)
        for profile in (ALL_PROFILE, *profiles):
            shown = "every server" if profile == ALL_PROFILE else f"profile {profile!r}"
            self.what_box.addItem(f"One entry for {shown} ({target(profile)})", target(profile))

        self.bridge_button = QRadioButton(
            "Bridge: the client launches `mcp-tray connect` (works with every client)"
        )
        self.http_button = QRadioButton(
            "HTTP: the client connects to mcp-tray's local gateway (the file holds the API token)"
        )
        self.bridge_button.setChecked(True)
        self.overwrite_box = QCheckBox(
            "Replace entries of the same name that mcp-tray did not write"
        )

        self.preview = QPlainTextEdit()
        self.preview.setReadOnly(True)
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.preview.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.preview.setPlaceholderText("No change to show.")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        buttons = QDialogButtonBox()
        self.install_button: QPushButton = buttons.addButton(
            "Install", QDialogButtonBox.ButtonRole.ActionRole
        )
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.install_button.clicked.connect(self.install)

        form = QFormLayout()
        form.addRow("Client", self.client_box)
        form.addRow("Its file", self.target_label)
        form.addRow("Entries", self.what_box)
        form.addRow("Servers", self.server_list)
        transport = QVBoxLayout()
        transport.addWidget(self.bridge_button)
        transport.addWidget(self.http_button)
        form.addRow("Connect by", transport)
        form.addRow("", self.overwrite_box)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(QLabel("Changes to the file"))
        layout.addWidget(self.preview, stretch=1)
        layout.addWidget(self.status)
        layout.addWidget(buttons)

        self.client_box.currentIndexChanged.connect(self._client_changed)
        self.server_list.itemChanged.connect(self.refresh)
        self.what_box.currentIndexChanged.connect(self.refresh)
        # Of the two exclusive radios only one is watched: one refresh per switch.
        self.http_button.toggled.connect(self.refresh)
        self.overwrite_box.toggled.connect(self.refresh)
        self._client_changed()

    # ---------------------------------------------------------- state

    @property
    def client(self) -> str:
        return str(self.client_box.currentData())

    def chosen_names(self) -> list[str]:
        """What entries are made for: the chosen profile's ``@NAME``, else the ticked servers."""
        profile = self.what_box.currentData()
        return [str(profile)] if profile is not None else self.checked_servers()

    def checked_servers(self) -> list[str]:
        items = (self.server_list.item(row) for row in range(self.server_list.count()))
        return [item.text() for item in items if item.checkState() == Qt.CheckState.Checked]

    def _client_changed(self) -> None:
        # Claude Desktop launches stdio servers only (client_snippet refuses HTTP for it).
        stdio_only = not CLIENTS[self.client].http
        if stdio_only and self.http_button.isChecked():
            with QSignalBlocker(self.http_button):
                self.bridge_button.setChecked(True)
        self.http_button.setEnabled(not stdio_only)
        self.http_button.setToolTip(
            f"{CLIENTS[self.client].label} launches stdio servers only" if stdio_only else ""
        )
        self.refresh()

    def refresh(self) -> None:
        """Plan again from the current choices and show the diff (nothing is written)."""
        self.plan = None
        self.install_button.setEnabled(False)
        self.target_label.setText(
            str(
                client_config_path(
                    self.client, home=self._home, xdg_config_home=self._xdg_config_home
                )
            )
        )
        self.server_list.setEnabled(self.what_box.currentData() is None)
        names = self.chosen_names()
        if not names:
            self.preview.clear()
            if self.server_list.count():
                self._say("Choose at least one server.")
            else:
                self._say("mcp-tray has no servers configured yet: add some to its config first.")
            return
        try:
            entries = self._make_entries(self.client, names, self.http_button.isChecked())
            plan = plan_install(
                self.client,
                entries,
                home=self._home,
                xdg_config_home=self._xdg_config_home,
                overwrite=self.overwrite_box.isChecked(),
            )
        except McpTrayError as exc:
            self.preview.clear()
            self._say(str(exc), error=True)
            return
        self.plan = plan
        self.preview.setPlainText(plan.shown_diff)
        if plan.conflicts:
            self._say(plan.conflict_text(CONFLICT_FIX), error=True)
        elif plan.changes:
            self._say(f"{_sentence(plan.summary())}. After installing, {plan.restart}.")
        else:
            self._say(f"{_sentence(plan.summary())}.")
        self.install_button.setEnabled(plan.changes and not plan.conflicts and self.writing is None)

    def install(self) -> "asyncio.Task[None] | None":
        """Start writing the plan the preview shows (a flow on the GUI loop); None: nothing to."""
        if self.plan is None or self.writing is not None:
            return None
        self.writing = asyncio.get_running_loop().create_task(self.write(self.plan))
        return self.writing

    async def write(self, plan: InstallPlan) -> None:
        """Write ``plan`` on a worker thread, then say what was written and what to restart."""
        self.install_button.setEnabled(False)
        self._say(f"Writing {plan.path}…")
        try:
            result = await asyncio.to_thread(self._apply, plan)
        except Exception as exc:
            self.writing = None
            self.refresh()  # the preview shows the file as it is now
            shown = str(exc) if isinstance(exc, McpTrayError) else f"{type(exc).__name__}: {exc}"
            self._say(shown, error=True)
            return
        self.writing = None
        self.outcome = result
        self.refresh()
        self._say(str(result))
        self.installed.emit(result)

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(ERROR_STYLE if error else "")
        self.status.setProperty("error", error)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def for_service(service: Any, parent: QWidget | None = None) -> ConnectDialog:
    """The dialog over the running tray: its enabled servers, its gateway, its token."""
    from core.cli.launcher import home_override
    from core.settings.runtime import loopback_url

    config = service.supervisor.config
    names = [server.name for server in config.enabled]
    profiles = list(config.profiles)
    tray_home = home_override()
    # A tray on another file than the per-user config: its bridges start a tray on that file.
    own = (
        config.path.resolve()
        if config.path.resolve() != service.paths.config_file.resolve()
        else None
    )

    def make_entries(client: str, chosen: Sequence[str], http: bool) -> Entries:
        if not http:
            return snippet_entries(client, chosen, tray_home=tray_home, config=own)
        # The configured port outlives restarts; with 0 there is only today's.
        port = config.gateway.port
        url = loopback_url(port) if port else service.url
        return snippet_entries(client, chosen, http_url=url, token=service.token)

    return ConnectDialog(names, make_entries, profiles=profiles, parent=parent)
