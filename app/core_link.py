"""Where core, on its own thread and loop (core.serving.core_thread), meets Qt.

Core calls its subscribers on its own loop. ``CoreLink`` subscribes there
and turns what it hears into Qt signals, which Qt queues to the GUI thread
(the link lives there): a burst of core events (a respawn emits several) is
folded on core's loop into one ``changed`` per ``COALESCE_MS``, carrying a
snapshot taken on core's loop, so views rebuild once from a consistent,
frozen picture; stderr lines and alerts pass through one by one.

The other way, the GUI reaches core only through the link's doors:
``run`` (a coroutine on core's loop, its outcome handed back on the GUI
thread), ``call`` (a plain function on core's loop, waited for: for quick
reads) and ``post`` (fire and forget). ``on_gui`` runs a function on the
GUI thread from anywhere (core's callbacks use it).
"""

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from PySide6.QtCore import QObject, Signal

from core.base.snapshot import AlertKind, Event, EventKind, TraySnapshot
from core.serving.activity import Series
from core.serving.core_thread import CoreThread

#: How long events are gathered before views hear of them.
COALESCE_MS: Final = 50

T = TypeVar("T")
#: Told the call's failure (None when it succeeded), on the GUI thread.
Done = Callable[[BaseException | None], None]


class CoreLink(QObject):
    #: The snapshot changed; the kinds of events folded into this one.
    changed = Signal(object, object)
    #: (server, line) as the child wrote it to stderr.
    stderr = Signal(str, str)
    #: (AlertKind, server, text) for notifications: a park, a trip, a refused reload.
    alert = Signal(object, str, str)
    #: A function to run on the GUI thread (queued there from core's thread).
    _invoke = Signal(object)

    def __init__(self, core: CoreThread) -> None:
        super().__init__()
        self.core = core
        self.service = core.service
        self.supervisor = core.service.supervisor
        self._kinds: set[EventKind] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._closed = False
        # Connected first, so every other slot of ``changed`` sees the new snapshot here too.
        self.changed.connect(self._remember)
        self._invoke.connect(self._run_here)
        self._snapshot, self._unsubscribe = core.call(self._attach)

    def _attach(self) -> tuple[TraySnapshot, Callable[[], None]]:
        # On core's loop: the first snapshot and the subscription, with no event between them.
        return self.supervisor.snapshot(), self.supervisor.subscribe(self._on_event)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        def detach() -> None:
            self._unsubscribe()
            if self._flush_handle is not None:
                self._flush_handle.cancel()
                self._flush_handle = None

        self.core.call(detach)

    # ------------------------------------------------------ GUI thread

    def snapshot(self) -> TraySnapshot:
        """The latest snapshot core sent."""
        return self._snapshot

    def _remember(self, snapshot: TraySnapshot, kinds: object) -> None:
        self._snapshot = snapshot

    def _run_here(self, fn: Callable[[], None]) -> None:
        fn()

    def on_gui(self, fn: Callable[[], None]) -> None:
        """``fn()`` on the GUI thread: now if called there, else queued."""
        self._invoke.emit(fn)

    def run(self, coro: Coroutine[Any, Any, Any], done: Done | None = None) -> None:
        """``coro`` on core's loop; ``done`` (if given) hears how it ended, on the GUI thread."""
        future = self.core.submit(coro)
        if done is None:
            return

        def finished(f: "concurrent.futures.Future[Any]") -> None:
            error = f.exception() if not f.cancelled() else concurrent.futures.CancelledError()
            self.on_gui(lambda: done(error))

        future.add_done_callback(finished)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on core's loop, waited for: keep it to quick reads."""
        return self.core.call(fn, *args)

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        self.core.post(fn, *args)

    def series(self, names: list[str]) -> dict[str, Series]:
        """The activity behind the sparklines, read on core's loop (which keeps it)."""
        activity = self.service.activity
        return self.call(lambda: {name: activity.series(name) for name in names})

    # ------------------------------------------------------ core thread

    def _on_event(self, event: Event) -> None:
        if event.kind is EventKind.STDERR:
            self.stderr.emit(event.server or "", event.text or "")
            return
        if event.alert is AlertKind.PARKED and event.snapshot is not None:
            self.alert.emit(event.alert, event.server or "", event.snapshot.parked_reason or "")
        elif event.alert is not None:
            self.alert.emit(event.alert, event.server or "", event.text or "")
        self._kinds.add(event.kind)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(
                COALESCE_MS / 1000, self._flush
            )

    def _flush(self) -> None:
        self._flush_handle = None
        kinds, self._kinds = self._kinds, set()
        self.changed.emit(self.supervisor.snapshot(), kinds)
