"""The tray icon: colour, tooltip, a menu rebuilt each time it opens, notifications."""

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from app.connect_dialog import ConnectDialog, for_service
from app.core_link import CoreLink
from app.icons import tray_icon
from app.sign_in import start_sign_in
from app.status import TrayStatus, tray_status
from core.base.snapshot import AlertKind, TraySnapshot
from core.base.states import ServerState

logger = logging.getLogger(__name__)

#: At most one notification per server (or per kind) in this many seconds.
NOTIFY_EVERY_SECONDS: Final = 60.0


class Notifier:
    """Rate limit for tray messages, on an injected clock."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, every: float = NOTIFY_EVERY_SECONDS
    ) -> None:
        self._clock = clock
        self._every = every
        self._last: dict[str, float] = {}

    def allow(self, key: str) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._every:
            return False
        self._last[key] = now
        return True


def build_menu(menu: QMenu, snapshot: TraySnapshot, actions: "TrayActions") -> None:
    """Fill ``menu`` from ``snapshot`` (called on every aboutToShow)."""
    menu.clear()
    # The same words as the tooltip: the most severe cause (bold; it opens the
    # window, where the details are), then what to do.
    cause, *fix = tray_status(snapshot).menu_lines
    header = menu.addAction(cause)
    font = header.font()
    font.setBold(True)
    header.setFont(font)
    header.triggered.connect(lambda _=False: actions.open_window())
    for line in fix:
        menu.addAction(line).setEnabled(False)
    menu.addSeparator()
    if not snapshot.servers:
        empty = menu.addAction("No servers configured")
        empty.setEnabled(False)
    for server in snapshot.servers:
        sub = menu.addMenu(f"{server.name} — {server.state.value}")
        sub.setObjectName(f"server:{server.name}")
        respawn = sub.addAction("Respawn")
        respawn.triggered.connect(lambda _=False, n=server.name: actions.respawn(n))
        stop = sub.addAction("Stop")
        stop.setEnabled(server.state is not ServerState.STOPPED)
        stop.triggered.connect(lambda _=False, n=server.name: actions.stop(n))
        start = sub.addAction("Start")
        start.setEnabled(server.state is ServerState.STOPPED)
        start.triggered.connect(lambda _=False, n=server.name: actions.start(n))
        if server.remote:
            sign_in = sub.addAction(f"Sign in to {server.name}…")
            sign_in.triggered.connect(
                lambda _=False, n=server.name: actions.sign_in(n, snapshot.config_path)
            )
        log = sub.addAction("Open log")
        log.triggered.connect(lambda _=False, path=server.log_path: actions.open_log(path))
    menu.addSeparator()
    tripped = [s for s in snapshot.sessions if s.tripped]
    reset = menu.addAction(f"Reset tripped sessions ({len(tripped)})")
    reset.setEnabled(bool(tripped))
    reset.triggered.connect(lambda _=False: actions.reset_all())
    menu.addSeparator()
    menu.addAction("Connect a client…").triggered.connect(lambda _=False: actions.connect_client())
    menu.addAction("Open window").triggered.connect(lambda _=False: actions.open_window())
    menu.addAction("Quit").triggered.connect(lambda _=False: actions.quit())


class TrayActions:
    """What the menu's entries do: each core call a flow on the GUI loop that awaits it on
    core's loop (through the link); a failure is told to ``report`` (the Gui: a tray message)."""

    def __init__(
        self,
        link: CoreLink,
        open_window: Callable[[], None],
        quit_app: Callable[[], None],
        report: Callable[[str], None] | None = None,
    ) -> None:
        self._link = link
        self._open_window = open_window
        self._quit = quit_app
        self.report = report or logger.warning
        self._connect_dialog: ConnectDialog | None = None

    def respawn(self, name: str) -> None:
        self._do(self._link.supervisor.respawn(name), f"Respawn {name}")

    def stop(self, name: str) -> None:
        self._do(self._link.supervisor.stop_server(name), f"Stop {name}")

    def start(self, name: str) -> None:
        self._do(self._link.supervisor.start_server(name), f"Start {name}")

    def reset_all(self) -> None:
        sessions = self._link.service.sessions

        async def reset() -> None:
            sessions.reset_all()

        self._do(reset(), "Reset tripped sessions")

    def _do(self, coro: Coroutine[Any, Any, object], what: str) -> None:
        self._link.spawn(self.act(self._link.ask(coro), what))

    async def act(self, call: Awaitable[object], what: str) -> None:
        try:
            await call
        except Exception as exc:
            self.report(f"{what} failed: {exc}")

    def sign_in(self, name: str, config: str) -> None:
        problem = start_sign_in(name, config)
        if problem is not None:
            self.report(problem)

    def open_log(self, path: str) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(path))

    def open_window(self) -> None:
        self._open_window()

    def connect_client(self) -> None:
        """Open the "Connect a client" dialog; a second click brings the open one forward."""
        dialog = self._connect_dialog
        if dialog is None or not dialog.isVisible():
            # A fresh dialog each time: the servers and the client's file may have changed.
            dialog = self._connect_dialog = for_service(self._link.service)
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()

    def quit(self) -> None:
        self._quit()


