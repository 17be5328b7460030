"""``mcp-tray`` with a display: the tray application.

The GUI thread runs qasync's loop (Qt's own loop, with asyncio's on top)
for the window's flows, which are coroutines there (app.core_link); the
core TrayService (supervisor, gateway, registry watch, hot reload, local
HTTP server) runs on a thread and event loop of its own
(core.serving.core_thread; docs/architecture.md#the-event-loop says why), reached
through app.core_link. One instance per user: a second launch asks the
first to raise its window and exits 0. With no system tray available it
says so in one line and runs headless instead.

A person who launches it (the menu entry, ``mcp-tray``, ``make run``) gets
the window; the login autostart entry passes ``--minimized`` and it stays
in the tray, unless the config is broken (then the window shows why).
"""

import asyncio
import socket
import sys
from collections.abc import Callable
from typing import Any

from core.base.collector import settle_after_start
from core.base.errors import AlreadyRunning, NotRunning
from core.base.exitcodes import EXIT_FAILED, EXIT_OK
from core.cli.control_client import ControlClient
from core.platform.signals import handle_stop_signals, wake_on_signals
from core.serving.core_thread import CoreThread
from core.settings.config import TrayConfig
from core.settings.paths import Paths

#: GUI loops run and closed here, kept until the process ends: core's thread may hold
#: references to one (finished futures) and must never be the one that frees its Qt objects.
_CLOSED_LOOPS: list[asyncio.AbstractEventLoop] = []


def ask_running_instance_to_raise(paths: Paths) -> int | None:
    """0 when another instance runs (asked to raise its window), None when none does."""
    try:
        client = ControlClient.connect(paths, timeout=5)
    except NotRunning:
        return None
    reply = client.request("POST", "/api/v1/ui/raise")
    if reply.ok:
        print(
            f"mcp-tray is already running (pid {client.info.pid}): raised its window",
            file=sys.stderr,
        )
    else:
        print(
            f"mcp-tray is already running (pid {client.info.pid}, {reply.error})", file=sys.stderr
        )
    return EXIT_OK


def run_gui(
    config: TrayConfig,
    paths: Paths,
    config_error: str | None = None,
    *,
    minimized: bool = False,
) -> int:
    if (code := ask_running_instance_to_raise(paths)) is not None:
        return code
    from PySide6.QtWidgets import QApplication, QSystemTrayIcon

    app = QApplication.instance() or QApplication(sys.argv[:1])
    if not QSystemTrayIcon.isSystemTrayAvailable():
        print("mcp-tray: this desktop has no system tray: running headless", file=sys.stderr)
        from core.cli.headless import run_headless

        return run_headless(config, paths)
    assert isinstance(app, QApplication)
    app.setApplicationName("mcp-tray")
    app.setQuitOnLastWindowClosed(False)
    core = start_core(config, paths)
    if isinstance(core, int):
        return core
    settle_after_start()
    try:
        return launch(app, core, config_error, minimized=minimized)
    finally:
        core.stop()


def start_core(config: TrayConfig, paths: Paths) -> "CoreThread | int":
    """The core started on its own thread, or the exit code when it cannot start."""
    from core.serving.service import TrayService

    core = CoreThread(lambda: TrayService(config, paths, subreaper=True))
    try:
        core.start()
    except AlreadyRunning as exc:
        print(f"mcp-tray: {exc}", file=sys.stderr)
        return EXIT_OK
    except OSError as exc:
        print(f"mcp-tray: cannot start: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return core


class Gui:
    """The desktop side over a started core: window, tray icon, quit."""

    def __init__(self, app: Any, core: CoreThread, gui_loop: asyncio.AbstractEventLoop) -> None:
        from app.core_link import CoreLink
        from app.icons import app_icon
        from app.tray import TrayActions, TrayController
        from app.window import MainWindow

        self.app = app
        self.core = core
        app.setWindowIcon(app_icon())
        self.link = CoreLink(core, gui_loop)
        self.window = MainWindow(self.link)
        # Asked on core's loop (the raise request of a second launch): shown on the GUI thread.
        core.service.on_raise = lambda: self.link.on_gui(self.window.bring_up)
        # `mcp-tray quit`: as the tray menu's Quit.
        core.service.on_quit = lambda: self.link.on_gui(self.quit)
        self.tray = TrayController(
            self.link, TrayActions(self.link, self.window.bring_up, self.quit)
        )
        self.tray.actions.report = self.tray.say
        self.quitting = False
        self._undo_signals = self._hear_stop_signals()

    def _hear_stop_signals(self) -> Callable[[], None]:
        """SIGTERM/SIGINT (Ctrl+C, Ctrl+Break on Windows) quit as the Quit entry does.

        Python runs signal handlers on the main thread only when it runs
        bytecode; Qt's loop is C++, so the signal's wake-up byte (a socket
        Qt watches) makes Qt call back into Python at once.
        """
        from PySide6.QtCore import QSocketNotifier

        undo_handlers = handle_stop_signals(self.quit)
        wake, undo_wake = wake_on_signals()
        notifier = QSocketNotifier(wake.fileno(), QSocketNotifier.Type.Read)
        notifier.activated.connect(lambda *_: _drain(wake))
        self._notifier = notifier

        def undo() -> None:
            notifier.setEnabled(False)
            undo_wake()
            undo_handlers()

        return undo

    def show(self) -> None:
        from PySide6.QtWidgets import QSystemTrayIcon

        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray.show()

    def present(self, *, minimized: bool, config_error: str | None = None) -> None:
        """The window for a person's launch; only the tray for the autostart
        (``--minimized``), unless a broken config needs saying."""
        if not minimized or config_error:
            self.window.bring_up()

    def quit(self) -> None:
        self.quitting = True
        self.app.quit()

    def close(self) -> None:
        """Take the desktop side down (the core is stopped after, by its owner)."""
        self.core.service.on_raise = None
        self.core.service.on_quit = None
        self.tray.icon.hide()
        self.window.close_down()
        self.link.close()
        self._undo_signals()


def _drain(wake: socket.socket) -> None:
    try:
        while wake.recv(512):
            pass
    except (BlockingIOError, InterruptedError):
        return


def launch(
    app: Any,
    core: CoreThread,
    config_error: str | None = None,
    *,
    minimized: bool = False,
    started: Callable[[Gui], None] | None = None,
) -> int:
    """The desktop side over a started core, until Quit; ``started`` is told the Gui
    once the loop runs (tests).

    Qt's loop runs as qasync's ``QEventLoop`` (``run_forever`` is ``app.exec``),
    so the window's coroutines run between Qt's events; Quit ends it as before.
    """
    import qasync
    from PySide6.QtCore import QTimer

    if config_error:
        core.call(core.service.supervisor.report_config_error, config_error)
    loop = qasync.QEventLoop(app)
    gui = Gui(app, core, loop)
    gui.show()
    gui.present(minimized=minimized, config_error=config_error)
    print(f"mcp-tray running in the tray; API {core.service.url}", file=sys.stderr, flush=True)
    if started is not None:
        QTimer.singleShot(0, lambda: started(gui))
    try:
        loop.run_forever()
    finally:
        gui.close()
        # The flows cancelled by the close end on the loop, not as "destroyed but pending".
        loop.run_until_complete(gui.link.settled())
        loop.close()
        _CLOSED_LOOPS.append(loop)
    return EXIT_OK
