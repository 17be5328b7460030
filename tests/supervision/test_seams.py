"""The seams every OS effect sits behind: spawn, and the stop contract's time.

Strategy: a spawner that wraps the real one (or refuses) is injected into a
real supervisor; the stop contract runs against a real child on a FakeClock,
so its graces are reached by moving the clock, never by sleeping.
"""

import asyncio
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest

from core.base.errors import ServerParked, SpawnError
from core.base.states import ServerState
from core.supervision.child import ChildProcess, StopTiming, describe_returncode
from tests.conftest import (
    ECHO,
    ReadyFactory,
    SupervisorFactory,
    kill_hard,
    python_server,
    wait_ready,
    wait_state,
    wait_until,
)
from tests.support.fakes import FakeClock

#: Every test here runs under the native and the portable backend sets (conftest).
assert sys.platform != "win32", "process groups and signals: POSIX only (conftest.POSIX_ONLY)"

pytestmark = pytest.mark.usefixtures("backend")

#: Ignores stdin EOF (a server that never notices its client left), ends on SIGTERM.
DEAF_TO_EOF = (
    "import signal, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
    "print('ready', flush=True); signal.pause()"
)
#: Ignores stdin EOF and SIGTERM alike (it only says it got one): only SIGKILL ends it.
STUBBORN = (
    "import signal; signal.signal(signal.SIGTERM, lambda *_: print('term', flush=True)); "
    "print('ready', flush=True)\nwhile True: signal.pause()"
)


async def spawn_ready(code: str) -> ChildProcess:
    """A child that has installed its signal handlers (it says so on stdout)."""
    child = await ChildProcess.spawn(sys.executable, ["-c", code], env={}, cwd=None)
    assert await asyncio.wait_for(child.stdout.readline(), 10) == b"ready\n"
    return child


