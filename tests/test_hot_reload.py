"""Hot reload against real files and real children, through watchdog.

Strategy: a Supervisor runs real echo servers from a config file the test
rewrites on disk, the way editors do (in place, and write-temp-then-rename);
the ConfigWatcher must apply valid edits to exactly the servers they touch
and refuse invalid ones without stopping anything.
"""

import json
import os
from pathlib import Path
from typing import Any

from core.base.snapshot import EventKind
from core.base.states import ServerState
from core.serving.config_watch import ConfigWatcher
from core.settings.config import load_config
from core.settings.paths import Paths
from core.supervision.supervisor import Supervisor
from tests.conftest import ECHO, FAST_TIMING, process_alive, python_server, wait_ready, wait_until


def document(**servers: dict[str, Any]) -> str:
    return json.dumps({"mcpServers": servers}, indent=2)


async def start(tray_home: Paths, text: str) -> tuple[Supervisor, ConfigWatcher]:
    path = tray_home.config_file
    path.write_text(text)
    supervisor = Supervisor(load_config(path), tray_home, timing=FAST_TIMING)
    await supervisor.start(sweep=False)
    watcher = ConfigWatcher(supervisor, path, debounce=0.1)
    watcher.start()
    return supervisor, watcher


def save_by_rename(path: Path, text: str) -> None:
    tmp = path.with_name(".config.json.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def test_an_edit_restarts_only_the_changed_server_in_place_and_by_rename(
    tray_home: Paths,
) -> None:
    a, b = python_server(ECHO), python_server(ECHO)
    supervisor, watcher = await start(tray_home, document(a=a, b=b))
    try:
        await wait_ready(supervisor.server("a"))
        await wait_ready(supervisor.server("b"))
        b_pid = supervisor.server("b").pid

        tray_home.config_file.write_text(document(a=a | {"env": {"X": "1"}}, b=b))
        await wait_until(lambda: watcher.reloads >= 1, what="the in-place edit applied")
        assert watcher.last_result is not None and watcher.last_result.restarted == ("a",)
        await wait_ready(supervisor.server("a"), generation=2)

        save_by_rename(
            tray_home.config_file, document(a=a | {"env": {"X": "2"}}, b=b | {"retry": "always"})
        )
        await wait_until(lambda: watcher.reloads >= 2, what="the renamed save applied")
        assert watcher.last_result is not None and watcher.last_result.restarted == ("a",)
        await wait_ready(supervisor.server("a"), generation=3)
        # b's change (retry policy) needs no restart, and its child was never touched.
        assert supervisor.server("b").config.retry == "always"
        assert supervisor.server("b").pid == b_pid and supervisor.server("b").generation == 1
    finally:
        await watcher.aclose()
        await supervisor.aclose()


async def test_added_and_removed_servers_start_and_stop(tray_home: Paths) -> None:
    supervisor, watcher = await start(tray_home, document(a=python_server(ECHO)))
    try:
        old = supervisor.server("a")
        await wait_ready(old)
        pid = old.pid
        save_by_rename(tray_home.config_file, document(c=python_server(ECHO)))
        await wait_until(lambda: watcher.reloads >= 1, what="reload")
        assert watcher.last_result is not None
        assert (watcher.last_result.added, watcher.last_result.removed) == (("c",), ("a",))
        assert old.state is ServerState.STOPPED and list(supervisor.servers) == ["c"]
        assert pid is not None and not process_alive(pid)
        await wait_ready(supervisor.server("c"))
    finally:
        await watcher.aclose()
        await supervisor.aclose()


async def test_an_invalid_edit_keeps_everything_running_and_surfaces_the_error(
    tray_home: Paths,
) -> None:
    a = python_server(ECHO)
    supervisor, watcher = await start(tray_home, document(a=a))
    events: list[str] = []
    supervisor.subscribe(
        lambda event: events.append(event.text or "") if event.kind is EventKind.CONFIG else None
    )
    try:
        server = supervisor.server("a")
        await wait_ready(server)
        pid = server.pid

        tray_home.config_file.write_text(
            '{\n  "mcpServers": {\n    "a": {"command": "x", "argz": []}\n  }\n}\n'
        )
        await wait_until(lambda: supervisor.config_error is not None, what="the error surfaced")
        error = supervisor.config_error or ""
        assert f"{tray_home.config_file}:3" in error
        assert "mcpServers.a.argz" in error and "did you mean 'args'" in error
        assert supervisor.snapshot().config_error == error
        assert any("argz" in text for text in events)
        assert server.state is ServerState.READY and server.pid == pid
        assert (await supervisor.call_tool("a", "echo", {"text": "still here"}))["content"][0][
            "text"
        ] == "still here"

        tray_home.config_file.write_text(document(a=a))
        await wait_until(lambda: supervisor.config_error is None, what="the fix clears the error")
        assert server.pid == pid  # an unchanged entry is not restarted
    finally:
        await watcher.aclose()
        await supervisor.aclose()
