"""The kqueue exit watch's logic (macOS and the BSDs), apart from ``select.kqueue``.

core.platform.exits builds the kqueue and its ``KQ_NOTE_EXIT`` event on
the OSes that have them and hands both to ``KqueueWatching``; nothing here
names ``select``'s kqueue, so tests on Linux drive this with a fake one
whose descriptor is a pipe they make readable.

Two facts shape it:

- readiness of the kqueue's descriptor is a hint, not the event: nested
  kqueues (a kqueue watched by the loop's own selector) are known to wake
  without one. So ``control(None, 1, 0)`` reads it, never blocking, and an
  empty answer leaves the watch armed;
- the exit event can come a moment before the zombie can be reaped (XNU;
  trio's kqueue wait follows its event with a short blocking ``wait`` for
  this). A blocking wait on core's loop thread would freeze every server,
  so ``Popen.poll`` (WNOHANG) is retried on the loop's timer instead.
"""

import asyncio
import contextlib
import subprocess
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

#: First wait before ``poll`` is tried again after an exit event it could not reap yet.
REAP_RETRY_FIRST_SECONDS: Final = 0.001
#: The retries double up to this (a degraded watch, without its kqueue, polls at this pace).
REAP_RETRY_MAX_SECONDS: Final = 0.1


class KqueueLike(Protocol):
    """What the watch uses of ``select.kqueue``."""

    def control(
        self, changelist: Iterable[Any] | None, max_events: int, timeout: float | None = ..., /
    ) -> list[Any]: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class KqueueWatching:
    """One child's watch: the kqueue's event, then a reap that never blocks."""

    def __init__(
        self,
        popen: "subprocess.Popen[bytes]",
        loop: asyncio.AbstractEventLoop,
        on_exit: Callable[[], None],
        queue: KqueueLike,
        exit_event: object,
    ) -> None:
        self._popen = popen
        self._loop = loop
        self._on_exit = on_exit
        self._queue: KqueueLike | None = queue
        self._done = False
        self._retry: asyncio.TimerHandle | None = None
        self._delay = REAP_RETRY_FIRST_SECONDS
        try:
            queue.control([exit_event], 0, 0)
        except ProcessLookupError:
            # Exited before the watch began: no event will come, so reap now.
            self._release()
            loop.call_soon(self._reap)
            return
        loop.add_reader(queue.fileno(), self._readable)

    def _readable(self) -> None:
        if self._queue is None:
            return
        try:
            events = self._queue.control(None, 1, 0)
        except OSError:
            # The kqueue itself failed: reaping on the timer still sees the exit.
            self._release()
            self._reap()
            return
        if not events:
            return  # spurious readiness: still armed
        # The one-shot registration is spent whatever the event says (our exit,
        # or an EV_ERROR): poll decides, and the timer retries until it can reap.
        self._release()
        self._reap()

    def _reap(self) -> None:
        self._retry = None
        if self._done:
            return
        if self._popen.poll() is None:
            self._retry = self._loop.call_later(self._delay, self._reap)
            self._delay = min(self._delay * 2, REAP_RETRY_MAX_SECONDS)
            return
        self._done = True
        self._on_exit()

    def _release(self) -> None:
        if self._queue is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._queue.fileno())
            self._queue.close()
            self._queue = None

    def alive(self) -> bool:
        return self._popen.returncode is None and self._popen.poll() is None

    def close(self) -> None:
        self._done = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._release()
