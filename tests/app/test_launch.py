"""A person's launch opens the window; the login autostart (``--minimized``) leaves it in the tray.

Strategy: the app's own ``_main`` (what ``run_gui`` runs under qasync: the
real TrayService, the Gui, the tray) runs as a task on the test's qasync
loop; its ``started`` hook hands the test the Gui, the test looks at the
window and quits through the Gui as the Quit entry does.
"""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from PySide6.QtWidgets import QApplication

from app.main import Gui, _main
from core.settings.config import load_config
from core.settings.paths import Paths

pytestmark = pytest.mark.asyncio(loop_factories=["qasync"])


@contextlib.asynccontextmanager
async def launched(
    paths: Paths, *, minimized: bool, config_error: str | None = None
) -> AsyncIterator[Gui]:
    paths.config_file.write_text(json.dumps({"mcpServers": {}}))
    ready: asyncio.Future[Gui] = asyncio.get_running_loop().create_future()
    app = QApplication.instance()
    task = asyncio.ensure_future(
        _main(
            app,
            load_config(paths.config_file),
            paths,
            config_error,
            minimized=minimized,
            started=ready.set_result,
        )
    )
    gui = await asyncio.wait_for(asyncio.shield(ready), 30)
    try:
        yield gui
    finally:
        gui.quit()
        assert await asyncio.wait_for(task, 30) == 0


async def test_a_persons_launch_opens_the_window(tray_home: Paths) -> None:
    async with launched(tray_home, minimized=False) as gui:
        assert gui.window.isVisible()


async def test_the_autostart_launch_with_minimized_stays_in_the_tray(tray_home: Paths) -> None:
    async with launched(tray_home, minimized=True) as gui:
        assert not gui.window.isVisible()
        # Nothing sampled for a window nobody looks at.
        assert not gui.window.sampler.running


async def test_a_broken_config_opens_the_window_even_when_minimized(tray_home: Paths) -> None:
    async with launched(tray_home, minimized=True, config_error="config.json:1: bad") as gui:
        assert gui.window.isVisible()
        assert "config.json:1: bad" in gui.window.config_error.text()
