"""The window acting on the real core: Respawn, Reset, the raise request.

Strategy: a real TrayService (real children, real gateway) runs on the
qasync loop the app uses; the window's buttons are clicked with QTest and
the test awaits the core's own events, never qtbot.wait (see conftest).
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
from app.window import MainWindow
from core.base.states import ServerState
from core.serving.service import TrayService
from core.settings.paths import Paths
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.gateway_support import Services, http_client

pytestmark = pytest.mark.asyncio(loop_factories=["qasync"])


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
