"""The window on the real core: Respawn, Reset, the raise request, the details
pane's tools, CPU/RSS sampling, sparklines and the logs timeline.

Strategy: a real TrayService (real children of tests/servers/echo.py, real
gateway) runs on its own thread and loop, as in the app (tests/app/conftest.py);
the window's buttons are clicked with QTest and the test waits with
``qtbot.waitUntil`` for what core's queued signals bring. Timers are not
waited for: the test calls the slot a timer would (``sampler.sample``,
``poll_log``, ``tick``); the CPU/RSS figures come from a stand-in for
``ProcessStats.sample`` that counts its calls, so "nothing sampled while
hidden" is a count.
"""

import asyncio
import concurrent.futures
import contextlib
from dataclasses import replace
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.main import ask_running_instance_to_raise
from app.models import ServersModel, ToolsModel
from app.window import MainWindow
from core.base.errors import McpTrayError
from core.base.snapshot import ResourceUsage, WarningSnapshot
from core.base.states import ServerState
from core.serving.aggregate.view_cache import DISCOVERY_TOKENS
from core.serving.core_thread import CoreThread
from tests.app.conftest import WAIT_MS, StartCore, wait_ready
from tests.app.scenes import open_window
from tests.conftest import ECHO, python_server
from tests.support.gateway_support import REPO, http_client

DEMO = REPO / "resources" / "demo"
CALL_SECONDS = 30


def select(window_table: Any, key: str) -> None:
    proxy = window_table.proxy
    for row in range(proxy.rowCount()):
        index = proxy.index(row, 0)
        if proxy.data(index, Qt.ItemDataRole.UserRole) == key:
            window_table.view.selectionModel().select(
                index,
                QItemSelectionModel.SelectionFlag.ClearAndSelect
                | QItemSelectionModel.SelectionFlag.Rows,
            )
            return
    raise AssertionError(f"no row {key!r}")


def until(qtbot: QtBot, predicate: Any) -> None:
    qtbot.waitUntil(lambda: bool(predicate()), timeout=WAIT_MS)


def test_clicking_respawn_respawns_the_real_server(qtbot: QtBot, cores: StartCore) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    with open_window(core) as window:
        until(qtbot, lambda: window.servers.model.keys() == ["echo"])
        select(window.servers, "echo")
        QTest.mouseClick(window.respawn_button, Qt.MouseButton.LeftButton)
        assert not window.respawn_button.isEnabled()  # disabled while the call runs
        wait_ready(qtbot, core, "echo", generation=2)
        until(qtbot, window.respawn_button.isEnabled)
        until(
            qtbot,
            lambda: (
                (row := window.servers.model.row("echo")) is not None and row.server.generation == 2
            ),
        )


def test_a_failing_action_shows_its_error_in_the_status_bar(qtbot: QtBot, cores: StartCore) -> None:
    core = cores({"echo": python_server(ECHO)})
    servers = core.service.supervisor.servers
    with open_window(core) as window:
        until(qtbot, lambda: window.servers.model.keys() == ["echo"])
        select(window.servers, "echo")
        # A config reload dropped the server between the selection and the click.
        removed = core.call(servers.pop, "echo")
        try:
            QTest.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
            until(qtbot, lambda: "no server named 'echo'" in window.statusBar().currentMessage())
            assert window.stop_button.isEnabled()
        finally:
            core.call(servers.__setitem__, "echo", removed)


async def _tripping_client(
    core: CoreThread, tripped: "concurrent.futures.Future[None]", go_on: asyncio.Event
) -> str:
    """A client that trips its session (3 failures), waits for ``go_on``, calls once more."""
    async with http_client(core.service, "ghost") as client:
        for _ in range(3):
            await client.call_tool("x", {})
        tripped.set_result(None)
        await go_on.wait()
        result = await client.call_tool("x", {})
    return str(result.content[0].text)  # type: ignore[union-attr]


def test_clicking_reset_clears_a_session_tripped_through_the_real_breaker(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"ghost": {"command": "mcp-tray-no-such-command"}})
    ghost = core.service.supervisor.server("ghost")
    until(qtbot, lambda: core.call(lambda: ghost.state is ServerState.PARKED))
    sessions = core.service.sessions
    tripped: concurrent.futures.Future[None] = concurrent.futures.Future()
    go_on = asyncio.Event()
    with open_window(core) as window:
        after = core.submit(_tripping_client(core, tripped, go_on))
        tripped.result(CALL_SECONDS)
        [session] = core.call(sessions.all)
        assert core.call(lambda: session.tripped)
        until(qtbot, lambda: window.sessions.model.keys() == [session.id])
        select(window.sessions, session.id)
        QTest.mouseClick(window.reset_button, Qt.MouseButton.LeftButton)
        until(qtbot, lambda: not core.call(lambda: session.tripped))
        until(
            qtbot,
            lambda: (row := window.sessions.model.row(session.id)) is not None and not row.tripped,
        )
        core.post(go_on.set)
        assert "⚠️" not in after.result(CALL_SECONDS)