class TrayController:
    def __init__(
        self, link: CoreLink, actions: TrayActions, notifier: Notifier | None = None
    ) -> None:
        self.link = link
        self.actions = actions
        self.notifier = notifier or Notifier()
        self.icon = QSystemTrayIcon()
        self.menu = QMenu()
        self.menu.aboutToShow.connect(self._rebuild)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.status: TrayStatus | None = None
        link.changed.connect(self.update)
        link.alert.connect(self._alert)
        self.update(link.snapshot(), set())

    def show(self) -> None:
        self.icon.show()

    def say(self, text: str) -> None:
        """A tray action's failure, as a tray message (and in the log)."""
        logger.warning("%s", text)
        if QSystemTrayIcon.supportsMessages():
            self.icon.showMessage("mcp-tray", text, QSystemTrayIcon.MessageIcon.Warning, 8000)

    def update(self, snapshot: TraySnapshot, kinds: object = None) -> None:
        status = tray_status(snapshot)
        if status != self.status:
            self.status = status
            self.icon.setIcon(tray_icon(status.colour))
            self.icon.setToolTip(status.tooltip)

    def _rebuild(self) -> None:
        build_menu(self.menu, self.link.snapshot(), self.actions)

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (
            QSystemTrayIcon.ActivationReason.Trigger,
            QSystemTrayIcon.ActivationReason.DoubleClick,
        ):
            self.actions.open_window()

    def _alert(self, kind: AlertKind, server: str, text: str) -> None:
        if kind is AlertKind.APPROVAL:
            # Never rate-limited: each one stops an agent until the person answers.
            if QSystemTrayIcon.supportsMessages():
                self.icon.showMessage(
                    "mcp-tray: waiting for your approval",
                    text,
                    QSystemTrayIcon.MessageIcon.Information,
                    15000,
                )
            return
        if not self.notifier.allow(f"{kind.value}:{server}"):
            return
        if kind is AlertKind.PARKED:
            title, body = (
                f"{server} parked",
                f"{text}. Respawn it from the mcp-tray menu when fixed.",
            )
        elif kind is AlertKind.SIGN_IN:
            title, body = (
                f"{server} needs you to sign in",
                f"{text}. Choose 'Sign in to {server}…' in the mcp-tray menu.",
            )
        elif kind is AlertKind.LIMIT:
            title, body = f"{server} replaced", f"{text}. mcp-tray started a fresh one."
        elif kind is AlertKind.TRIPPED:
            title, body = (
                "A client session tripped",
                "It failed 3 times in a row. Reset it from the mcp-tray window.",
            )
        else:
            title, body = "Config edit refused", text
        self.icon.showMessage(title, body, QSystemTrayIcon.MessageIcon.Warning, 8000)
