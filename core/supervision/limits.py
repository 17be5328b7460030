"""The limits a supervisor enforces on a child's whole process tree, on every OS.

``LimitWatch.watch`` samples the tree (the leader and all its descendants,
psutil, in a worker thread: never on the event loop) every ``interval``
seconds of the injected clock. Memory is the sum of resident sets; CPU is
the tree's CPU seconds per clock second since the last sample, in percent
of one core. Past ``memory_mb`` the watch returns the reason ("used 1.2
GiB, over its 1 GiB limit") and the run loop replaces the child, once the
calls in flight are answered or ``DRAIN_SECONDS`` pass. Over
``cpu_percent`` for ``CPU_WARN_SECONDS`` in a row, ``warn`` is told once
per stretch.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import psutil

from core.base.clock import Clock
from core.settings.config_model import LimitsConfig

#: How often a tree is sampled.
INTERVAL_SECONDS: Final = 3.0
#: A child over its CPU limit this long in a row gets a warning.
CPU_WARN_SECONDS: Final = 60.0
#: How long calls in flight may still finish before an over-memory child is replaced.
DRAIN_SECONDS: Final = 5.0
MIB: Final = 1024 * 1024


@dataclass(frozen=True)
class Usage:
    rss_bytes: int
    cpu_seconds: float


def tree_usage(pid: int) -> Usage | None:
    """Resident memory and CPU time of ``pid`` and its descendants (blocking); None once gone."""
    try:
        leader = psutil.Process(pid)
        members = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return None
    rss = 0
    cpu = 0.0
    for proc in members:
        try:
            with proc.oneshot():
                rss += proc.memory_info().rss
                times = proc.cpu_times()
                cpu += times.user + times.system
        except psutil.Error:
            continue  # ended between the listing and the look
    return Usage(rss, cpu)


def size_text(mib: float) -> str:
    """1228.8 MiB -> "1.2 GiB"; 300 -> "300 MiB"."""
    if mib >= 1024:
        return f"{mib / 1024:.1f}".rstrip("0").rstrip(".") + " GiB"
    return f"{mib:.0f} MiB"


def over_limit_text(used_mib: float, limit_mib: float) -> str:
    """The reason a child goes: its use never reads as its limit ("used 200 MiB, over its
    200 MiB limit" says nothing), so just over it shows one more digit."""
    used = size_text(used_mib)
    if used == size_text(limit_mib):
        used = f"{used_mib:.1f} MiB"
    return f"used {used}, over its {size_text(limit_mib)} limit"


class LimitWatch:
    def __init__(
        self,
        limits: LimitsConfig,
        clock: Clock,
        *,
        interval: float = INTERVAL_SECONDS,
        cpu_warn_after: float = CPU_WARN_SECONDS,
        sample: Callable[[int], Usage | None] = tree_usage,
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.interval = interval
        self.cpu_warn_after = cpu_warn_after
        self._sample = sample

    @property
    def active(self) -> bool:
        return self.limits.memory_mb is not None or self.limits.cpu_percent is not None

    async def watch(self, pid: int, warn: Callable[[str], None]) -> str:
        """Return the reason once the tree is over its memory limit (never, if it stays under)."""
        last: tuple[float, float] | None = None
        over_cpu_since: float | None = None
        warned = False
        while True:
            await self.clock.sleep(self.interval)
            usage = await asyncio.to_thread(self._sample, pid)
            now = self.clock.monotonic()
            if usage is None:
                continue  # the run loop sees the exit
            memory = self.limits.memory_mb
            if memory is not None and usage.rss_bytes > memory * MIB:
                return over_limit_text(usage.rss_bytes / MIB, memory)
            cpu_limit = self.limits.cpu_percent
            if cpu_limit is not None and last is not None and now > last[0]:
                percent = 100 * (usage.cpu_seconds - last[1]) / (now - last[0])
                if percent <= cpu_limit:
                    over_cpu_since, warned = None, False
                else:
                    over_cpu_since = now if over_cpu_since is None else over_cpu_since
                    if not warned and now - over_cpu_since >= self.cpu_warn_after:
                        warned = True
                        warn(
                            f"used {percent:.0f}% CPU for {now - over_cpu_since:.0f} s, over "
                            f"its {cpu_limit:g}% limit"
                        )
            last = (now, usage.cpu_seconds)