def test_a_second_launch_raises_the_first_ones_window(qtbot: QtBot, cores: StartCore) -> None:
    core = cores({})
    with open_window(core) as window:
        window.hide()
        core.service.on_raise = lambda: window.link.on_gui(window.bring_up)
        assert ask_running_instance_to_raise(core.service.paths) == 0
        until(qtbot, window.isVisible)


def test_the_warnings_tab_counts_warnings_and_not_advice_or_information(
    qtbot: QtBot, cores: StartCore
) -> None:
    info = WarningSnapshot("token-storage", "mcp-tray", "the token is in a file.", "", "t")
    advice = WarningSnapshot("env-scan-failed:", "pid 1", "could not read.", "later.", "a")
    warning = WarningSnapshot("port-taken", "mcp-tray", "port 1 is taken.", "free it.", "p")
    core = cores({})
    with open_window(core) as window:
        now = window.link.snapshot()
        window.refresh(replace(now, warnings=(info, advice)))
        assert window.tabs.tabText(window.tabs.indexOf(window.warnings)) == "Warnings (0)"
        assert window.warnings.model.rowCount() == 2  # listed all the same

        window.refresh(replace(now, warnings=(info, warning, advice)))
        assert window.tabs.tabText(window.tabs.indexOf(window.warnings)) == "Warnings (1)"


def test_empty_tabs_say_why_they_are_empty(qtbot: QtBot, cores: StartCore) -> None:
    core = cores({})
    with open_window(core) as window:
        assert not window.workers.empty.isHidden()
        assert "mcp-tray connect" in window.workers.empty.text()
        assert "client-config" in window.sessions.empty.text()


MIB = 1024 * 1024


def cell(window: MainWindow, name: str, column: str) -> Any:
    model = window.servers.model
    row = model.keys().index(name)
    return model.data(model.index(row, ServersModel.column(column)))


