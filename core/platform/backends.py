"""Which backend does each OS-specific job: the native set of this OS, or the portable one.

``MCP_TRAY_PLATFORM`` chooses: unset or ``native`` is this OS's own set,
``portable`` the set built only from what exists on Linux, macOS and
Windows alike (psutil, subprocess, threads) — what an OS without a native
backend falls back to, and how the test suite exercises that fallback on
Linux. The choice covers the process backends (exit watch, pipes, process
tree, escapee reaper); the lock, private files and file limit are the OS's
own in both sets (there is nothing more portable to fall back to).

==========  ==================  ===================  ==================  ============
set         exit watch          pipes                process tree        escapees
==========  ==================  ===================  ==================  ============
linux       pidfd               event loop           process group       subreaper
darwin      kqueue              event loop           process group       tag only
win32       wait thread         threads              job object          the job
portable    wait thread         threads              psutil tree         tag only
==========  ==================  ===================  ==================  ============
"""

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from core.base.envvars import PLATFORM_ENV
from core.base.errors import PlatformChoiceError
from core.platform import files, procs
from core.platform.exits import ExitWatch, WaitThread
from core.platform.pipes import LoopPipes, Pipes, ThreadPipes
from core.platform.reaper import NoReaper, Reaper
from core.platform.trees import PsutilTrees, Trees

NATIVE: Final = "native"
PORTABLE: Final = "portable"
CHOICES: Final = (NATIVE, PORTABLE)


@dataclass(frozen=True)
class Backends:
    #: "native" or "portable".
    name: str
    #: The OS, as ``sys.platform`` says it ("linux", "darwin", "win32").
    system: str
    exits: ExitWatch
    pipes: Pipes
    trees: Trees
    reaper: Reaper
    #: A process and its descendants, for the CPU/RSS figures.
    tree_pids: Callable[[int], list[int]] = procs.tree_pids

    def describe(self) -> list[tuple[str, str]]:
        """(job, backend) for each, as ``mcp-tray doctor`` lists them."""
        return [
            ("set", f"{self.name} ({self.system})"),
            ("exit watch", self.exits.name),
            ("pipes", self.pipes.name),
            ("process tree", self.trees.name),
            ("escapees", self.reaper.name),
            (
                "process stats",
                "/proc children lists"
                if self.tree_pids is procs.proc_tree_pids
                else "psutil children",
            ),
            ("instance lock", files.LOCK_NAME),
            ("private files", files.PRIVATE_NAME),
            ("file limit", files.FILE_LIMIT_NAME),
            ("environments", "psutil"),
        ]


def _native() -> Backends:
    if sys.platform == "linux":
        from core.platform.exits import Pidfd
        from core.platform.reaper import Subreaper
        from core.platform.trees import GroupTrees

        return Backends(
            NATIVE,
            sys.platform,
            Pidfd(),
            LoopPipes(),
            GroupTrees(),
            Subreaper(),
            procs.proc_tree_pids,
        )
    elif sys.platform == "win32":
        from core.platform.jobs import JobTrees

        return Backends(NATIVE, sys.platform, WaitThread(), ThreadPipes(), JobTrees(), NoReaper())
    elif sys.platform == "darwin":
        from core.platform.exits import Kqueue
        from core.platform.trees import GroupTrees

        return Backends(NATIVE, sys.platform, Kqueue(), LoopPipes(), GroupTrees(), NoReaper())
    else:
        # Another POSIX system: no native set was written for it.
        return _portable()


def _portable() -> Backends:
    return Backends(PORTABLE, sys.platform, WaitThread(), ThreadPipes(), PsutilTrees(), NoReaper())


_made: dict[str, Backends] = {}


def backends() -> Backends:
    """The set ``MCP_TRAY_PLATFORM`` chooses (this OS's native one by default).

    Read at each call, so a test can switch sets with the variable; each set
    is made once, so state it keeps (the subreaper flag) lasts.
    """
    chosen = os.environ.get(PLATFORM_ENV, "").strip().lower() or NATIVE
    if chosen not in CHOICES:
        raise PlatformChoiceError(os.environ.get(PLATFORM_ENV, ""), CHOICES)
    made = _made.get(chosen)
    if made is None:
        made = _made[chosen] = _native() if chosen == NATIVE else _portable()
    return made
