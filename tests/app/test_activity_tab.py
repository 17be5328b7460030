"""The Activity tab on the real core: a call appears, the filters, the detail pane.

Strategy: a real TrayService (real children of tests/servers/echo.py, real gateway) on its
own thread and loop, as in the app (tests/app/conftest.py); calls are made over real HTTP
by a handshake-era client (JSON-RPC posts with a session id, from this thread while core
serves on its own); the window is the real MainWindow, and the test waits with
``qtbot.waitUntil`` for the records core's journal hands the tab.
"""

import time

import pytest
from PySide6.QtCore import QItemSelectionModel
from pytestqt.qtbot import QtBot

from app.activity import ALL, ActivityModel, ActivityTab, duration_text
from core.serving.core_thread import CoreThread
from tests.app.conftest import WAIT_MS, StartCore, wait_ready
from tests.app.scenes import open_window
from tests.conftest import ECHO, python_server
from tests.support.cli_support import RpcSession


def claude_session(core: CoreThread, server: str = "echo") -> RpcSession:
    """A handshake-era client session over real HTTP, posting from the test's thread."""
    return RpcSession(f"{core.service.url}/mcp/{server}", core.service.token, "claude-code")


def cell(tab: ActivityTab, row: int, key: str) -> str:
    return str(tab.proxy.index(row, ActivityModel.column(key)).data())


def test_a_call_appears_within_a_second_of_its_end_with_client_tool_and_outcome(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    with open_window(core) as window:
        tab = window.activity
        window.tabs.setCurrentWidget(tab)
        assert tab.empty.isVisible()  # "No calls yet"
        client = claude_session(core)
        client.call("echo", {"text": "hello activity"})
        ended = time.monotonic()
        qtbot.waitUntil(lambda: tab.proxy.rowCount() == 1, timeout=WAIT_MS)
        assert time.monotonic() - ended < 1.0
        assert not tab.empty.isVisible()
        assert cell(tab, 0, "client") == "Claude Code"
        assert cell(tab, 0, "server") == "echo"
        assert cell(tab, 0, "tool") == "echo"
        assert cell(tab, 0, "outcome") == "✓ ok"
        assert cell(tab, 0, "duration_ms").endswith(" ms")


def test_the_filters_narrow_the_list_and_the_detail_pane_shows_arguments_and_result(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    with open_window(core) as window:
        tab = window.activity
        client = claude_session(core)
        client.call("echo", {"text": "first words"})
        client.call("fail", {"message": "it broke"})
        client.call("whoami", {})
        qtbot.waitUntil(lambda: tab.model.rowCount() == 3, timeout=WAIT_MS)
        assert [tab.server.itemText(i) for i in range(tab.server.count())] == [ALL, "echo"]

        tab.outcome.setCurrentText("tool-error")
        assert tab.proxy.rowCount() == 1
        assert cell(tab, 0, "tool") == "fail"
        assert cell(tab, 0, "outcome") == "! tool-error"
        tab.outcome.setCurrentText(ALL)
        tab.words.setText("FIRST WORDS")
        assert tab.proxy.rowCount() == 1
        assert cell(tab, 0, "tool") == "echo"
        tab.words.setText("")
        assert tab.proxy.rowCount() == 3

        tab.words.setText("first")
        tab.view.selectionModel().setCurrentIndex(
            tab.proxy.index(0, 0),
            QItemSelectionModel.SelectionFlag.ClearAndSelect
            | QItemSelectionModel.SelectionFlag.Rows,
        )
        detail = tab.detail.toPlainText()
        assert '"text": "first words"' in detail
        assert "result (first lines)\nfirst words" in detail
        assert "client   Claude Code (claude-code)" in detail
        assert "door     /mcp/echo, session " in detail
        assert "generation 1" in detail


@pytest.mark.parametrize(
    ("ms", "shown"),
    [(2.04, "2.0 ms"), (999.94, "999.9 ms"), (16038.8, "16.0 s"), (125_400.0, "2 min 5 s")],
)
def test_a_duration_reads_in_ms_under_a_second_and_in_seconds_for_a_held_calls_wait(
    ms: float, shown: str
) -> None:
    assert duration_text(ms) == shown
