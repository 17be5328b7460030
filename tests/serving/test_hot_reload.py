"""Hot reload against real files and real children, through watchdog.

Strategy: a Supervisor runs real echo servers from a config file the test
rewrites on disk, the way editors do (in place, and write-temp-then-rename);
the ConfigWatcher must apply valid edits to exactly the servers they touch
and refuse invalid ones without stopping anything. Hostile edits (NaN, NUL,
deep nesting, a FIFO renamed onto the file) go the same way. A loader that
fails like a bug, or hangs like a dead network share, is injected; the
read's timeout runs on a FakeClock. Generated edits are in
tests/settings/test_fuzz_config.py.
"""

import asyncio
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.base.snapshot import EventKind
from core.base.states import ServerState
from core.serving.config_watch import READ_TIMEOUT_SECONDS, ConfigWatcher, Loader
from core.settings.config import TrayConfig, load_config
from core.settings.paths import Paths
from core.supervision.supervisor import Supervisor
from tests.conftest import (
    ECHO,
    FAST_TIMING,
    make_fifo,
    process_alive,
    python_server,
    wait_ready,
    wait_until,
)
from tests.support.fakes import FakeClock


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


# ------------------------------------------------------- hostile edits


def refused_with(supervisor: Supervisor, expected: str) -> Callable[[], bool]:
    return lambda: expected in (supervisor.config_error or "")


async def test_hostile_edits_are_refused_one_by_one_and_the_next_good_edit_applies(
    tray_home: Paths,
) -> None:
    a = python_server(ECHO)
    supervisor, watcher = await start(tray_home, document(a=a))
    path = tray_home.config_file
    try:
        server = supervisor.server("a")
        await wait_ready(server)
        pid = server.pid
        hostile = {
            "NaN": document(a=a).replace('"args"', '"keepalive_seconds": NaN, "args"'),
            "nested deeper than": '{"mcpServers": ' + "[" * 1000 + "]" * 1000 + "}",
            "NUL character": document(a=a | {"env": {"X": "\0"}}),
            "lone surrogate": document(a=a).replace('"args"', '"cwd": "\\udc80", "args"'),
            "no '='": document(a=a | {"env": {"A=B": "c"}}),
            "may not hold '__'": document(a=a, **{"a__b": a}),
        }
        for expected, text in hostile.items():
            path.write_text(text)
            # Waits for this edit's own error (a save caught half-written is refused first).
            await wait_until(refused_with(supervisor, expected), what=expected)
            assert server.state is ServerState.READY and server.pid == pid

        path.write_text(document(a=a | {"env": {"X": "1"}}))
        await wait_until(lambda: watcher.reloads >= 1, what="the good edit applied")
        assert supervisor.config_error is None
        await wait_ready(supervisor.server("a"), generation=2)
    finally:
        await watcher.aclose()
        await supervisor.aclose()


async def test_a_fifo_renamed_onto_the_config_is_refused_and_blocks_neither_reload_nor_shutdown(
    tray_home: Paths,
) -> None:
    a = python_server(ECHO)
    supervisor, watcher = await start(tray_home, document(a=a))
    try:
        server = supervisor.server("a")
        await wait_ready(server)
        pid = server.pid
        fifo = tray_home.config_file.with_name("pipe")
        make_fifo(fifo)
        os.replace(fifo, tray_home.config_file)

        await wait_until(lambda: supervisor.config_error is not None, what="the FIFO refused")
        assert "named pipe (FIFO), not a regular file" in (supervisor.config_error or "")
        assert server.pid == pid

        tray_home.config_file.unlink()
        save_by_rename(tray_home.config_file, document(a=a))
        await wait_until(lambda: supervisor.config_error is None, what="the file is back")
    finally:
        # Bounded: a reader stuck on the FIFO would hang here.
        await asyncio.wait_for(watcher.aclose(), timeout=10)
        await supervisor.aclose()


def flaky_loader(failures: int) -> Loader:
    """load_config, after ``failures`` calls that fail the way a bug would."""
    calls = 0

    def load(path: Path) -> TrayConfig:
        nonlocal calls
        calls += 1
        if calls <= failures:
            raise RuntimeError("simulated bug in the loader")
        return load_config(path)

    return load


async def test_an_unexpected_failure_is_logged_once_shown_and_the_next_edit_still_applies(
    tray_home: Paths, caplog: pytest.LogCaptureFixture
) -> None:
    a = python_server(ECHO)
    tray_home.config_file.write_text(document(a=a))
    supervisor = Supervisor(load_config(tray_home.config_file), tray_home, timing=FAST_TIMING)
    watcher = ConfigWatcher(supervisor, tray_home.config_file, loader=flaky_loader(2))
    try:
        await watcher.reload()
        await watcher.reload()
        error = supervisor.config_error or ""
        assert "failed to read this edit (RuntimeError: simulated bug in the loader)" in error
        assert "the servers keep running on the last good config" in error
        with_traceback = [r for r in caplog.records if r.exc_info]
        assert len(with_traceback) == 1  # the repeat is one line, not another traceback

        await watcher.reload()
        assert supervisor.config_error is None and watcher.reloads == 1
    finally:
        await watcher.aclose()
        await supervisor.aclose()


async def test_a_read_that_hangs_is_given_up_on_the_clock_and_shutdown_does_not_wait_for_it(
    tray_home: Paths, fake_clock: FakeClock
) -> None:
    tray_home.config_file.write_text(document())
    supervisor = Supervisor(load_config(tray_home.config_file), tray_home, clock=fake_clock)
    release = threading.Event()

    def hung(path: Path) -> TrayConfig:
        release.wait(timeout=60)  # a file system that stopped answering
        return load_config(path)

    watcher = ConfigWatcher(supervisor, tray_home.config_file, loader=hung)
    try:
        reload = asyncio.create_task(watcher.reload())
        await wait_until(lambda: fake_clock.sleepers > 0, what="the read timer")
        fake_clock.advance(READ_TIMEOUT_SECONDS - 0.1)
        await asyncio.sleep(0)
        assert not reload.done()
        fake_clock.advance(0.1)
        await asyncio.wait_for(reload, timeout=10)
        assert f"reading it took longer than {READ_TIMEOUT_SECONDS:g} s" in (
            supervisor.config_error or ""
        )

        supervisor.config_error = None
        again = asyncio.create_task(watcher.reload())
        await wait_until(lambda: fake_clock.sleepers > 0, what="the second read timer")
        await asyncio.wait_for(watcher.aclose(), timeout=10)
        await asyncio.wait_for(again, timeout=10)
        assert not release.is_set()  # the read still hangs: nothing waited for it
        assert supervisor.config_error is None  # given up for shutdown, not refused
    finally:
        release.set()
        await supervisor.aclose()
