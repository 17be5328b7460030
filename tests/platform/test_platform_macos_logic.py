"""The macOS process backends' logic, run here with the OS's parts injected.

Strategy: real children (small Python processes, left unreaped where a
zombie is needed) and the real event loop; only what Linux lacks is
injected. The kqueue exit watch gets a fake kqueue whose descriptor is a
pipe the test makes readable, with or without an event behind it (the
spurious readiness reported for nested kqueues), and whose exit event can
come before the child can be reaped (XNU's race). ``GroupTree`` gets a
``killpg`` that answers EPERM, as macOS does for a group of zombies. The
real kqueue wiring is type-checked with ``mypy --platform darwin``.
"""

import asyncio
import errno
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

from core.platform.kqueue_watch import KqueueWatching
from tests.conftest import wait_until, wait_until_sync

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")

NOTE_EXIT = 0x80000000


@dataclass
class FakeEvent:
    ident: int
    fflags: int


class FakeKqueue:
    """``select.kqueue`` as the watch uses it; readiness is a byte in a pipe."""

    def __init__(self, *, gone: bool = False) -> None:
        self._read, self._write = os.pipe()
        self.gone = gone
        self.registered: list[Any] = []
        self.pending: list[FakeEvent] = []
        self.reads = 0
        self.closed = False

    def control(
        self, changelist: Iterable[Any] | None, max_events: int, timeout: float | None = None, /
    ) -> list[Any]:
        assert timeout == 0, "the watch must never block in control()"
        if changelist is not None:
            if self.gone:
                raise ProcessLookupError(errno.ESRCH, "No such process")
            self.registered.extend(changelist)
            return []
        self.reads += 1
        os.read(self._read, 1)  # the readiness is consumed with the read
        events, self.pending = self.pending[:max_events], self.pending[max_events:]
        return events

    def wake(self, event: FakeEvent | None = None) -> None:
        """Make the descriptor readable, with ``event`` behind it or nothing (spurious)."""
        if event is not None:
            self.pending.append(event)
        os.write(self._write, b"!")

    def fileno(self) -> int:
        return self._read

    def is_closed(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True
        os.close(self._read)
        os.close(self._write)


@pytest.fixture
def waiting_child() -> Iterator["subprocess.Popen[bytes]"]:
    """A real child that runs until its stdin closes."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        assert child.stdin is not None
        child.stdin.close()


def end(child: "subprocess.Popen[bytes]") -> None:
    assert child.stdin is not None
    child.stdin.close()


def zombie(child: "subprocess.Popen[bytes]") -> bool:
    """The child exited and is not reaped yet (looked at without reaping it)."""
    return psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE


async def test_a_spurious_readiness_tells_nothing_and_leaves_the_watch_armed(
    waiting_child: "subprocess.Popen[bytes]",
) -> None:
    told: list[int | None] = []
    queue = FakeKqueue()
    loop = asyncio.get_running_loop()
    watch = KqueueWatching(
        waiting_child, loop, lambda: told.append(waiting_child.returncode), queue, "exit-event"
    )
    assert queue.registered == ["exit-event"]
    queue.wake()  # readable, no event
    await wait_until(lambda: queue.reads == 1, what="the watch to read the kqueue")
    assert not told and watch.alive() and not queue.is_closed()

    end(waiting_child)
    await wait_until(lambda: zombie(waiting_child), what="the child to exit")
    queue.wake(FakeEvent(waiting_child.pid, NOTE_EXIT))
    await wait_until(lambda: told, what="the exit to be told")
    assert told == [0] and not watch.alive() and queue.is_closed()
    await asyncio.sleep(0.02)
    assert told == [0], "told once"


async def test_an_exit_event_before_the_child_can_be_reaped_never_blocks_the_loop(
    waiting_child: "subprocess.Popen[bytes]",
) -> None:
    # The event says "exited" while poll() cannot reap yet: a blocking wait()
    # here would hold the loop until the child ends, which it never would.
    told: list[int | None] = []
    queue = FakeKqueue()
    loop = asyncio.get_running_loop()
    KqueueWatching(
        waiting_child, loop, lambda: told.append(waiting_child.returncode), queue, "exit-event"
    )
    queue.wake(FakeEvent(waiting_child.pid, NOTE_EXIT))
    await wait_until(lambda: queue.reads == 1, what="the watch to read the event")
    # The loop still turns (this sleep ends) and nothing was told early.
    await asyncio.wait_for(asyncio.sleep(0.05), timeout=5)
    assert not told and waiting_child.returncode is None

    end(waiting_child)
    await wait_until(lambda: told, what="the retried reap to tell the exit")
    assert told == [0]


async def test_a_child_gone_before_its_watch_began_is_told_at_once(
    waiting_child: "subprocess.Popen[bytes]",
) -> None:
    end(waiting_child)
    await wait_until(lambda: zombie(waiting_child), what="the child to exit")
    told: list[int | None] = []
    queue = FakeKqueue(gone=True)
    KqueueWatching(
        waiting_child,
        asyncio.get_running_loop(),
        lambda: told.append(waiting_child.returncode),
        queue,
        "exit-event",
    )
    await wait_until(lambda: told, what="the exit to be told")
    assert told == [0] and queue.is_closed()


async def test_a_closed_watch_tells_nothing_even_when_the_child_exits(
    waiting_child: "subprocess.Popen[bytes]",
) -> None:
    told: list[int | None] = []
    queue = FakeKqueue()
    watch = KqueueWatching(
        waiting_child,
        asyncio.get_running_loop(),
        lambda: told.append(waiting_child.returncode),
        queue,
        "exit-event",
    )
    watch.close()
    assert queue.is_closed()
    end(waiting_child)
    await wait_until(lambda: zombie(waiting_child), what="the child to exit")
    await asyncio.sleep(0.02)
    assert told == []


if sys.platform != "win32":  # (the module is skipped there; this is for mypy)
    from core.platform.trees import GroupTree

    def macos_killpg(pgid: int, sig: int) -> None:
        """What macOS answers for a group whose members are all zombies, or not this user's."""
        raise PermissionError(errno.EPERM, "Operation not permitted")

    def test_a_group_of_zombies_is_dead_though_killpg_answers_eperm() -> None:
        leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
        try:
            wait_until_sync(lambda: zombie(leader), what="the leader to become a zombie")
            assert not GroupTree(leader.pid, killpg=macos_killpg).alive()
            # Linux's own killpg reaches the zombie: the same answer, for its own reason.
            assert not GroupTree(leader.pid).alive()
        finally:
            leader.wait()

    def test_a_live_group_is_alive_though_killpg_answers_eperm() -> None:
        leader = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert GroupTree(leader.pid, killpg=macos_killpg).alive()
        finally:
            leader.kill()
            leader.wait()
            assert leader.stdin is not None
            leader.stdin.close()
