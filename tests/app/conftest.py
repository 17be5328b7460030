"""Qt tests: offscreen platform; the core, where one is needed, on its own thread as in the app.

The app runs core on a thread and loop of its own (core.serving.core_thread),
and so do these tests: ``cores`` starts a real TrayService there, and the
test (Qt's thread) waits with ``qtbot.waitUntil``, which keeps Qt's loop
turning so queued signals from core land. Core's state is read through
``core.call`` (on core's loop), never straight from this thread.
"""

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
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