class RecordingSpawner:
    """The real spawn, with every launch written down."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, tuple[str, ...]]] = []

    async def __call__(
        self, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: str | None
    ) -> ChildProcess:
        self.launches.append((command, tuple(args)))
        return await ChildProcess.spawn(command, args, env=env, cwd=cwd)


async def test_the_supervisor_spawns_through_the_injected_spawner(
    start_ready: ReadyFactory,
) -> None:
    spawner = RecordingSpawner()
    supervisor, server = await start_ready("echo", python_server(ECHO), spawn=spawner)

    assert spawner.launches == [(sys.executable, (str(ECHO),))]
    await supervisor.respawn("echo")
    await wait_ready(server, generation=2)
    assert len(spawner.launches) == 2


async def test_a_spawner_that_refuses_for_good_parks_the_server_without_a_process(
    make_supervisor: SupervisorFactory,
) -> None:
    async def refuse(
        command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: str | None
    ) -> ChildProcess:
        raise SpawnError("no such sandbox", permanent=True)

    supervisor = await make_supervisor({"echo": python_server(ECHO)}, spawn=refuse)
    server = supervisor.server("echo")
    await wait_state(server, ServerState.PARKED)

    assert server.parked_reason == "no such sandbox"
    assert server.pid is None and server.generation == 1


@pytest.mark.parametrize(
    ("args", "env", "why"),
    [
        (["-c", "pass"], {"BAD=KEY": "x"}, "environment variable"),
        (["-c", "pass\x00"], {}, "null byte"),
        (["-c", "print('\ud800')"], {}, "surrogate"),
    ],
    ids=["equals-in-env-key", "nul-in-args", "lone-surrogate"],
)
async def test_values_exec_cannot_take_are_a_permanent_spawn_error(
    args: list[str], env: dict[str, str], why: str
) -> None:
    with pytest.raises(SpawnError) as refused:
        await ChildProcess.spawn(sys.executable, args, env=env, cwd=None)
    assert refused.value.permanent
    assert why in str(refused.value)


async def test_a_spawner_failing_in_an_unforeseen_way_parks_the_server_with_the_reason(
    make_supervisor: SupervisorFactory,
) -> None:
    async def broken(
        command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: str | None
    ) -> ChildProcess:
        raise RuntimeError("the sandbox helper crashed")

    supervisor = await make_supervisor({"echo": python_server(ECHO)}, spawn=broken)
    server = supervisor.server("echo")
    await wait_state(server, ServerState.PARKED)

    assert server.parked_reason is not None
    assert "RuntimeError: the sandbox helper crashed" in server.parked_reason
    # A call is told at once, not after a start timeout.
    with pytest.raises(ServerParked, match="sandbox helper crashed"):
        await asyncio.wait_for(supervisor.call_tool("echo", "echo", {"text": "x"}), 5)


async def test_a_run_loop_that_dies_is_seen_and_parks_the_server_never_left_starting(
    start_ready: ReadyFactory, caplog: pytest.LogCaptureFixture
) -> None:
    supervisor, server = await start_ready("echo", python_server(ECHO))

    def broken_accounting(run: object) -> None:
        raise RuntimeError("accounting bug")

    server.runloop.account_end = broken_accounting  # type: ignore[method-assign]
    pid = server.pid
    assert pid is not None
    await kill_hard(pid)
    await wait_state(server, ServerState.PARKED)

    assert server.parked_reason is not None and "accounting bug" in server.parked_reason
    assert [r for r in caplog.records if "supervision of echo failed" in r.getMessage()]
    assert not server.running
    # Respawn brings it back under a fresh run loop.
    del server.runloop.account_end  # the class's own again
    await supervisor.respawn("echo")
    await wait_ready(server)


@dataclass
class Stopping:
    """A child whose stop contract runs on a fake clock, now in its stdin-close grace."""

    clock: FakeClock
    timing: StopTiming
    child: ChildProcess
    #: What the contract logged.
    notes: list[str]
    stop: asyncio.Future[None]


async def start_stopping(code: str) -> Stopping:
    clock = FakeClock()
    timing = StopTiming(stdin_close_grace=2.0, sigterm_grace=2.0, sigkill_settle=1.0)
    child = await spawn_ready(code)
    notes: list[str] = []
    stop = asyncio.ensure_future(child.stop(timing, notes.append, clock))
    # stdin is closed and the contract waits out its grace on the fake clock.
    await wait_until(lambda: clock.sleepers == 1, what="the stdin-close grace to start")
    return Stopping(clock, timing, child, notes, stop)


async def test_the_stop_contract_waits_its_graces_on_the_injected_clock() -> None:
    stopping = await start_stopping(DEAF_TO_EOF)
    clock, child, stop = stopping.clock, stopping.child, stopping.stop

    clock.advance(stopping.timing.stdin_close_grace - 0.5)
    assert clock.sleepers == 1 and child.is_alive() and not stop.done()

    clock.advance(0.5)  # the grace is over: SIGTERM the group
    await asyncio.wait_for(stop, 10)
    assert child.returncode == 0  # it exited through its SIGTERM handler
    assert stopping.notes == []  # no escalation to SIGKILL was needed


async def test_a_child_that_ignores_sigterm_is_killed_when_the_clock_says_so() -> None:
    stopping = await start_stopping(STUBBORN)
    clock, child, stop = stopping.clock, stopping.child, stopping.stop

    clock.advance(stopping.timing.stdin_close_grace)
    # SIGTERM sent and shrugged off: the contract re-checks the group until its grace ends.
    assert await asyncio.wait_for(child.stdout.readline(), 10) == b"term\n"
    assert child.is_alive() and not stop.done()
    clock.advance(stopping.timing.sigterm_grace)
    await asyncio.wait_for(stop, 10)
    assert child.returncode == -signal.SIGKILL
    assert any("sending SIGKILL" in note for note in stopping.notes)


async def test_a_child_found_gone_before_its_exit_watch_told_has_its_exit_code() -> None:
    # The loop is never yielded to while looking, so the exit watch's callback
    # cannot run first: is_alive() alone must take the exit.
    child = await ChildProcess.spawn(
        sys.executable, ["-c", "raise SystemExit(3)"], env={}, cwd=None
    )
    try:
        deadline = time.monotonic() + 10
        while child.is_alive():
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)  # noqa: ASYNC251 - the point is not to yield to the loop
        assert child.returncode == 3
        assert describe_returncode(child.returncode) == "exit code 3"
    finally:
        await child.stop(StopTiming(0.1, 0.1, 0.1), lambda _: None)
