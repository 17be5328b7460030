"""The core on its own thread and loop (what the GUI runs): its three doors and its end.

Strategy: a real TrayService with a real echo child, started by CoreThread
on its thread; this test's thread plays the GUI: it submits a tool call,
reads with ``call``, posts, and stops the core, after which the child and
the instance lock are gone. A second core for the same home fails to start
with the error the service raised; core's loop is built on core's own
thread (a loop factory says where it ran). No Qt: this is core's side of the link.
"""

import asyncio
import json
import threading

import pytest

from core.base.errors import AlreadyRunning
from core.base.states import ServerState
from core.serving.core_thread import CoreThread
from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from core.settings.runtime import running_instance
from tests.conftest import ECHO, FAST_TIMING, process_gone, python_server, wait_until_sync


def core_for(paths: Paths) -> CoreThread:
    config = load_config(paths.config_file)
    return CoreThread(lambda: TrayService(config, paths, timing=FAST_TIMING))


def test_the_gui_thread_reaches_core_only_through_its_doors_and_stop_ends_every_child(
    tray_home: Paths,
) -> None:
    tray_home.config_file.write_text(json.dumps({"mcpServers": {"echo": python_server(ECHO)}}))
    core = core_for(tray_home)
    service = core.start(timeout=30)
    try:
        echo = service.supervisor.server("echo")
        wait_until_sync(
            lambda: core.call(lambda: echo.state is ServerState.READY), what="echo ready"
        )
        # submit: a coroutine on core's loop, its result here.
        result = core.submit(service.supervisor.call_tool("echo", "echo", {"text": "hi"}))
        assert result.result(30)["content"][0]["text"] == "hi"
        # call: runs on core's thread, not this one.
        assert core.call(threading.current_thread) is not threading.current_thread()
        assert core.call(threading.current_thread).name == "mcp-tray core"
        # post: fire and forget, seen by the next call (the loop keeps order).
        seen: list[str] = []
        core.post(seen.append, "posted")
        assert core.call(lambda: list(seen)) == ["posted"]
        pid = core.call(lambda: echo.pid)
        assert pid is not None
        assert running_instance(tray_home).pid > 0
    finally:
        core.stop()
    assert process_gone(pid)
    assert not core.loop.is_running()
    assert not tray_home.runtime_file.exists()


def test_a_core_that_cannot_start_raises_the_services_own_error(tray_home: Paths) -> None:
    tray_home.config_file.write_text(json.dumps({"mcpServers": {}}))
    first = core_for(tray_home)
    first.start(timeout=30)
    try:
        second = core_for(tray_home)
        with pytest.raises(AlreadyRunning):
            second.start(timeout=30)
        second.stop()  # nothing to stop: its thread ended with the failed start
    finally:
        first.stop()


def test_cores_loop_is_built_on_cores_own_thread_not_the_callers(tray_home: Paths) -> None:
    # A Proactor loop built on the GUI (main) thread would take the process's
    # signal wakeup fd from the GUI's loop: the factory says where it ran.
    tray_home.config_file.write_text(json.dumps({"mcpServers": {}}))
    config = load_config(tray_home.config_file)
    built_on: list[threading.Thread] = []

    def new_loop() -> asyncio.AbstractEventLoop:
        built_on.append(threading.current_thread())
        return asyncio.new_event_loop()

    core = CoreThread(lambda: TrayService(config, tray_home, timing=FAST_TIMING), new_loop)
    with pytest.raises(RuntimeError, match="has not started"):
        core.post(print)
    assert built_on == []
    core.start(timeout=30)
    try:
        assert [t.name for t in built_on] == ["mcp-tray core"]
        assert built_on[0] is not threading.current_thread()
        assert core.call(asyncio.get_running_loop) is core.loop
    finally:
        core.stop()


def test_a_quit_no_runner_listens_for_is_refused_and_the_core_keeps_running(
    tray_home: Paths,
) -> None:
    from core.cli.control_client import ControlClient

    tray_home.config_file.write_text(json.dumps({"mcpServers": {}}))
    core = core_for(tray_home)
    core.start(timeout=30)
    try:
        reply = ControlClient.connect(tray_home).request("POST", "/api/v1/quit")
        assert reply.status == 409
        assert "cannot be asked to quit" in reply.error
        assert core.call(lambda: core.service.info is not None)
    finally:
        core.stop()
