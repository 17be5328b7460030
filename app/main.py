"""``mcp-tray`` with a display: the tray application.

QApplication under qasync, with the core TrayService (supervisor, gateway,
registry watch, hot reload, local HTTP server) on that same loop. One
instance per user: a second launch asks the first to raise its window and
exits 0. With no system tray available it says so in one line and runs
headless instead.

A person who launches it (the menu entry, ``mcp-tray``, ``make run``) gets
the window; the login autostart entry passes ``--minimized`` and it stays
in the tray, unless the config is broken (then the window shows why).
"""

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from core.base.errors import AlreadyRunning, NotRunning
from core.cli.control_client import ControlClient
from core.platform.signals import on_stop_signals
from core.settings.config import TrayConfig
from core.settings.paths import Paths


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
    return 0


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
    import qasync

    try:
        return int(qasync.run(_main(app, config, paths, config_error, minimized=minimized)))
    except AlreadyRunning as exc:
        print(f"mcp-tray: {exc}", file=sys.stderr)
        return 0


class Gui:
    """The desktop side over a started TrayService: window, tray icon, quit."""

    def __init__(self, app: Any, service: Any) -> None:
        from app.core_link import CoreLink
        from app.icons import app_icon
        from app.tray import TrayActions, TrayController
        from app.window import MainWindow

        self.service = service
        app.setWindowIcon(app_icon())
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.link = CoreLink(service.supervisor)
        self.window = MainWindow(self.link, service)
        service.on_raise = self.window.bring_up
        self.tray = TrayController(self.link, TrayActions(service, self.window.bring_up, self.quit))
        self._undo_signals = on_stop_signals(asyncio.get_running_loop(), self.quit)

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
        if not self.done.done():
            self.done.set_result(0)

    async def close(self) -> None:
        self.tray.icon.hide()
        await self.window.aclose()
        self.link.close()
        self._undo_signals()
        await self.service.aclose()


async def _main(
    app: Any,
    config: TrayConfig,
    paths: Paths,
    config_error: str | None,
    *,
    minimized: bool = False,
    started: Callable[[Gui], None] | None = None,
) -> int:
    """The tray until Quit; ``started`` is told the Gui once it shows (tests)."""
    from core.serving.service import TrayService

    service = TrayService(config, paths)
    await service.start()
    if config_error:
        service.supervisor.report_config_error(config_error)
    gui = Gui(app, service)
    gui.show()
    gui.present(minimized=minimized, config_error=config_error)
    print(f"mcp-tray running in the tray; API {service.url}", file=sys.stderr, flush=True)
    if started is not None:
        started(gui)
    try:
        return await gui.done
    finally:
        await gui.close()
