"""The window on the real core: Respawn, Reset, the raise request, the details
pane's tools, CPU/RSS sampling, sparklines and the logs timeline.

Strategy: a real TrayService (real children of tests/servers/echo.py, real
gateway) runs on the qasync loop the app uses; the window's buttons are
clicked with QTest and the test awaits the core's own events, never
qtbot.wait (see conftest). Timers are not waited for: the test calls the
slot a timer would (``sampler.sample``, ``poll_log``, ``tick``); the CPU/RSS
figures come from a stand-in for ``ProcessStats.sample`` that counts its
calls, so "nothing sampled while hidden" is a count.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtTest import QTest

from app.core_link import CoreLink
from app.main import ask_running_instance_to_raise
from app.models import ServersModel, ToolsModel
from app.window import TAB_LOGS, MainWindow
from core.base.errors import McpTrayError
from core.base.snapshot import ResourceUsage
from core.base.states import ServerState
from core.serving.service import TrayService
from core.settings.paths import Paths
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.gateway_support import REPO, Services, http_client

pytestmark = pytest.mark.asyncio(loop_factories=["qasync"])

DEMO = REPO / "resources" / "demo"


@contextlib.asynccontextmanager
async def running(paths: Paths, servers: dict[str, Any]) -> AsyncIterator[TrayService]:
    """A service stopped inside the test: pytest-qt's teardown processes Qt
    events outside the asyncio loop, so nothing of the core may still be
    scheduled by then."""
    holder = Services(paths)
    service = await holder.start(servers)
    try:
        yield service
    finally:
        await service.aclose()


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


@contextlib.asynccontextmanager
async def open_window(service: TrayService) -> AsyncIterator[MainWindow]:
    """The window on the service's core, shown; closed (with its link) inside the test."""
    link = CoreLink(service.supervisor)
    window = MainWindow(link, service)
    window.show()
    try:
        yield window
    finally:
        await window.aclose()
        window.close()
        link.close()


async def test_clicking_respawn_respawns_the_real_server(tray_home: Paths) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        server = service.supervisor.server("echo")
        await wait_ready(server)
        async with open_window(service) as window:
            await wait_until(lambda: window.servers.model.keys() == ["echo"], what="the row")
            select(window.servers, "echo")
            QTest.mouseClick(window.respawn_button, Qt.MouseButton.LeftButton)
            assert not window.respawn_button.isEnabled()  # disabled while the call runs
            await wait_ready(server, generation=2)
            await wait_until(lambda: window.respawn_button.isEnabled(), what="the button back")
            await wait_until(
                lambda: (
                    (row := window.servers.model.row("echo")) is not None
                    and row.server.generation == 2
                ),
                what="the row to show generation 2",
            )


async def test_a_failing_action_shows_its_error_in_the_status_bar(tray_home: Paths) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        async with open_window(service) as window:
            await wait_until(lambda: window.servers.model.keys() == ["echo"], what="the row")
            select(window.servers, "echo")
            # A config reload dropped the server between the selection and the click.
            removed = service.supervisor.servers.pop("echo")
            try:
                QTest.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
                await wait_until(
                    lambda: "no server named 'echo'" in window.statusBar().currentMessage(),
                    what="the error",
                )
                assert window.stop_button.isEnabled()
            finally:
                service.supervisor.servers["echo"] = removed


async def test_clicking_reset_clears_a_session_tripped_through_the_real_breaker(
    tray_home: Paths,
) -> None:
    async with running(tray_home, {"ghost": {"command": "mcp-tray-no-such-command"}}) as service:
        ghost = service.supervisor.server("ghost")
        await wait_until(lambda: ghost.state is ServerState.PARKED, what="parked")
        async with open_window(service) as window:
            async with http_client(service, "ghost") as client:
                for _ in range(3):
                    await client.call_tool("x", {})
                session = service.sessions.all()[0]
                assert session.tripped
                await wait_until(
                    lambda: window.sessions.model.keys() == [session.id], what="the session row"
                )
                select(window.sessions, session.id)
                QTest.mouseClick(window.reset_button, Qt.MouseButton.LeftButton)
                await wait_until(lambda: not session.tripped, what="the reset")
                await wait_until(
                    lambda: (
                        (row := window.sessions.model.row(session.id)) is not None
                        and not row.tripped
                    ),
                    what="the row to say closed",
                )
                after = await client.call_tool("x", {})
                assert "⚠️" not in after.content[0].text  # type: ignore[union-attr]


async def test_a_second_launch_raises_the_first_ones_window(tray_home: Paths) -> None:
    async with running(tray_home, {}) as service:
        async with open_window(service) as window:
            window.hide()
            service.on_raise = window.bring_up
            code = await asyncio.to_thread(ask_running_instance_to_raise, service.paths)
            assert code == 0
            await wait_until(window.isVisible, what="the window to come up")


async def test_empty_tabs_say_why_they_are_empty(tray_home: Paths) -> None:
    async with running(tray_home, {}) as service:
        async with open_window(service) as window:
            assert not window.workers.empty.isHidden()
            assert "mcp-tray connect" in window.workers.empty.text()
            assert "client-config" in window.sessions.empty.text()


MIB = 1024 * 1024


def cell(window: MainWindow, name: str, column: str) -> Any:
    model = window.servers.model
    row = model.keys().index(name)
    return model.data(model.index(row, ServersModel.column(column)))


