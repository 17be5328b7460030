"""The process groups the conformance run starts, tracked so that each is stopped."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from bench.suites.conformance.constants import STOP_SECONDS


class Processes:
    """Every process this bench starts, each the leader of its own group.

    ``stop`` ends one group: SIGTERM, a wait for the leader, SIGKILL if it
    lingers, then SIGKILL for anything still in the group (a child the leader
    left behind, which is reported). ``stop_all`` is the last-resort sweep.
    """

    def __init__(self) -> None:
        self._groups: dict[int, tuple[str, subprocess.Popen[bytes] | None]] = {}

    def track(self, pid: int, what: str, popen: subprocess.Popen[bytes] | None = None) -> None:
        self._groups[pid] = (what, popen)

    def forget(self, pid: int) -> None:
        self._groups.pop(pid, None)

    def stop(self, pid: int) -> None:
        """Safe to call twice; only Popen leaders are waited for (asyncio reaps its own)."""
        entry = self._groups.pop(pid, None)
        if entry is None:
            return
        what, popen = entry
        killpg(pid, signal.SIGTERM)
        if popen is not None:
            try:
                popen.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                print(f"conformance: {what} ignored SIGTERM; killing it", file=sys.stderr)
                killpg(pid, signal.SIGKILL)
                popen.wait(5)
            deadline = time.monotonic() + 1.0
            while group_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if group_alive(pid):
            if popen is not None:
                print(f"conformance: {what} left processes behind; killing them", file=sys.stderr)
            killpg(pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for pid in reversed(list(self._groups)):
            self.stop(pid)


def killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def log_tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return f"(no output in {path})"
