"""A child and everything it starts, as one thing to stop: its process tree.

``Trees.popen_options`` says how to spawn the child so its tree can be held;
``Trees.adopt`` wraps the spawned child in a ``Tree`` the stop contract
drives (core.supervision.child): ``alive``, ``terminate`` (the polite step),
``kill`` (the hard one), ``members`` (what is left). Every call blocks:
run it in a worker thread.

- POSIX, ``process group``: the child gets its own session, so its pid is
  its process group id and npx/uvx grandchildren share the group;
  ``killpg`` signals all of it at once (SIGTERM, then SIGKILL).
- Windows, ``job object`` (core.platform.jobs).
- The portable set, ``psutil tree``: the child and the descendants psutil
  has seen below it (looked up again at every ``snapshot``, so a grandchild
  is held once the stop contract has looked, even after its parent exits),
  each signalled by psutil (SIGTERM/SIGKILL on POSIX, TerminateProcess on
  Windows).

Whatever the backend, a descendant that left the tree (``setsid`` out of
the group, or started before a Windows job held its parent) is found by the
contract through ``snapshot`` while its parent lives, and by its
``MCP_TRAY_OWNER`` tag after.
"""

import contextlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any, Final, Protocol

import psutil

from core.platform import procs


class Tree(Protocol):
    """One child's tree."""

    #: How logs name it: "pgid 4242", "job of pid 4242", "tree of pid 4242".
    @property
    def label(self) -> str: ...

    #: The names of the contract's polite and hard steps on this backend.
    @property
    def polite(self) -> str: ...

    @property
    def hard(self) -> str: ...

    def snapshot(self) -> list[psutil.Process]:
        """The live descendants of the child right now (remembered where that matters)."""
        ...

    def alive(self) -> bool:
        """Whether anything of the tree still runs."""
        ...

    def members(self) -> list[psutil.Process]:
        """What of the tree still runs."""
        ...

    def contains(self, proc: psutil.Process) -> bool:
        """Whether ``proc`` is in the tree (and so ended with it)."""
        ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    def release(self) -> None:
        """Let go of what holds the tree (a job handle); nothing is signalled."""
        ...


class Trees(Protocol):
    @property
    def name(self) -> str: ...

    def popen_options(self) -> dict[str, Any]: ...

    def adopt(self, popen: "subprocess.Popen[bytes]") -> Tree: ...

    def hold(self, strays: list[psutil.Process]) -> "Held":
        """Processes that are no child of ours (a dead tray's leftovers, adopted
        escapees), with their own trees, to end as the sweep does."""
        ...


class Held(Protocol):
    def alive(self) -> bool: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class PsutilTrees:
    """The portable set: psutil's parent links, one process at a time."""

    name: Final = "psutil tree (children, terminate, kill)"

    def popen_options(self) -> dict[str, Any]:
        # A Popen argument every Python takes (Windows ignores it): on POSIX
        # it keeps a terminal's Ctrl+C to the tray off the children.
        return {"start_new_session": True}

    def adopt(self, popen: "subprocess.Popen[bytes]") -> Tree:
        return PsutilTree(popen)

    def hold(self, strays: list[psutil.Process]) -> "Held":
        return HeldProcesses(strays)


class HeldProcesses:
    """Strays and their descendants, each ended by psutil."""

    def __init__(self, strays: list[psutil.Process]) -> None:
        found = {p.pid: p for p in strays}
        for proc in strays:
            found.update((p.pid, p) for p in procs.descendants(proc.pid))
        self._procs = list(found.values())

    def alive(self) -> bool:
        return any(procs.running(p) for p in self._procs)

    def terminate(self) -> None:
        procs.terminate_each(self._procs)

    def kill(self) -> None:
        procs.kill_each(self._procs)


