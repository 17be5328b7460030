"""What psutil tells about processes, the same way on every OS.

psutil reads /proc on Linux, sysctl and libproc on macOS, the process
snapshot and each process's PEB on Windows. These helpers block (call them
in a worker thread) and never raise for a process that went away or that we
may not look at: such a process is simply not listed.

Reading another process's environment works on all three for processes of
the same user, with limits psutil cannot lift: on macOS a hardened or
SIP-protected process refuses it (``AccessDenied``); on Windows so does a
process running elevated while the tray does not. What cannot be read
carries no tag, so the stop contract and the sweep cannot find it by its
tag; its process group (POSIX) or job (Windows) still holds it.
"""

import contextlib
import getpass
import os
import sys
from collections.abc import Callable, Iterable

import psutil

from core.base.envvars import OWNER_ENV


def read_environ(pid: int) -> dict[str, str]:
    """``pid``'s environment. Raises ``psutil.Error`` (AccessDenied, NoSuchProcess)."""
    return psutil.Process(pid).environ()


def running(proc: psutil.Process) -> bool:
    """Alive and not a zombie (a zombie is dead; it only waits to be reaped)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:200]
    except psutil.Error:
        return "?"


def listed(procs: Iterable[psutil.Process]) -> str:
    """``pid 12 python x.py; pid 13 …``, for log lines."""
    return "; ".join(f"pid {p.pid} {cmdline(p)}" for p in procs)


if sys.platform == "win32":
    _ME = getpass.getuser().lower()

    def same_user(proc: psutil.Process) -> bool:
        """Started by the user the tray runs as (psutil has no uids on Windows)."""
        try:
            # psutil says DOMAIN\\user; getpass the bare name.
            return proc.username().rpartition("\\")[2].lower() == _ME
        except psutil.Error:
            return False

else:
    _UID = os.getuid()

    def same_user(proc: psutil.Process) -> bool:
        """Started by the user the tray runs as (its real uid)."""
        try:
            return proc.uids().real == _UID
        except psutil.Error:
            return False


def tagged(wanted: Callable[[str], bool]) -> list[tuple[psutil.Process, str]]:
    """This user's live processes whose ``MCP_TRAY_OWNER`` tag is ``wanted``, with the tag."""
    found: list[tuple[psutil.Process, str]] = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me or not same_user(proc):
            continue
        try:
            tag = proc.environ().get(OWNER_ENV)
        except (psutil.Error, OSError):
            continue
        if tag and wanted(tag) and running(proc):
            found.append((proc, tag))
    return found


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below ``pid`` by psutil's parent links (empty once it is gone)."""
    with contextlib.suppress(psutil.Error):
        return [p for p in psutil.Process(pid).children(recursive=True) if running(p)]
    return []


def terminate_each(procs: Iterable[psutil.Process]) -> None:
    """The polite end, one process at a time (SIGTERM on POSIX, TerminateProcess on Windows)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()


def kill_each(procs: Iterable[psutil.Process]) -> None:
    """The hard end, one process at a time (SIGKILL on POSIX, TerminateProcess on Windows)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def tree_pids(pid: int) -> list[int]:
    """``pid`` and every live process below it, by psutil's parent links."""
    return [pid, *(p.pid for p in descendants(pid))]


def proc_tree_pids(pid: int) -> list[int]:
    """``pid`` and every process below it, from Linux's /proc/PID/task/TID/children.

    Each process names its own children, so this reads a few files per
    process of the tree instead of the stat file of every process on the machine.
    """
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    pending.extend(int(child) for child in handle.read().split())
            except (OSError, ValueError):
                continue
    return found
