"""``--child``: the tray GUI as app/main.py composes it, plus the bench's signals."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import argparse
import os
import signal
from pathlib import Path

from core.settings.paths import default_paths


def child_main(args: argparse.Namespace) -> int:
    """The tray GUI as app/main.py composes it (core on its own thread, the Gui
    and Qt's loop on the main one), plus three bench signals.

    SIGUSR1 makes the Workers tab current; SIGUSR2 prints one ``MODEL`` line
    (the window's model row counts); SIGHUP hides or shows the window.
    SIGTERM/SIGINT quit as the app does. The Gui's own signal wake-up (a
    socket Qt watches) makes Qt run these Python handlers at once.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication, QSystemTrayIcon

    from app.main import Gui, launch, start_core
    from core.settings.config import load_config

    paths = default_paths().ensure()
    config = load_config(Path(args.config))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("mcp-tray")
    app.setQuitOnLastWindowClosed(False)
    core = start_core(config, paths)
    if isinstance(core, int):
        return core
    shown: list[Gui] = []
    asked = 0

    def model_line() -> None:
        nonlocal asked
        asked += 1
        window = shown[0].window
        print(
            f"MODEL#{asked} workers={window.workers.model.rowCount()} "
            f"servers={window.servers.model.rowCount()} tab={window.tabs.currentIndex()} "
            f"visible={int(window.isVisible())} samples={window.sampler.samples}",
            flush=True,
        )

    def bench_signals(gui: Gui) -> None:
        shown.append(gui)
        window = gui.window
        signal.signal(signal.SIGUSR1, lambda *_: window.tabs.setCurrentWidget(window.workers))
        signal.signal(
            signal.SIGHUP, lambda *_: window.hide() if window.isVisible() else window.bring_up()
        )
        signal.signal(signal.SIGUSR2, lambda *_: model_line())
        print(
            f"READY pid={os.getpid()} tray={QSystemTrayIcon.isSystemTrayAvailable()} "
            f"url={core.service.url}",
            flush=True,
        )

    try:
        # The window opens as for a person's launch (not --minimized).
        return launch(app, core, minimized=False, started=bench_signals)
    finally:
        if shown:
            model_line()
        core.stop()
        print("STOPPED", flush=True)
