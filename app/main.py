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

from core.config import TrayConfig
from core.control_client import ControlClient
from core.paths import Paths
from core.runtime import AlreadyRunning, NotRunning


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
        from core.headless import run_headless

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


async def _main(app: Any, config: TrayConfig, paths: Paths, config_error: str | None) -> int:
    from app.core_link import CoreLink
    from app.icons import app_icon
    from app.tray import TrayActions, TrayController
    from app.window import MainWindow
    from core.service import TrayService

    service = TrayService(config, paths)
    await service.start()
    if config_error:
        service.supervisor.report_config_error(config_error)
    app.setWindowIcon(app_icon())
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    link = CoreLink(service.supervisor)
    window = MainWindow(link, service)
    service.on_raise = window.bring_up

    def quit_app() -> None:
        if not done.done():
            done.set_result(0)

    actions = TrayActions(service, window.bring_up, quit_app)
    tray = TrayController(link, actions)
    tray.show()
    if config_error:
        window.bring_up()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, quit_app)
    print(f"mcp-tray running in the tray; API {service.url}", file=sys.stderr, flush=True)
    try:
        return await done
    finally:
        tray.icon.hide()
        window.hide()
        link.close()
        await service.aclose()