async def test_the_tools_pane_lists_a_real_servers_tools_with_the_replay_mark(
    tray_home: Paths,
) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        await wait_ready(service.supervisor.server("echo"))
        async with open_window(service) as window:
            await wait_until(lambda: window.details.name == "echo", what="echo selected")
            await wait_until(lambda: window.details.tools.row("echo") is not None, what="the tools")
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


async def test_cpu_and_rss_change_while_the_window_shows_and_nothing_is_sampled_while_hidden(
    tray_home: Paths,
) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        await wait_ready(service.supervisor.server("echo"))
        asked: list[dict[str, int]] = []

        def sample(pids: dict[str, int]) -> dict[str, ResourceUsage]:
            asked.append(dict(pids))
            n = len(asked)
            return {name: ResourceUsage(float(n), n * MIB) for name in pids}

        service.stats.sample = sample  # type: ignore[method-assign]
        async with open_window(service) as window:
            # Shown: sampled at once, then on every tick of the sampler's timer.
            await wait_until(lambda: cell(window, "echo", "cpu") == "1.0", what="the first sample")
            assert cell(window, "echo", "rss") == "1.0 MiB"
            window.sampler.sample()  # what the timer does every SAMPLE_MS
            await wait_until(lambda: cell(window, "echo", "cpu") == "2.0", what="the next sample")
            assert cell(window, "echo", "rss") == "2.0 MiB"
            assert asked[-1] == {"echo": service.supervisor.server("echo").pid}

            window.hide()
            await window.sampler.settle()
            taken = len(asked)
            assert not window.sampler.running
            window.tick()
            assert len(asked) == taken

            window.show()
            await wait_until(lambda: len(asked) == taken + 1, what="a sample on showing again")


async def test_a_stopped_server_shows_no_cpu_or_rss(tray_home: Paths) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        await wait_ready(service.supervisor.server("echo"))
        async with open_window(service) as window:
            await wait_until(lambda: cell(window, "echo", "rss").endswith("MiB"), what="a real RSS")
            await service.supervisor.stop_server("echo")
            await wait_until(lambda: cell(window, "echo", "state") == "stopped", what="stopped")
            assert cell(window, "echo", "rss") == ""
            assert cell(window, "echo", "cpu") == ""


async def test_the_sparkline_counts_real_calls_and_marks_a_crash_restart(tray_home: Paths) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        echo = service.supervisor.server("echo")
        await wait_ready(echo)
        async with open_window(service) as window:
            await service.supervisor.call_tool("echo", "echo", {"text": "hi"})
            await service.supervisor.call_tool("echo", "fail", {"message": "tool error"})
            with contextlib.suppress(McpTrayError):
                await service.supervisor.call_tool("echo", "crash", {})
            await wait_ready(echo, generation=2)
            window.tick()
            series = window.servers.model.row("echo").activity  # type: ignore[union-attr]
            assert series is not None
            # The tool error is a result, not a failure; the crash cut its call.
            assert (series.total_calls, series.total_failures) == (3, 1)
            assert [mark.after_crash for mark in series.restarts] == [True]
            assert cell(window, "echo", "activity").startswith("last 10 min: 3 calls, 1 failed")


async def test_the_logs_tab_interleaves_mcp_trays_notes_and_the_servers_stderr(
    tray_home: Paths,
) -> None:
    async with running(tray_home, {"echo": python_server(ECHO)}) as service:
        echo = service.supervisor.server("echo")
        await wait_ready(echo)
        async with open_window(service) as window:
            window.tabs.setCurrentIndex(TAB_LOGS)
            window.log_server.setCurrentText("echo")
            await wait_until(
                lambda: "state starting -> ready" in window.log_text(),
                what="the ready note",
                between=window.poll_log,
            )
            lines = window.log_text().splitlines()
            spawned = next(i for i, t in enumerate(lines) if "spawned: pid" in t)
            started = next(i for i, t in enumerate(lines) if "echo: started pid" in t)
            assert "  mcp-tray  gen 1 " in lines[spawned]
            assert "  stderr    gen 1 " in lines[started]
            assert spawned < started

            # Followed live: the child's last words, then mcp-tray's note of its end.
            with contextlib.suppress(McpTrayError):
                await echo.call_tool("crash", {"code": 5})
            await wait_until(
                lambda: "generation 1 ended" in window.log_text(),
                what="the end note",
                between=window.poll_log,
            )
            lines = window.log_text().splitlines()
            crashing = next(i for i, t in enumerate(lines) if "echo: crashing with 5" in t)
            ended = next(i for i, t in enumerate(lines) if "generation 1 ended" in t)
            assert crashing < ended

            window.filter.setText("crashing")
            assert window.log_text().splitlines() == [lines[crashing]]


async def test_a_quiet_servers_log_tab_shows_its_lifecycle_notes(tray_home: Paths) -> None:
    quiet = python_server(DEMO / "clock_server.py")
    async with running(tray_home, {"clock": quiet}) as service:
        clock = service.supervisor.server("clock")
        await wait_ready(clock)
        assert not clock.stderr_tail  # nothing on stderr: the old tab showed nothing
        async with open_window(service) as window:
            window.tabs.setCurrentIndex(TAB_LOGS)
            await wait_until(
                lambda: "state starting -> ready" in window.log_text(),
                what="the notes",
                between=window.poll_log,
            )
            assert "generation 1 spawned" in window.log_text()
