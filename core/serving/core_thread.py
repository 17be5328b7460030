"""The tray's core on a thread and an event loop of its own, apart from the GUI's.

Why (docs/architecture.md#the-event-loop): the GUI used to host core on Qt's own loop
through qasync. That made core the Qt loop's hostage twice over:

- on Windows, asyncio needs its Proactor loop for sockets and pipes at
  their best, and qasync's loop is not one (its subprocess support has open
  issues there); a plain asyncio loop of the OS's default kind has none of
  that to work around;
- everywhere, each gateway call paid for the Qt loop's dispatch (qasync
  wakes Qt for every ``call_soon_threadsafe`` and runs asyncio's callbacks
  between Qt's events): with the window open a call took +17 % at p50 and
  +52 % of the tray's CPU over headless; with core on its own loop, within
  a few per cent of headless on both (bench/gui_latency.py, docs/measured.md).

So the GUI starts ``CoreThread``: a daemon thread running a fresh event
loop of this OS's default kind, where ``TrayService`` is built, started,
served and closed, exactly as ``mcp-tray run --headless`` runs it on the
main thread. The GUI never touches core's objects from its own thread but
through three doors: ``submit`` (a coroutine on core's loop; a
``concurrent.futures.Future`` back), ``call`` (a plain function on core's
loop, waited for) and ``post`` (fire and forget). Core's state still goes
out as frozen snapshots and typed events; app/core_link.py subscribes on
core's loop and hands them to Qt as queued signals.
"""

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from core.serving.service import TrayService

T = TypeVar("T")

#: How long ``call`` waits for core's loop by default (a plain call takes microseconds).
CALL_SECONDS: Final = 10.0
#: How long ``stop`` gives the service to stop every child by the stop contract.
STOP_SECONDS: Final = 60.0


class CoreThread:
    """``TrayService`` on its own thread and loop; ``start`` it, then talk to it through the doors."""

    def __init__(
        self,
        make_service: Callable[[], TrayService],
        new_loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
    ) -> None:
        self._make_service = make_service
        self._new_loop = new_loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._service: TrayService | None = None
        self._started: concurrent.futures.Future[TrayService] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name="mcp-tray core", daemon=True)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """Core's loop, built on core's thread by ``start``."""
        if self._loop is None:
            raise RuntimeError("the core has not started")
        return self._loop

    @property
    def service(self) -> TrayService:
        """The started service. Read its plain attributes from any thread; act through the doors."""
        if self._service is None:
            raise RuntimeError("the core has not started")
        return self._service

    def start(self, timeout: float | None = None) -> TrayService:
        """Start the thread and the service; raises what the service's start raised."""
        self._thread.start()
        return self._started.result(timeout)

    def _run(self) -> None:
        # Built here, on core's thread, not by the GUI thread that makes this
        # object: a Proactor loop made on the main thread takes the process's
        # signal wakeup fd (CPython's BaseProactorEventLoop.__init__), which
        # belongs to the GUI's loop, and its close on this thread never gives it back.
        try:
            loop = self._loop = self._new_loop()
        except BaseException as exc:
            self._started.set_exception(exc)
            return
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start())
            if self._service is not None:
                loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def _start(self) -> None:
        try:
            service = self._make_service()
            await service.start()
        except BaseException as exc:
            self._started.set_exception(exc)
            return
        self._service = service
        self._started.set_result(service)

    def in_core(self) -> bool:
        """Whether the caller runs on core's thread (its doors must not wait on themselves)."""
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        """Run ``coro`` on core's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = CALL_SECONDS) -> T:
        """``fn(*args)`` on core's loop, its result (or exception) here."""
        if self.in_core():
            return fn(*args)
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return future.result(timeout)

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """``fn(*args)`` on core's loop, soon; nobody waits."""
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Close the service (every child by the stop contract), then end the loop and thread."""
        if not self._thread.is_alive():
            return
        if self._service is not None:
            closing = self.submit(self._service.aclose())
            try:
                closing.result(timeout)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
