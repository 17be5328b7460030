"""Slow starters: the era is decided by a child's first answer, never by its silence.

Strategy: real children under a real Supervisor. tests/servers/slow_modern.py
is an SDK 2.3 server that sleeps before it reads its stdin (as one started
through ``uvx`` or a cold Python does), so its ``server/discover`` answer
comes after the probe window; the delay is shortened and the probe window
with it, so the test shows the same order of events as the 10 s start of the
issue in a second or two. A start that fails is driven on a FakeClock: each
try's start timeout passes by hand, and the test reads the parked reason and
the log.
"""

import dataclasses
import sys
from typing import Any

import pytest

from core.base.states import ServerState
from core.supervision.server import ManagedServer
from tests.conftest import (
    FAST_TIMING,
    SERVERS,
    SupervisorFactory,
    python_server,
    wait_ready,
    wait_state,
    wait_until,
)
from tests.support.fakes import FakeClock

pytestmark = pytest.mark.usefixtures("backend")

SLOW_MODERN = SERVERS / "slow_modern.py"
LEGACY = SERVERS / "legacy_2024.py"
#: The child's start outlasts the probe window several times over.
SLOW_START = "1.0"
PROBE = dataclasses.replace(FAST_TIMING, probe_timeout=0.2)


def log_of(server: ManagedServer) -> str:
    return server.log_path.read_text()


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def test_a_slow_2026_server_is_ready_on_its_first_try_in_its_own_era(
    make_supervisor: SupervisorFactory,
) -> None:
    entry = python_server(SLOW_MODERN, SLOW_START_SECONDS=SLOW_START)
    supervisor = await make_supervisor({"slow": entry}, timing=PROBE)
    server = supervisor.server("slow")

    await wait_ready(server, timeout=30)

    assert server.generation == 1
    assert server.catalog.version == "2026-07-28"
    log = log_of(server)
    assert "server/discover unanswered after 0.2 s: sending initialize as well" in log
    assert "speaks 2026-07-28 (server/discover answered)" in log
    assert "failed to start" not in log
    result = await supervisor.call_tool("slow", "hello", {})
    assert text_of(result) == "hello from a slow start"


async def test_a_slow_2026_server_pinned_to_its_era_waits_for_discover_past_the_window(
    make_supervisor: SupervisorFactory,
) -> None:
    entry = python_server(SLOW_MODERN, SLOW_START_SECONDS=SLOW_START) | {"protocol": "2026-07-28"}
    supervisor = await make_supervisor({"slow": entry}, timing=PROBE)
    server = supervisor.server("slow")

    await wait_ready(server, timeout=30)

    assert server.generation == 1
    assert server.catalog.version == "2026-07-28"


async def test_a_slow_handshake_era_server_is_ready_on_its_first_try_through_initialize(
    make_supervisor: SupervisorFactory,
) -> None:
    # The old server, started late: it reads discover (unknown to it, refused)
    # and the initialize sent beside it once the window passed.
    late = f"import runpy, time; time.sleep({SLOW_START}); runpy.run_path({str(LEGACY)!r}, run_name='__main__')"
    supervisor = await make_supervisor(
        {"old": {"command": sys.executable, "args": ["-c", late]}}, timing=PROBE
    )
    server = supervisor.server("old")

    await wait_ready(server, timeout=30)

    assert server.generation == 1
    assert server.catalog.version == "2024-11-05"
    assert "speaks 2024-11-05 (initialize answered)" in log_of(server)


async def test_a_server_refusing_the_era_it_is_pinned_to_parks_at_once_saying_so(
    make_supervisor: SupervisorFactory,
) -> None:
    entry = python_server(LEGACY) | {"protocol": "2026-07-28"}
    supervisor = await make_supervisor({"old": entry}, timing=PROBE)
    server = supervisor.server("old")

    await wait_state(server, ServerState.PARKED)

    assert server.generation == 1
    reason = server.parked_reason or ""
    assert '"protocol": "2026-07-28"' in reason
    assert "server/discover refused" in reason
    assert server.snapshot().parked_reason == server.parked_reason
    assert "generation 1 failed to start" in log_of(server)


async def test_a_server_that_never_answers_parks_with_what_happened_and_each_try_logged(
    make_supervisor: SupervisorFactory, fake_clock: FakeClock
) -> None:
    mute = {"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"]}
    supervisor = await make_supervisor({"mute": mute}, clock=fake_clock)
    server = supervisor.server("mute")
    timeout = server.timing.start_timeout

    def pass_a_window() -> None:
        # Starting: its start timeout runs out (it exceeds the keepalive, so
        # a run counted as up that long would wrongly pass as proven);
        # exited: its backoff ends.
        if fake_clock.sleepers and server.state in (ServerState.STARTING, ServerState.EXITED):
            fake_clock.advance(timeout)

    await wait_until(
        lambda: server.state is ServerState.PARKED,
        timeout=60,
        what=f"mute parked (now {server.state.value} gen {server.generation})",
        between=pass_a_window,
    )

    assert server.generation == 6
    reason = server.parked_reason or ""
    assert "6 runs in a row ended" in reason
    assert f"stopped by mcp-tray after a failed start (no handshake within {timeout:g} s)" in reason
    log = log_of(server)
    for generation in range(1, 7):
        assert f"generation {generation} failed to start: no handshake within" in log
