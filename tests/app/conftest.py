"""Qt tests: offscreen platform; the core, where one is needed, on its own thread as in the app.

The app runs core on a thread and loop of its own (core.serving.core_thread),
and so do these tests: ``cores`` starts a real TrayService there, and the
test (Qt's thread) waits with ``qtbot.waitUntil``, which keeps Qt's loop
turning so queued signals from core land. Core's state is read through
``core.call`` (on core's loop), never straight from this thread.

The app's GUI thread runs qasync's loop, and the window's flows are
coroutines on it. Async tests here run on that loop (the
``pytest_asyncio_loop_factories`` hook below; they never ``qtbot.wait*``,
which would nest Qt's loop under the test's task). Sync tests get a qasync
loop that counts as running while Qt's own (``qtbot.waitUntil``) turns, so
the flows their clicks start run there too.
"""

import asyncio
import json
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import qasync
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from core.base.states import ServerState
from core.serving.core_thread import CoreThread
from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from tests.conftest import FAST_TIMING

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

#: How long a test waits for core (real children start in about a second).
WAIT_MS = 20_000

StartCore = Callable[[dict[str, Any]], CoreThread]

#: Closed GUI loops, kept for the session: freeing one (its Qt objects) is left to no
#: thread but this one, at exit (as app/main.py keeps its own).
_CLOSED_LOOPS: list[asyncio.AbstractEventLoop] = []


def _qasync_loop() -> asyncio.AbstractEventLoop:
    app = QApplication.instance() or QApplication([])
    loop: asyncio.AbstractEventLoop = qasync.QEventLoop(app)
    _CLOSED_LOOPS.append(loop)  # kept past its close, as the sync tests' loops are
    return loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Async tests of the app run on the GUI's loop, qasync's, as the app does."""
    return {"qasync": _qasync_loop}


@pytest.fixture(autouse=True)
def gui_loop(
    request: pytest.FixtureRequest, qapp: Any
) -> Iterator[asyncio.AbstractEventLoop | None]:
    """For a sync test, a qasync loop taken as running while Qt's loop turns (the app's
    ``run_forever`` is ``app.exec``); an async test has its own (None here)."""
    if request.node.get_closest_marker("asyncio") is not None:
        yield None
        return
    loop = qasync.QEventLoop(qapp, already_running=True)
    try:
        yield loop
    finally:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        # Each cancelled flow ends on the loop (a bounded number of turns), not in the GC.
        for _ in range(100):
            if all(task.done() for task in tasks):
                break
            qapp.processEvents()
        # Not ``loop.stop()``: that is ``app.exit()``, and an exit asked while no Qt loop
        # runs ends the next one at once (the next test's waits would never turn).
        loop._QEventLoop__is_running = False
        asyncio.events._set_running_loop(None)
        loop.close()
        _CLOSED_LOOPS.append(loop)


@pytest.fixture
def cores(tray_home: Paths, qapp: Any) -> Iterator[StartCore]:
    """``start(servers)``: a real TrayService on its own thread; every one stopped after."""
    # As in the app: closing a window must not quit.
    qapp.setQuitOnLastWindowClosed(False)
    started: list[CoreThread] = []

    def start(servers: dict[str, Any]) -> CoreThread:
        tray_home.config_file.write_text(json.dumps({"mcpServers": servers}))
        config = load_config(tray_home.config_file)
        core = CoreThread(lambda: TrayService(config, tray_home, timing=FAST_TIMING))
        started.append(core)
        core.start(timeout=30)
        return core

    yield start
    for core in started:
        core.stop()


def wait_ready(qtbot: QtBot, core: CoreThread, name: str, generation: int | None = None) -> None:
    """Until server ``name`` is ready (at ``generation``), read on core's loop."""
    server = core.service.supervisor.server(name)

    def ready() -> bool:
        return core.call(
            lambda: (
                server.state is ServerState.READY
                and (generation is None or server.generation == generation)
            )
        )

    qtbot.waitUntil(ready, timeout=WAIT_MS)
