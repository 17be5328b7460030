"""Where core, on its own thread and loop (core.serving.core_thread), meets Qt.

Core calls its subscribers on its own loop. ``CoreLink`` subscribes there
and turns what it hears into Qt signals, which Qt queues to the GUI thread
(the link lives there): a burst of core events (a respawn emits several) is
folded on core's loop into one ``changed`` per ``COALESCE_MS``, carrying a
snapshot taken on core's loop, so views rebuild once from a consistent,
frozen picture; stderr lines and alerts pass through one by one.

The GUI thread runs qasync's loop (app/main.py), so the window's flows
are coroutines there: ``spawn`` starts one on the GUI loop, and
``await link.ask(coro)`` runs ``coro`` on core's loop and resumes with its
result or exception, Qt's loop turning meanwhile. The older doors stay:
``run`` (a coroutine on core's loop, its outcome handed to a callback on the
GUI thread), ``call`` (a plain function on core's loop, waited for: for
quick reads only) and ``post`` (fire and forget). ``on_gui`` runs a function
on the GUI thread from anywhere (core's callbacks use it).
"""

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from PySide6.QtCore import QObject, Signal

from core.base.snapshot import AlertKind, Event, EventKind, TraySnapshot
from core.serving.core_thread import CoreThread
from core.serving.observe.activity import Series

#: How long events are gathered before views hear of them.
COALESCE_MS: Final = 50

logger = logging.getLogger(__name__)

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

    def __init__(self, core: CoreThread, gui_loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__()
        self.core = core
        #: The GUI thread's loop (qasync's), where ``spawn`` runs the window's flows.
        self.gui_loop = gui_loop or _running_loop()
        self._tasks: set[asyncio.Task[Any]] = set()
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
        for task in list(self._tasks):
            task.cancel()

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

    def ask(self, coro: Coroutine[Any, Any, T]) -> "asyncio.Future[T]":
        """``coro`` started on core's loop now; its outcome as a future of the GUI loop.

        A flow awaits it (``await link.ask(...)``) while Qt's loop turns; made
        before the flow starts, the call happens even if the flow is cancelled.
        """
        return asyncio.wrap_future(self.core.submit(coro), loop=self.gui_loop)

    def spawn(self, coro: Coroutine[Any, Any, object]) -> "asyncio.Task[Any]":
        """Start a flow of the window on the GUI loop; held here until it ends.

        Each flow shows its own errors; one it did not expect is logged, not lost.
        """
        task = self.gui_loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    async def settled(self) -> None:
        """Until every flow ``spawn`` started has ended (``close`` cancels them)."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def _ended(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            logger.error("a window flow failed: %s", error, exc_info=error)

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


def _running_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "CoreLink needs the GUI thread's qasync loop: pass gui_loop, or make the link "
            "while that loop runs (app/main.py runs it)"
        ) from None
