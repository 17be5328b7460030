"""Shared fixtures: isolated homes, supervisors over real test servers, bounded waits."""

import asyncio
import contextlib
import faulthandler
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest

from core.base.clock import SYSTEM_CLOCK, Clock
from core.base.envvars import PLATFORM_ENV
from core.base.states import ServerState
from core.platform.backends import CHOICES, Backends, backends
from core.settings.config import load_config
from core.settings.paths import Paths, default_paths
from core.supervision.child import ChildProcess, Spawner, StopTiming
from core.supervision.run import Timing
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor
from tests.support import paths
from tests.support.fakes import FakeClock

pytest_plugins = ["tests.support.gateway_support", "tests.support.remote_server"]

#: Test modules about POSIX process groups and signals, not collected on Windows
#: (the Windows job object has its own semantics, type-checked only; docs/platforms.md).
POSIX_ONLY = ["supervision/test_stop_contract.py", "supervision/test_seams.py"]
if sys.platform == "win32":
    collect_ignore = POSIX_ONLY

SERVERS = paths.SERVERS
ECHO = SERVERS / "echo.py"
CRASH_AT_START = SERVERS / "crash_at_start.py"
GRANDCHILD = SERVERS / "grandchild.py"

#: Short stop graces keep tests quick; the contract's order is unchanged.
FAST_TIMING = Timing(
    stop=StopTiming(stdin_close_grace=1.0, sigterm_grace=1.0, sigkill_settle=1.0),
    backoff_initial=0.05,
    backoff_cap=0.2,
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    # A test that fails and then hangs in teardown escapes pytest-timeout:
    # dump the stacks and exit rather than hang CI.
    faulthandler.dump_traceback_later(60, exit=True)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()


def known_bug(
    reason: str, raises: type[BaseException] | tuple[type[BaseException], ...] = AssertionError
) -> pytest.MarkDecorator:
    """A strict xfail that pins a known product bug: the test must fail with ``raises``.

    Strict, so the day the bug is fixed the test passes, the suite fails, and
    the mark comes off.
    """
    return pytest.mark.xfail(strict=True, raises=raises, reason=reason)


def python_server(script: Path, **env: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": sys.executable, "args": [str(script)]}
    if env:
        entry["env"] = env
    return entry


@pytest.fixture(params=CHOICES)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backends:
    """Each backend set in turn: this OS's native one, then the portable one.

    Supervision suites take it with ``pytestmark = pytest.mark.usefixtures("backend")``,
    so what macOS and Windows fall back to runs here on every ``make test``.
    The variable reaches children too (a headless tray started by a test).
    """
    monkeypatch.setenv(PLATFORM_ENV, request.param)
    chosen = backends()
    assert chosen.name == request.param
    return chosen


@pytest.fixture
def tray_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    home = tmp_path / "home"
    monkeypatch.setenv("MCP_TRAY_HOME", str(home))
    return default_paths().ensure()


SupervisorFactory = Callable[..., Awaitable[Supervisor]]


@pytest.fixture
async def make_supervisor(tray_home: Paths) -> AsyncIterator[SupervisorFactory]:
    created: list[Supervisor] = []

    async def make(
        servers: dict[str, dict[str, Any]],
        *,
        clock: Clock = SYSTEM_CLOCK,
        timing: Timing = FAST_TIMING,
        spawn: Spawner = ChildProcess.spawn,
    ) -> Supervisor:
        path = tray_home.config_file
        path.write_text(json.dumps({"mcpServers": servers}))
        supervisor = Supervisor(
            load_config(path), tray_home, clock=clock, timing=timing, spawn=spawn
        )
        created.append(supervisor)
        await supervisor.start(sweep=False)
        return supervisor

    yield make
    for supervisor in created:
        clock = supervisor.clock
        # The stop contract's graces run on the supervisor's clock.
        async with clock.ticking() if isinstance(clock, FakeClock) else contextlib.nullcontext():
            await supervisor.aclose()


#: ``await start_ready(name, entry, **options)``: see the ``start_ready`` fixture.
ReadyFactory = Callable[..., Awaitable[tuple[Supervisor, ManagedServer]]]


@pytest.fixture
def start_ready(make_supervisor: SupervisorFactory) -> ReadyFactory:
    """One server, alone under a new supervisor, once it is ready.

    ``options`` go to ``make_supervisor`` (clock, timing, spawn).
    """

    async def start(
        name: str, entry: dict[str, Any], **options: Any
    ) -> tuple[Supervisor, ManagedServer]:
        supervisor = await make_supervisor({name: entry}, **options)
        server = supervisor.server(name)
        await wait_ready(server)
        return supervisor, server

    return start


def pid_of(server: ManagedServer) -> int:
    """The pid of a server's running child (a ready server has one)."""
    pid = server.pid
    assert pid is not None
    return pid


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


#: How often the polling helpers look again (real time).
POLL_SECONDS = 0.005
POLL_SECONDS_SYNC = 0.05


async def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float = 20.0,
    what: str = "condition",
    between: Callable[[], None] | None = None,
) -> Any:
    """The one polling helper: look at a cheap predicate until it holds, within a bounded wait.

    Returns the predicate's truthy value (an async predicate is awaited). ``between`` runs after each miss (a
    test may move a fake clock there). Use it for outcomes that have no event
    to await; never to let "enough" time pass.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        if between is not None:
            between()
        await asyncio.sleep(POLL_SECONDS)


def wait_until_sync(
    predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "condition"
) -> Any:
    """``wait_until`` for tests without an event loop (the CLI against a subprocess)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_SECONDS_SYNC)
    return value


