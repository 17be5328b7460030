"""A person's launch opens the window; the login autostart (``--minimized``) leaves it in the tray.

Strategy: the app's own ``launch`` (what ``run_gui`` runs once core has
started on its own thread: the Gui, the tray, Qt's loop) runs on a real
core; its ``started`` hook, called once Qt's loop turns, records what the
window looks like and quits as the Quit entry does (or asks through the
control API, as `mcp-tray quit` does), and the test reads the
record once ``launch`` returned.
"""

from typing import Any

from pytestqt.qtbot import QtBot

from app.main import Gui, launch
from core.serving.core_thread import CoreThread
from tests.app.conftest import StartCore


def launched(
    qapp: Any, core: CoreThread, *, minimized: bool, config_error: str | None = None
) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def look(gui: Gui) -> None:
        seen["visible"] = gui.window.isVisible()
        seen["sampling"] = gui.window.sampler.running
        seen["banner"] = gui.window.config_error.text()
        gui.quit()

    seen["code"] = launch(qapp, core, config_error, minimized=minimized, started=look)
    return seen


def test_a_persons_launch_opens_the_window(qtbot: QtBot, qapp: Any, cores: StartCore) -> None:
    seen = launched(qapp, cores({}), minimized=False)
    assert seen["code"] == 0
    assert seen["visible"]


def test_the_autostart_launch_with_minimized_stays_in_the_tray(
    qtbot: QtBot, qapp: Any, cores: StartCore
) -> None:
    seen = launched(qapp, cores({}), minimized=True)
    assert not seen["visible"]
    # Nothing sampled for a window nobody looks at.
    assert not seen["sampling"]


def test_a_broken_config_opens_the_window_even_when_minimized(
    qtbot: QtBot, qapp: Any, cores: StartCore
) -> None:
    seen = launched(qapp, cores({}), minimized=True, config_error="config.json:1: bad")
    assert seen["visible"]
    assert "config.json:1: bad" in seen["banner"]


def test_mcp_tray_quit_through_the_api_ends_the_tray_as_its_quit_entry_does(
    qtbot: QtBot, qapp: Any, cores: StartCore
) -> None:
    # What `mcp-tray quit` sends (Windows' polite stop), over real HTTP to core's API.
    from core.cli.control_client import ControlClient

    seen: dict[str, Any] = {}

    def ask(gui: Gui) -> None:
        reply = ControlClient.connect(gui.core.service.paths).request("POST", "/api/v1/quit")
        seen["status"] = reply.status
        seen["gui"] = gui

    code = launch(qapp, cores({}), None, minimized=True, started=ask)
    assert (code, seen["status"]) == (0, 202)
    assert seen["gui"].quitting
