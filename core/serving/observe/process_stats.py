"""CPU % and RSS of each server's child (with its descendants), for the Servers tab.

Only sampled while someone looks: the window's sampler (app/usage.py) calls
``sample`` on its timer while it shows, so a headless tray never pays for it.
psutil's reads block, so ``sample`` runs in a worker thread. Descendants
come from the platform's ``tree_pids`` (on Linux the kernel's per-task
``children`` lists rather than psutil's ``children()``, which reads the stat
file of every process on the machine for each server).
``cpu_percent`` needs the same ``Process`` object between samples, so they
are cached by pid and dropped when the pid goes away.
"""

from typing import Final

import psutil

from core.base.snapshot import ResourceUsage
from core.platform.backends import backends

#: How often the figures refresh; the UI shows them, nothing decides on them.
SAMPLE_INTERVAL_SECONDS: Final = 5.0


class ProcessStats:
    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def sample(self, pids: dict[str, int]) -> dict[str, ResourceUsage]:
        """One reading per server. Blocking."""
        usage: dict[str, ResourceUsage] = {}
        alive: set[int] = set()
        tree_pids = backends().tree_pids
        for name, pid in pids.items():
            cpu, rss = 0.0, 0
            for member in tree_pids(pid):
                try:
                    proc = self._proc(member)
                    cpu += proc.cpu_percent(None)
                    rss += proc.memory_info().rss
                    alive.add(proc.pid)
                except psutil.Error:
                    continue
            if pid in alive:
                usage[name] = ResourceUsage(round(cpu, 1), rss)
        self._procs = {pid: proc for pid, proc in self._procs.items() if pid in alive}
        return usage

    def _proc(self, pid: int) -> psutil.Process:
        proc = self._procs.get(pid)
        if proc is None:
            proc = psutil.Process(pid)
            proc.cpu_percent(None)  # the first reading is a baseline of 0
            self._procs[pid] = proc
        return proc
