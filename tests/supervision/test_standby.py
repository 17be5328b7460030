"""The standby spare: one more child kept started, which takes over when the active one dies.

Strategy: a real Supervisor runs tests/servers/echo.py (its slow tools leave a
marker holding their pid) and tests/servers/slow_modern.py (seconds to start)
with ``"standby": true``; the active child is killed with a real kill -9 and
the test looks at which pid answers next and how often a tool ran. The spare
must be the child that answers, a non-idempotent call cut by the death must
be answered once and never replayed, and the spare's own start must be
behind it (slow_modern's start is not paid again).
"""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core.base.errors import ExitedMidCall
from core.supervision.server import ManagedServer
from tests.conftest import (
    ECHO,
    SERVERS,
    ReadyFactory,
    kill_hard,
    pid_of,
    process_gone,
    python_server,
    wait_ready,
    wait_until,
)

SLOW_MODERN = SERVERS / "slow_modern.py"


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def spare_pid(server: ManagedServer) -> int:
    standby = server.runloop.standby
    await wait_until(lambda: standby.ready, what="the spare to start")
    assert standby.spare is not None
    return standby.spare.pid


async def test_on_kill_9_the_spare_answers_the_next_call_and_a_new_spare_starts(
    start_ready: ReadyFactory,
) -> None:
    supervisor, server = await start_ready("echo", {**python_server(ECHO), "standby": True})
    active = pid_of(server)
    spare = await spare_pid(server)
    assert spare != active

    await kill_hard(active)
    result = await supervisor.call_tool("echo", "whoami", {})

    assert int(text_of(result)) == spare
    assert server.generation == 2
    next_spare = await spare_pid(server)
    assert next_spare not in (active, spare)


async def test_a_non_idempotent_call_cut_by_kill_9_is_answered_once_and_never_replayed(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    entry = {**python_server(ECHO, ECHO_MARKER_DIR=str(tmp_path)), "standby": True}
    supervisor, server = await start_ready("echo", entry)
    active = pid_of(server)
    spare = await spare_pid(server)
    call = asyncio.ensure_future(supervisor.call_tool("echo", "slow_write", {"seconds": 5}))
    marker = tmp_path / "slow_write.started"
    await wait_until(marker.exists, what="slow_write to start")
    marker.unlink()

    await kill_hard(active)
    with pytest.raises(ExitedMidCall) as caught:
        await asyncio.wait_for(call, 10)

    assert "may or may not have taken effect" in str(caught.value)
    await wait_ready(server, generation=2)
    assert pid_of(server) == spare
    # Not replayed on the spare: the tool ran once, in the child that died.
    assert not marker.exists()


async def test_a_read_only_call_cut_by_kill_9_is_replayed_once_on_the_spare(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    entry = {**python_server(ECHO, ECHO_MARKER_DIR=str(tmp_path)), "standby": True}
    supervisor, server = await start_ready("echo", entry)
    active = pid_of(server)
    spare = await spare_pid(server)
    call = asyncio.ensure_future(supervisor.call_tool("echo", "slow_read", {"seconds": 0.2}))
    marker = tmp_path / "slow_read.started"
    await wait_until(marker.exists, what="slow_read to start")
    marker.unlink()

    await kill_hard(active)
    result = await asyncio.wait_for(call, 10)

    assert text_of(result) == "read after 0.2"
    assert marker.read_text() == str(spare)
    assert server.respawn_requests == 1


async def test_a_slow_starting_server_is_answered_after_kill_9_without_its_start_again(
    start_ready: ReadyFactory,
) -> None:
    # Its one tool has no safety hints: a call racing the kill may be replayed.
    entry = {
        **python_server(SLOW_MODERN, SLOW_START_SECONDS="3"),
        "standby": True,
        "retry": "always",
    }
    supervisor, server = await start_ready("slow", entry)
    active = pid_of(server)
    await spare_pid(server)
    # Past its own start: it said so on stderr (kept in the server's log).
    await wait_until(
        lambda: "[standby] slow_modern: serving" in server.log_path.read_text(),
        what="the spare past its start",
    )

    await kill_hard(active)
    loop = asyncio.get_running_loop()
    began = loop.time()
    result = await supervisor.call_tool("slow", "hello", {})
    took = loop.time() - began

    assert text_of(result) == "hello from a slow start"
    # Its own start takes 3 s; the spare had it behind it.
    assert took < 3.0


async def test_stopping_the_server_ends_its_spare_too(start_ready: ReadyFactory) -> None:
    supervisor, server = await start_ready("echo", {**python_server(ECHO), "standby": True})
    spare = await spare_pid(server)

    await supervisor.stop_server("echo")

    assert process_gone(spare)
    assert server.runloop.standby.spare is None
