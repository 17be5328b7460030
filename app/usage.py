"""CPU % and RSS of the servers' children, sampled only while the window shows.

The window starts the sampler when it is shown and stops it when hidden or
minimised: a tray nobody looks at reads no process table at all. Each
sample runs core's ``ProcessStats.sample`` (blocking psutil reads) on a
worker thread of the sampler's own, off both the GUI and core's loop, and
lands on the GUI thread through a queued signal. It is kept with the pid it
was taken from, so a figure never outlives its child (a stopped server
shows none, a respawned one none until its new child is sampled).
"""

import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Final

from PySide6.QtCore import QObject, QTimer, Signal

from app.models import SampledUsage
from core.base.snapshot import ResourceUsage
from core.serving.observe.process_stats import SAMPLE_INTERVAL_SECONDS, ProcessStats

#: How often figures refresh while the window shows (core's own cadence).
SAMPLE_MS: Final = int(SAMPLE_INTERVAL_SECONDS * 1000)
#: How long ``settle`` waits for a sample under way.
SETTLE_SECONDS: Final = 10.0


class UsageSampler(QObject):
    #: A sample landed: ``usage`` holds the new figures.
    changed = Signal()
    #: (pids sampled, figures), from the worker thread to the GUI thread.
    _landed = Signal(object, object)

    def __init__(
        self,
        stats: ProcessStats,
        pids: Callable[[], dict[str, int]],
        interval_ms: int = SAMPLE_MS,
    ) -> None:
        super().__init__()
        self._stats = stats
        self._pids = pids
        #: server -> (sampled pid, usage).
        self.usage: dict[str, SampledUsage] = {}
        #: Samples taken so far (tests and the bench read it).
        self.samples = 0
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.sample)
        self._worker = concurrent.futures.ThreadPoolExecutor(1, "mcp-tray usage")
        self._pending: concurrent.futures.Future[None] | None = None
        self._landed.connect(self._store)

    @property
    def running(self) -> bool:
        return self.timer.isActive()

    def start(self) -> None:
        """Sample now, then every interval."""
        if self.timer.isActive():
            return
        self.timer.start()
        self.sample()

    def stop(self) -> None:
        self.timer.stop()

    def sample(self) -> None:
        """Take one sample on the worker thread (skipped while the previous one runs)."""
        if self._pending is not None and not self._pending.done():
            return
        pids = self._pids()
        if not pids:
            if self.usage:
                self.usage = {}
                self.changed.emit()
            return
        self._pending = self._worker.submit(self._take, pids)

    def _take(self, pids: dict[str, int]) -> None:
        self._landed.emit(pids, self._stats.sample(pids))

    def _store(self, pids: dict[str, int], found: dict[str, ResourceUsage]) -> None:
        self.samples += 1
        self.usage = {name: (pids[name], usage) for name, usage in found.items()}
        self.changed.emit()

    def settle(self) -> None:
        """Wait for a sample under way (before the service it reads goes away)."""
        pending = self._pending
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.result(SETTLE_SECONDS)

    def close(self) -> None:
        """Stop for good: no timer, and the worker thread let go once idle."""
        self.timer.stop()
        self.settle()
        self._worker.shutdown(wait=False)
