"""``mcp-tray`` with a display: the tray application.

QApplication under qasync, with the core TrayService (supervisor, gateway,
registry watch, hot reload, local HTTP server) on that same loop. One
instance per user: a second launch asks the first to raise its window and
exits 0. With no system tray available it says so in one line and runs
headless instead.
"""

import asyncio
import signal
import sys
from typing import Any

from core.base.errors import AlreadyRunning, NotRunning
from core.cli.control_client import ControlClient
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


def run_gui(config: TrayConfig, paths: Paths, config_error: str | None = None) -> int:
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
        return int(qasync.run(_main(app, config, paths, config_error)))
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
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.quit)

    def show(self) -> None:
        from PySide6.QtWidgets import QSystemTrayIcon

        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray.show()

    def quit(self) -> None:
        if not self.done.done():
            self.done.set_result(0)

    async def close(self) -> None:
        self.tray.icon.hide()
        self.window.hide()
        self.link.close()
        await self.service.aclose()


async def _main(app: Any, config: TrayConfig, paths: Paths, config_error: str | None) -> int:
    from core.serving.service import TrayService

    service = TrayService(config, paths)
    await service.start()
    if config_error:
        service.supervisor.report_config_error(config_error)
    gui = Gui(app, service)
    gui.show()
    if config_error:
        gui.window.bring_up()
    print(f"mcp-tray running in the tray; API {service.url}", file=sys.stderr, flush=True)
    try:
        return await gui.done
    finally:
        await gui.close()
