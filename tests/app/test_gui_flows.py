"""The window's flows as coroutines on the GUI thread's qasync loop, with core on its own.

Strategy: these tests are async and run on qasync's loop (the hook in
tests/app/conftest.py), as the app's GUI thread does, so they await what the
window awaits and never ``qtbot.wait*``. A real TrayService runs on its own
thread and loop (``cores``); a real SDK client's call is held there by an
``approve`` rule, and the window's prompt, started by that held call on the
GUI loop, answers it. The Connect dialog writes a real file through its
``apply`` seam, held on a threading.Event so the test can see a QTimer tick
on the GUI loop while the write waits on its worker thread. Window and tray
actions await a real respawn, and a real failure, on core's loop.
"""

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest

from app.connect_dialog import ConnectDialog
from app.core_link import CoreLink
from app.tray import TrayActions
from app.window import MainWindow
from core.base.states import ServerState
from core.cli.install import InstallPlan, InstallResult, apply_install, snippet_entries
from core.cli.integrations import client_config_path
from core.serving.core_thread import CoreThread
from tests.app.conftest import StartCore
from tests.conftest import ECHO, SERVERS, python_server, wait_until
from tests.support.gateway_support import http_client, text

REVIEWED = SERVERS / "reviewed.py"
T = TypeVar("T")


async def on_core(core: CoreThread, read: Callable[[], T]) -> T:
    """``read()`` on core's loop, awaited (the GUI loop turns meanwhile)."""

    async def run() -> T:
        return read()

    return await asyncio.wrap_future(core.submit(run()))


async def ready(core: CoreThread, name: str, generation: int = 1) -> None:
    server = core.service.supervisor.server(name)

    async def is_ready() -> bool:
        return await on_core(
            core, lambda: server.state is ServerState.READY and server.generation == generation
        )

    await wait_until(is_ready, timeout=30, what=f"{name} ready at generation {generation}")


async def call(core: CoreThread, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    async with http_client(core.service, "reviewed") as session:
        result = await session.call_tool(tool, arguments)
        return bool(result.is_error), text(result)


@contextlib.asynccontextmanager
async def window_on(core: CoreThread) -> AsyncIterator[MainWindow]:
    link = CoreLink(core)
    assert link.gui_loop is asyncio.get_running_loop()
    window = MainWindow(link)
    try:
        yield window
    finally:
        window.close_down()
        window.close()
        link.close()
        await link.settled()


class Ticks:
    """A QTimer on the GUI loop, counting: it only ticks while that loop turns."""

    def __init__(self, interval_ms: int = 5) -> None:
        self.count = 0
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self) -> None:
        self.count += 1


@pytest.mark.parametrize(
    ("button", "expected", "said"),
    [
        ("allow_once", (False, "deleted the repo"), "allowed (once)"),
        ("deny_button", (True, "The person at mcp-tray denied this call"), "denied"),
    ],
)
async def test_a_held_call_awaits_the_windows_prompt_and_the_persons_click_answers_it(
    cores: StartCore, tmp_path: Path, button: str, expected: tuple[bool, str], said: str
) -> None:
    core = cores({"reviewed": python_server(REVIEWED) | {"approve": ["delete_*"]}})
    await ready(core, "reviewed")
    async with window_on(core) as window:
        tab = window.approvals
        await wait_until(
            lambda: core.service.approvals.asker == tab.prompter.ask, what="the tab to listen"
        )
        held = asyncio.wrap_future(core.submit(call(core, "delete_thing", {"thing": "the repo"})))
        # The held call, on core's loop, started the prompt here on the GUI loop.
        await wait_until(lambda: tab.prompts, what="the prompt the held call awaits")
        (approval_id,) = tab.prompts
        await wait_until(lambda: tab.table.rowCount() == 1, what="the row")
        assert tab.current() == approval_id
        assert not held.done()

        QTest.mouseClick(getattr(tab, button), Qt.MouseButton.LeftButton)

        is_error, answered = await asyncio.wait_for(held, 20)
        assert is_error is expected[0] and answered.startswith(expected[1])
        assert window.statusBar().currentMessage() == said
        await wait_until(lambda: not tab.prompts and tab.table.rowCount() == 0, what="row gone")


async def test_a_call_answered_elsewhere_takes_its_prompt_off_the_window(
    cores: StartCore,
) -> None:
    core = cores({"reviewed": python_server(REVIEWED) | {"approve": ["any"]}})
    await ready(core, "reviewed")
    async with window_on(core) as window:
        tab = window.approvals
        await wait_until(lambda: core.service.approvals.asker == tab.prompter.ask, what="listening")
        held = asyncio.wrap_future(core.submit(call(core, "peek", {"thing": "x"})))
        await wait_until(lambda: tab.prompts, what="the prompt")
        (approval_id,) = tab.prompts

        # As `mcp-tray approve ID` does: core's own answer, on core's loop.
        approvals = core.service.approvals
        await asyncio.wrap_future(core.submit(approvals.approve(approval_id, "once")))

        assert (await asyncio.wait_for(held, 20))[0] is False
        # Core cancelled the prompt it awaited: the window no longer waits for a click.
        await wait_until(lambda: not tab.prompts, what="the prompt withdrawn")


