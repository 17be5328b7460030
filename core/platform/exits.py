"""Seeing a child exit the moment it does, without polling.

Each watch calls ``on_exit`` once, on the event loop's thread, after the
exit; the child is not reaped by the watch (``Popen.poll`` does that in
``on_exit``), except by the wait thread, whose wait is the reaping.

- Linux, ``pidfd``: ``os.pidfd_open`` gives a descriptor that becomes
  readable when the process exits; the loop watches it with ``add_reader``.
  It neither reaps nor races with pid reuse.
- macOS, ``kqueue``: a kqueue with one ``KQ_FILTER_PROC``/``KQ_NOTE_EXIT``
  event for the pid; the kqueue's own descriptor becomes readable on exit
  and the loop watches it the same way (psutil and trio wait like this).
  Readiness alone proves nothing (nested kqueues can wake spuriously): the
  watch reads the event (``control(None, 1, 0)``, never blocking) and keeps
  watching without one. After the event the child is reaped with
  ``Popen.poll`` (WNOHANG): XNU may report the exit a moment before the
  zombie can be reaped (trio's kqueue wait notes this race), so an early
  ``poll`` is retried on a timer, never with a blocking ``wait`` on the
  loop's thread. The logic is core.platform.kqueue_watch, OS-neutral so
  tests can drive it with a fake kqueue.
- Windows and the portable set, ``wait thread``: a thread blocked in
  ``Popen.wait`` (on Windows a ``WaitForSingleObject`` on the process
  handle) hands the exit to the loop with ``call_soon_threadsafe``. Event
  driven too, at the cost of one thread per child.

All three see an exit within a millisecond or two (bench/recovery.py).
"""

import asyncio
import contextlib
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Final, Protocol

OnExit = Callable[[], None]


class Watching(Protocol):
    """One child's watch."""

    def alive(self) -> bool:
        """True until the child has exited (asked of the OS, not a cached flag)."""
        ...

    def close(self) -> None:
        """Stop watching (the child itself is not touched)."""
        ...


class ExitWatch(Protocol):
    @property
    def name(self) -> str: ...

    def watch(
        self, popen: "subprocess.Popen[bytes]", loop: asyncio.AbstractEventLoop, on_exit: OnExit
    ) -> Watching: ...


def _not_exited(popen: "subprocess.Popen[bytes]") -> bool:
    return popen.returncode is None and popen.poll() is None


class _Once:
    """A watch that tells ``on_exit`` once (never after ``close``); ``alive`` asks the Popen."""

    def __init__(self, popen: "subprocess.Popen[bytes]", on_exit: OnExit) -> None:
        self._popen = popen
        self._on_exit = on_exit
        self._done = False

    def _tell(self) -> None:
        if not self._done:
            self._done = True
            self._on_exit()

    def alive(self) -> bool:
        # For the wait thread: poll() returns None while the thread holds the
        # wait, and the returncode is set the moment that wait returns.
        return _not_exited(self._popen)

    def close(self) -> None:
        self._done = True


class WaitThread:
    """A thread per child, blocked in ``Popen.wait`` until it exits."""

    name: Final = "wait thread (Popen.wait)"

    def watch(
        self, popen: "subprocess.Popen[bytes]", loop: asyncio.AbstractEventLoop, on_exit: OnExit
    ) -> Watching:
        return _Waiting(popen, loop, on_exit)


class _Waiting(_Once):
    def __init__(
        self, popen: "subprocess.Popen[bytes]", loop: asyncio.AbstractEventLoop, on_exit: OnExit
    ) -> None:
        super().__init__(popen, on_exit)
        self._loop = loop
        thread = threading.Thread(
            target=self._wait, name=f"mcp-tray exit watch {popen.pid}", daemon=True
        )
        thread.start()

    def _wait(self) -> None:
        self._popen.wait()
        # The loop may be gone (a tray shutting down): nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._tell)


if sys.platform == "linux":
    import os

    class Pidfd:
        """Linux: a pidfd watched by the event loop."""

        name: Final = "pidfd (os.pidfd_open + add_reader)"

        def watch(
            self,
            popen: "subprocess.Popen[bytes]",
            loop: asyncio.AbstractEventLoop,
            on_exit: OnExit,
        ) -> Watching:
            return _PidfdWatching(popen, loop, on_exit)

    class _PidfdWatching:
        def __init__(
            self,
            popen: "subprocess.Popen[bytes]",
            loop: asyncio.AbstractEventLoop,
            on_exit: OnExit,
        ) -> None:
            self._loop = loop
            self._on_exit = on_exit
            self._fd: int | None = os.pidfd_open(popen.pid)
            loop.add_reader(self._fd, self._fire)

        def _fire(self) -> None:
            self.close()
            self._on_exit()

        def alive(self) -> bool:
            if self._fd is None:
                return False
            try:
                # WNOWAIT: look without reaping; the exit is on_exit's to take.
                info = os.waitid(os.P_PIDFD, self._fd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return False
            return info is None

        def close(self) -> None:
            if self._fd is not None:
                self._loop.remove_reader(self._fd)
                os.close(self._fd)
                self._fd = None


if sys.platform != "linux" and sys.platform != "win32":
    import select

    from core.platform.kqueue_watch import KqueueWatching

    class Kqueue:
        """macOS (and the BSDs): a kqueue per child, its descriptor watched by the loop."""

        name: Final = "kqueue (KQ_FILTER_PROC, KQ_NOTE_EXIT)"

        def watch(
            self,
            popen: "subprocess.Popen[bytes]",
            loop: asyncio.AbstractEventLoop,
            on_exit: OnExit,
        ) -> Watching:
            queue = select.kqueue()
            exit_event = select.kevent(
                popen.pid,
                filter=select.KQ_FILTER_PROC,
                flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT,
                fflags=select.KQ_NOTE_EXIT,
            )
            return KqueueWatching(popen, loop, on_exit, queue, exit_event)
