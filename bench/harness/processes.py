"""The processes a bench starts and must leave none of: whose children are alive,
which bridges and tagged workers remain, how a stdio child and a process group
are stopped, and SIGTERM turned into Ctrl+C so every ``finally`` runs.
"""

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Final

import psutil

from bench.harness.files import ECHO_SCRIPT
from core.platform import procs
from core.supervision.sweep import owner_of


def children_running(tray_pid: int, script: Path) -> list[int]:
    """The tray's processes running ``script`` (its children, or theirs)."""
    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(tray_pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if str(script) in child.cmdline():
                    found.append(child.pid)
    return found


def bridge_pids() -> list[int]:
    """The bridges this bench's SDK clients started (children of this process)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmdline = child.cmdline()
            if "core.cli.main" in cmdline and "connect" in cmdline:
                found.append(child.pid)
    return found


def tagged_by(tray_pids: Iterable[int], skip: int | None = None) -> list[str]:
    """Live processes tagged (MCP_TRAY_OWNER) by one of these trays, except by ``skip``."""
    owners = set(tray_pids) - {skip}

    def ours(tag: str) -> bool:
        pid = owner_of(tag).split("-", 1)[0]
        return pid.isdigit() and int(pid) in owners

    return [
        f"pid {proc.pid} (tray {owner_of(tag)}): {procs.cmdline(proc)[:160]}"
        for proc, tag in procs.tagged(ours)
    ]


#: How long an echo.py child gets to exit after its stdin closes.
CHILD_STOP_SECONDS: Final = 5.0


# Imported by bench/scale.py too; type-checked under every OS by `make lint`,
# it measures POSIX machines only (process groups).
if sys.platform != "win32":

    def kill_group(pgid: int, *, hard: bool) -> None:
        os.killpg(pgid, signal.SIGKILL if hard else signal.SIGTERM)

else:

    def kill_group(pgid: int, *, hard: bool) -> None:
        raise OSError("bench/gateway.py measures POSIX machines (process groups)")


async def wait_or_kill_group(process: asyncio.subprocess.Process, seconds: float) -> int | None:
    """``process``'s exit code within ``seconds``; past them its group is killed (then None)."""
    try:
        return await asyncio.wait_for(process.wait(), seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            kill_group(process.pid, hard=True)
        await process.wait()
        return None


async def stop_tray(process: asyncio.subprocess.Process | None, seconds: float) -> int | None:
    """SIGTERM and wait; SIGKILL its group as a last resort (then None)."""
    if process is None or process.returncode is not None:
        return None if process is None else process.returncode
    process.send_signal(signal.SIGTERM)
    return await wait_or_kill_group(process, seconds)


async def stop_child(process: asyncio.subprocess.Process) -> None:
    """Close a stdio server's stdin (it exits on EOF); kill it if it lingers."""
    if process.returncode is not None:
        return
    if process.stdin is not None:
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), CHILD_STOP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def spawn_echo(stderr: IO[str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(ECHO_SCRIPT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl+C, so every ``finally`` runs and every process is stopped."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