async def test_a_failing_prompt_leaves_the_call_waiting_for_the_other_answers(
    cores: StartCore, caplog: pytest.LogCaptureFixture
) -> None:
    core = cores({"reviewed": python_server(REVIEWED) | {"approve": ["any"]}})
    await ready(core, "reviewed")
    approvals = core.service.approvals

    def broken(item: Any) -> Any:
        async def fail() -> None:
            raise RuntimeError("the window went away")

        return fail()

    await on_core(core, lambda: setattr(approvals, "asker", broken))
    held = asyncio.wrap_future(core.submit(call(core, "peek", {"thing": "x"})))
    await wait_until(lambda: approvals.pending, what="the held call")
    (approval_id,) = approvals.pending
    await wait_until(
        lambda: (
            f"the window's prompt for {approval_id} failed (the window went away)" in caplog.text
        ),
        what="the prompt's failure to be heard",
    )
    assert not held.done()  # still held: the prompt's failure answered nothing

    async def deny() -> str:
        return str(approvals.deny(approval_id))

    # As `mcp-tray deny ID` does.
    assert (await asyncio.wrap_future(core.submit(deny()))).startswith("denied")
    is_error, said = await asyncio.wait_for(held, 20)
    assert is_error and "denied" in said


def make_entries(client: str, names: Any, http: bool) -> Any:
    return snippet_entries(client, names)


async def test_the_connect_dialogs_write_runs_off_the_gui_thread_while_its_loop_turns(
    tmp_path: Path,
) -> None:
    started, release = threading.Event(), threading.Event()
    writers: list[int] = []

    def held_write(plan: InstallPlan) -> InstallResult:
        writers.append(threading.get_ident())
        started.set()
        release.wait(20)
        return apply_install(plan)

    shown = ConnectDialog(["echo"], make_entries, home=tmp_path, apply=held_write)
    shown.client_box.setCurrentIndex(shown.client_box.findData("cursor"))
    ticks = Ticks()
    try:
        assert shown.install_button.isEnabled()
        QTest.mouseClick(shown.install_button, Qt.MouseButton.LeftButton)
        writing = shown.writing
        assert writing is not None
        await wait_until(started.is_set, what="the write to start")
        assert not shown.install_button.isEnabled()  # one write at a time
        assert "Writing" in shown.status.text()
        before = ticks.count
        # The write waits on its worker thread; the GUI loop goes on ticking.
        await wait_until(lambda: ticks.count >= before + 5, what="the timer to tick")
        assert not writing.done()
        release.set()
        await asyncio.wait_for(writing, 20)
    finally:
        release.set()
        ticks.timer.stop()
        shown.close()
    assert writers and writers[0] != threading.get_ident()
    written = json.loads(client_config_path("cursor", home=tmp_path).read_text())
    assert written["mcpServers"]["echo"]["args"][-2:] == ["connect", "echo"]
    assert shown.outcome is not None and shown.writing is None
    assert str(shown.outcome) in shown.status.text()


async def test_a_write_that_fails_says_why_and_leaves_the_file_and_the_dialog_usable(
    tmp_path: Path,
) -> None:
    def refused(plan: InstallPlan) -> InstallResult:
        raise PermissionError(13, "Permission denied", str(plan.path))

    shown = ConnectDialog(["echo"], make_entries, home=tmp_path, apply=refused)
    shown.client_box.setCurrentIndex(shown.client_box.findData("cursor"))
    try:
        writing = shown.install()
        assert writing is not None
        await asyncio.wait_for(writing, 20)
        assert shown.status.text().startswith("PermissionError: [Errno 13] Permission denied")
        assert shown.status.property("error") is True
        assert not client_config_path("cursor", home=tmp_path).exists()
        assert shown.outcome is None and shown.install_button.isEnabled()  # try again
    finally:
        shown.close()


async def test_a_window_button_awaits_core_while_the_gui_loop_turns(cores: StartCore) -> None:
    core = cores({"echo": python_server(ECHO)})
    await ready(core, "echo")
    async with window_on(core) as window:
        await wait_until(lambda: window.servers.model.keys() == ["echo"], what="the row")
        window.servers.view.setCurrentIndex(window.servers.proxy.index(0, 0))
        ticks = Ticks()
        try:
            QTest.mouseClick(window.respawn_button, Qt.MouseButton.LeftButton)
            assert not window.respawn_button.isEnabled()
            await asyncio.wait_for(window.link.settled(), 30)
            # A respawn takes a real child's start (~0.6 s): the GUI loop ticked meanwhile.
            assert ticks.count > 1
        finally:
            ticks.timer.stop()
        assert window.statusBar().currentMessage() == "Respawn: echo done"
        assert window.respawn_button.isEnabled()
        await ready(core, "echo", generation=2)


async def test_a_tray_action_that_fails_is_reported_not_lost(cores: StartCore) -> None:
    core = cores({"echo": python_server(ECHO)})
    link = CoreLink(core)
    told: list[str] = []
    actions = TrayActions(link, lambda: None, lambda: None, report=told.append)
    try:
        actions.respawn("no-such-server")
        await asyncio.wait_for(link.settled(), 20)
    finally:
        link.close()
    assert len(told) == 1 and told[0].startswith("Respawn no-such-server failed: ")
    assert "no-such-server" in told[0].removeprefix("Respawn no-such-server failed: ")
