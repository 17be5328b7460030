"""CPU % and RSS of the servers' children, sampled only while the window shows.

The window starts the sampler when it is shown and stops it when hidden or
minimised: a tray nobody looks at reads no /proc at all. Each sample runs
core's ``ProcessStats.sample`` (blocking psutil reads) in a worker thread,
and is kept with the pid it was taken from, so a figure never outlives its
child (a stopped server shows none, a respawned one none until its new
child is sampled).
"""

import asyncio
import contextlib
from collections.abc import Callable
from typing import Final

from PySide6.QtCore import QObject, QTimer, Signal

from app.models import SampledUsage
from core.serving.process_stats import SAMPLE_INTERVAL_SECONDS, ProcessStats

#: How often figures refresh while the window shows (core's own cadence).
SAMPLE_MS: Final = int(SAMPLE_INTERVAL_SECONDS * 1000)


class UsageSampler(QObject):
    #: A sample landed: ``usage`` holds the new figures.
    changed = Signal()

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
        self._task: asyncio.Task[None] | None = None

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
        """Take one sample in a thread (skipped while the previous one runs)."""
        if self._task is not None and not self._task.done():
            return
        pids = self._pids()
        if not pids:
            if self.usage:
                self.usage = {}
                self.changed.emit()
            return
        self._task = asyncio.get_running_loop().create_task(self._take(pids))

    async def _take(self, pids: dict[str, int]) -> None:
        found = await asyncio.to_thread(self._stats.sample, pids)
        self.samples += 1
        self.usage = {name: (pids[name], usage) for name, usage in found.items()}
        self.changed.emit()

    async def settle(self) -> None:
        """Wait for a sample under way (before the loop or the service goes away)."""
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await task