async def wait_state(server: ManagedServer, *states: ServerState, timeout: float = 20.0) -> None:
    await wait_until(
        lambda: server.state in states,
        timeout=timeout,
        what=f"{server.name} to reach {[s.value for s in states]} (now {server.state.value}, {server.last_error})",
    )


async def wait_ready(
    server: ManagedServer, generation: int | None = None, timeout: float = 20.0
) -> None:
    await wait_until(
        lambda: (
            server.state is ServerState.READY
            and (generation is None or server.generation == generation)
        ),
        timeout=timeout,
        what=f"{server.name} ready (gen {generation}; now {server.state.value} gen {server.generation}, {server.last_error})",
    )


async def kill_hard(pid: int) -> None:
    """kill -9, then wait until the kernel has ended it (zombie or gone).

    Never psutil's wait(): it would reap our own child behind the pidfd's back.
    """
    kill_now(pid)
    await wait_until(lambda: process_gone(pid), timeout=5, what=f"pid {pid} to die")


def kill_now(pid: int) -> None:
    """kill -9 (TerminateProcess on Windows), without waiting."""
    psutil.Process(pid).kill()


def make_fifo(path: Path) -> None:
    """A named pipe at ``path``; Windows keeps those out of the file system."""
    if sys.platform == "win32":
        pytest.skip("Windows has no FIFOs in the file system")
    else:
        os.mkfifo(path)


def process_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def process_alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting to be reaped."""
    return not process_gone(pid)


T = TypeVar("T")


class LoopThread:
    """An event loop on a thread of its own, so synchronous code (hypothesis
    drives only plain functions) can run the async core through ``run``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def logged_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What was logged with a traceback (name: message), which must never happen."""
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]


@pytest.fixture
def headless(tmp_path: Path) -> Iterator[Any]:
    """Start ``mcp-tray run --headless`` subprocesses (a config, a home); all stopped after."""
    from core.supervision.sweep import sweep_leftovers
    from tests.support.cli_support import Headless  # it imports this module

    started: list[Headless] = []

    def start(
        config: dict[str, Any], home: Path | None = None, file_limit: int | None = None
    ) -> Headless:
        instance = Headless(home or tmp_path / "home", config, file_limit)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()
    # Whatever a SIGKILLed instance left behind must not outlive the test.
    sweep_leftovers()