class PsutilTree:
    polite: Final = "SIGTERM" if sys.platform != "win32" else "TerminateProcess"
    hard: Final = "SIGKILL" if sys.platform != "win32" else "TerminateProcess"

    def __init__(self, popen: "subprocess.Popen[bytes]") -> None:
        self._popen = popen
        self.label = f"tree of pid {popen.pid}"
        self._leader: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self._leader = psutil.Process(popen.pid)
        self._seen: dict[int, psutil.Process] = {}

    def snapshot(self) -> list[psutil.Process]:
        found = procs.descendants(self._popen.pid) if self._popen.returncode is None else []
        self._seen.update((p.pid, p) for p in found)
        return found

    def _everything(self) -> list[psutil.Process]:
        self.snapshot()
        known = list(self._seen.values())
        if self._leader is not None and self._popen.returncode is None:
            known.insert(0, self._leader)
        return known

    def members(self) -> list[psutil.Process]:
        return [p for p in self._everything() if procs.running(p)]

    def alive(self) -> bool:
        return bool(self.members())

    def contains(self, proc: psutil.Process) -> bool:
        return proc.pid == self._popen.pid or proc.pid in self._seen

    def terminate(self) -> None:
        procs.terminate_each(self.members())

    def kill(self) -> None:
        procs.kill_each(self.members())

    def release(self) -> None:
        self._seen.clear()


if sys.platform != "win32":
    import os
    import signal

    class GroupTrees:
        """POSIX: the child leads a process group of its own."""

        name: Final = "process group (setsid, killpg)"

        def popen_options(self) -> dict[str, Any]:
            return {"start_new_session": True}

        def adopt(self, popen: "subprocess.Popen[bytes]") -> Tree:
            return GroupTree(popen.pid)

        def hold(self, strays: list[psutil.Process]) -> "Held":
            return HeldGroups(strays)

    class HeldGroups:
        """Strays and their whole process groups (the groups looked up once, now)."""

        def __init__(self, strays: list[psutil.Process]) -> None:
            self._procs = strays
            self._groups: set[int] = set()
            for proc in strays:
                with contextlib.suppress(OSError):
                    self._groups.add(os.getpgid(proc.pid))

        def alive(self) -> bool:
            return any(procs.running(p) for p in self._procs)

        def _signal(self, sig: signal.Signals) -> None:
            for pgid in self._groups:
                _killpg(pgid, sig)
            for proc in self._procs:
                # A stray that left its group (setsid) is signalled by pid as well.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, sig)

        def terminate(self) -> None:
            self._signal(signal.SIGTERM)

        def kill(self) -> None:
            self._signal(signal.SIGKILL)

    class GroupTree:
        polite: Final = "SIGTERM"
        hard: Final = "SIGKILL"

        def __init__(self, pgid: int, killpg: Callable[[int, int], None] = os.killpg) -> None:
            #: start_new_session made the child a group leader: pgid == pid.
            self.pgid = pgid
            self.label = f"pgid {pgid}"
            self._killpg = killpg

        def snapshot(self) -> list[psutil.Process]:
            return procs.descendants(self.pgid)

        def alive(self) -> bool:
            try:
                self._killpg(self.pgid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                # Not proof of life: macOS (XNU's killpg1 skips zombies) answers
                # EPERM for a group left with zombies only, a leader not yet reaped.
                pass
            # killpg also reaches zombies (Linux); only live members count.
            return bool(group_members(self.pgid))

        def members(self) -> list[psutil.Process]:
            return group_members(self.pgid)

        def contains(self, proc: psutil.Process) -> bool:
            try:
                return os.getpgid(proc.pid) == self.pgid
            except OSError:
                return False

        def terminate(self) -> None:
            _killpg(self.pgid, signal.SIGTERM)

        def kill(self) -> None:
            _killpg(self.pgid, signal.SIGKILL)

        def release(self) -> None:
            pass

    def group_members(pgid: int) -> list[psutil.Process]:
        """Live (non-zombie) processes whose process group is ``pgid``."""
        members = []
        for proc in psutil.process_iter(["status"]):
            try:
                if os.getpgid(proc.pid) != pgid:
                    continue
                if proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
            except (ProcessLookupError, psutil.Error):
                continue
            members.append(proc)
        return members

    def process_group(pid: int) -> int:
        """``pid``'s process group (tests and the sweep's report)."""
        return os.getpgid(pid)

    def _killpg(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
