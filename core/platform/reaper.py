"""Linux: the tray as the child subreaper of everything it starts.

A process that leaves its server's process group (``setsid``) and clears
its environment (``env -i``) carries neither the group nor the tag the stop
contract looks for; once its parent exits, the kernel re-parents it to the
nearest ancestor marked with ``PR_SET_CHILD_SUBREAPER``, else to init, and
nothing links it to mcp-tray any more. With the tray marked, such escapees
become the tray's own children: findable (``adopted``), ended when the tray
stops, and reaped when they exit (``reap``; a subreaper that never waits
would collect zombies).

Only the tray process (``mcp-tray run``, the GUI) enables it, never a
library user such as the test suite. What the tray starts for the user (Qt
opening a log file in an editor) is re-parented the same way; it carries
the tray's own ``MCP_TRAY_INSTANCE`` mark (set in the tray's environment,
never passed to servers) and is left alone.

macOS has no subreaper (its escapees go to launchd); on Windows the job
object holds the whole tree instead. Both use ``NoReaper``.
"""

import contextlib
import os
import sys
from typing import Final, Protocol

import psutil

from core.base.envvars import INSTANCE_ENV
from core.platform import procs


class Reaper(Protocol):
    @property
    def name(self) -> str: ...

    #: Whether this process is a subreaper now.
    @property
    def active(self) -> bool: ...

    def enable(self, mark: str) -> bool: ...

    def adopted(self, own: set[int]) -> list[psutil.Process]:
        """Live children not in ``own`` and not the tray's own helpers: re-parented escapees."""
        ...

    def reap(self, own: set[int]) -> int:
        """Wait for exited children not in ``own``; how many were reaped."""
        ...


class NoReaper:
    name: Final = "none (escapees found by their tag only)"
    active = False

    def enable(self, mark: str) -> bool:
        return False

    def adopted(self, own: set[int]) -> list[psutil.Process]:
        return []

    def reap(self, own: set[int]) -> int:
        return 0


def _children() -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process().children()
    return []


if sys.platform == "linux":
    import ctypes

    #: From <linux/prctl.h>.
    PR_SET_CHILD_SUBREAPER: Final = 36

    class Subreaper:
        name: Final = "child subreaper (PR_SET_CHILD_SUBREAPER)"

        def __init__(self) -> None:
            self.active = False

        def enable(self, mark: str) -> bool:
            if self.active:
                return True
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                return False
            os.environ[INSTANCE_ENV] = mark
            self.active = True
            return True

        def adopted(self, own: set[int]) -> list[psutil.Process]:
            if not self.active:
                return []
            found = []
            for proc in _children():
                if proc.pid in own or not procs.running(proc):
                    continue
                try:
                    if INSTANCE_ENV in proc.environ():
                        continue  # started by the tray itself, for the user
                except psutil.Error:
                    continue  # unreadable: not ours to end
                found.append(proc)
            return found

        def reap(self, own: set[int]) -> int:
            if not self.active:
                return 0
            reaped = 0
            for proc in _children():
                if proc.pid in own:
                    continue
                try:
                    if proc.status() != psutil.STATUS_ZOMBIE:
                        continue
                    pid, _ = os.waitpid(proc.pid, os.WNOHANG)
                except (psutil.Error, ChildProcessError):
                    continue
                reaped += pid == proc.pid
            return reaped