def test_the_tools_pane_lists_a_real_servers_tools_with_the_replay_mark(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    with open_window(core) as window:
        until(qtbot, lambda: window.details.name == "echo")
        until(qtbot, lambda: window.details.tools.row("echo") is not None)
        tools = window.details.tools
        retried = ToolsModel.column("retried")

        def mark(tool: str) -> str:
            return str(tools.data(tools.index(tools.keys().index(tool), retried)))

        for read_only in ("echo", "whoami", "slow_read", "getenv", "count"):
            assert mark(read_only) == "↻ retried"
        for write in ("slow_write", "write_note", "crash", "ask"):
            assert mark(write) == "not retried"
        description = ToolsModel.column("description")
        row = tools.keys().index("echo")
        assert tools.data(tools.index(row, description)) == "Return the text."
        assert "1 resource · 0 resource templates · 1 prompt" in window.details.counts.text()
        assert '"retry": "safe"' in window.details.retry.text()


def test_cpu_and_rss_change_while_the_window_shows_and_nothing_is_sampled_while_hidden(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    asked: list[dict[str, int]] = []

    def sample(pids: dict[str, int]) -> dict[str, ResourceUsage]:
        asked.append(dict(pids))
        n = len(asked)
        return {name: ResourceUsage(float(n), n * MIB) for name in pids}

    core.service.stats.sample = sample  # type: ignore[method-assign]
    with open_window(core) as window:
        # Shown: sampled at once, then on every tick of the sampler's timer.
        until(qtbot, lambda: cell(window, "echo", "cpu") == "1.0")
        assert cell(window, "echo", "rss") == "1.0 MiB"
        window.sampler.sample()  # what the timer does every SAMPLE_MS
        until(qtbot, lambda: cell(window, "echo", "cpu") == "2.0")
        assert cell(window, "echo", "rss") == "2.0 MiB"
        assert asked[-1] == {"echo": core.service.supervisor.server("echo").pid}

        window.hide()
        window.sampler.settle()
        taken = len(asked)
        assert not window.sampler.running
        window.tick()
        assert len(asked) == taken

        window.show()
        until(qtbot, lambda: len(asked) == taken + 1)


def test_a_stopped_server_shows_no_cpu_or_rss(qtbot: QtBot, cores: StartCore) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    with open_window(core) as window:
        until(qtbot, lambda: cell(window, "echo", "rss").endswith("MiB"))
        core.submit(core.service.supervisor.stop_server("echo")).result(CALL_SECONDS)
        until(qtbot, lambda: cell(window, "echo", "state") == "stopped")
        assert cell(window, "echo", "rss") == ""
        assert cell(window, "echo", "cpu") == ""


def test_the_sparkline_counts_real_calls_and_marks_a_crash_restart(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    supervisor = core.service.supervisor

    def call(tool: str, arguments: dict[str, Any]) -> None:
        core.submit(supervisor.call_tool("echo", tool, arguments)).result(CALL_SECONDS)

    with open_window(core) as window:
        call("echo", {"text": "hi"})
        call("fail", {"message": "tool error"})
        with pytest.raises(McpTrayError):
            call("crash", {})
        wait_ready(qtbot, core, "echo", generation=2)
        window.tick()
        series = window.servers.model.row("echo").activity  # type: ignore[union-attr]
        assert series is not None
        # The tool error is a result, not a failure; the crash cut its call.
        assert (series.total_calls, series.total_failures) == (3, 1)
        assert [mark.after_crash for mark in series.restarts] == [True]
        assert cell(window, "echo", "activity").startswith("last 10 min: 3 calls, 1 failed")


def test_the_logs_tab_interleaves_mcp_trays_notes_and_the_servers_stderr(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    echo = core.service.supervisor.server("echo")

    def logged(text: str) -> bool:
        window.poll_log()
        return text in window.log_text()

    with open_window(core) as window:
        window.tabs.setCurrentWidget(window.logs)
        window.log_server.setCurrentText("echo")
        until(qtbot, lambda: logged("state starting -> ready"))
        lines = window.log_text().splitlines()
        spawned = next(i for i, t in enumerate(lines) if "spawned: pid" in t)
        started = next(i for i, t in enumerate(lines) if "echo: started pid" in t)
        assert "  mcp-tray  gen 1 " in lines[spawned]
        assert "  stderr    gen 1 " in lines[started]
        assert spawned < started

        # Followed live: the child's last words, then mcp-tray's note of its end.
        with contextlib.suppress(McpTrayError):
            core.submit(echo.call_tool("crash", {"code": 5})).result(CALL_SECONDS)
        until(qtbot, lambda: logged("generation 1 ended"))
        lines = window.log_text().splitlines()
        crashing = next(i for i, t in enumerate(lines) if "echo: crashing with 5" in t)
        ended = next(i for i, t in enumerate(lines) if "generation 1 ended" in t)
        assert crashing < ended

        window.filter.setText("crashing")
        assert window.log_text().splitlines() == [lines[crashing]]


def test_a_quiet_servers_log_tab_shows_its_lifecycle_notes(qtbot: QtBot, cores: StartCore) -> None:
    core = cores({"clock": python_server(DEMO / "clock_server.py")})
    wait_ready(qtbot, core, "clock")
    clock = core.service.supervisor.server("clock")
    assert not core.call(lambda: list(clock.stderr_tail))  # nothing on stderr
    with open_window(core) as window:
        window.tabs.setCurrentWidget(window.logs)

        def noted() -> bool:
            window.poll_log()
            return "state starting -> ready" in window.log_text()

        until(qtbot, noted)
        assert "generation 1 spawned" in window.log_text()


async def _connected(
    core: CoreThread, connected: "concurrent.futures.Future[None]", go_on: asyncio.Event
) -> None:
    """A client of ``/mcp`` that stays connected until ``go_on``."""
    async with http_client(core.service, "@all") as client:
        await client.list_tools()
        connected.set_result(None)
        await go_on.wait()


def test_the_profiles_tab_shows_what_each_profile_offers_costs_and_who_is_connected(
    qtbot: QtBot, cores: StartCore
) -> None:
    core = cores({"echo": python_server(ECHO)})
    wait_ready(qtbot, core, "echo")
    tools = core.call(lambda: len(core.service.supervisor.server("echo").catalog.tools))
    connected: concurrent.futures.Future[None] = concurrent.futures.Future()
    go_on = asyncio.Event()
    with open_window(core) as window:
        until(qtbot, lambda: window.profiles.model.keys() == ["all"])
        row = window.profiles.model.row("all")
        assert row is not None and row.servers == ("echo",) and row.tools == tools
        assert row.tokens == -(-row.tools_bytes // 4) > 0
        # Both estimates; "*" marks the one its clients read (all lists every tool).
        model = window.profiles.model
        assert model.text(row, "tokens") == f"{row.tokens:,} *"
        assert model.text(row, "discovery_tokens") == f"{DISCOVERY_TOKENS:,}"
        assert window.tabs.tabText(window.tabs.indexOf(window.profiles)) == "Profiles"
        after = core.submit(_connected(core, connected, go_on))
        connected.result(timeout=30)
        until(qtbot, lambda: (r := window.profiles.model.row("all")) is not None and r.sessions)
        core.call(go_on.set)
        after.result(timeout=30)
