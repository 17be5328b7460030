"""A bridge that finds no tray starts one, the way the login autostart entry does.

A client launched before the tray (at login, before the autostart entry
ran; after a Quit) would otherwise wait for a tray nobody starts. So the
bridge starts ``mcp-tray run --minimized`` (the tray without a window, or
headless where there is no display), detached from the client's process
tree (core.platform.detach): a tray inside it would die with the client.

Many bridges start at once when a client opens (one per server): exactly
one of them starts the tray. Each takes ``state/autostart.lock`` in turn;
the one holding it looks at the instance lock (core.settings.runtime), and
starts a tray only when nobody holds that, then keeps the autostart lock
until the new tray holds the instance lock (or is gone), so the next bridge
finds it there. ``MCP_TRAY_AUTOSTART=0`` turns all of this off.
"""

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import psutil

from core.base.envvars import (
    AUTOSTART_ENV,
    CLIENT_INSTANCE_ENV,
    CLIENT_NAME_ENV,
    CLIENT_SESSION_ENV,
)
from core.platform.detach import spawn_detached
from core.platform.files import open_private, private_dirs, try_lock, unlock
from core.settings.paths import Paths
from core.settings.runtime import instance_held

#: Values of ``MCP_TRAY_AUTOSTART`` that turn it off.
OFF_VALUES: Final = frozenset({"0", "false", "no", "off"})
#: How long a bridge waits for its turn at the autostart lock.
TURN_WAIT_SECONDS: Final = 30.0
#: How long a started tray may take to hold the instance lock (imports, Qt).
LOCK_TAKEN_WAIT_SECONDS: Final = 30.0
#: How often the locks are looked at while waiting.
POLL_SECONDS: Final = 0.02
#: A bridge's own variables, which name its client, not the tray's.
BRIDGE_ONLY_ENV: Final = (CLIENT_NAME_ENV, CLIENT_INSTANCE_ENV, CLIENT_SESSION_ENV)


def autostart_enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(AUTOSTART_ENV, "").strip().lower() not in OFF_VALUES


@dataclass(frozen=True)
class Started:
    """What the bridge did about an absent tray, in a line for its stderr."""

    #: The tray's pid when this bridge started it; None when another did.
    pid: int | None
    #: False when the tray this bridge started was gone before it was up.
    up: bool
    text: str


def tray_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The bridge's environment without what names its client."""
    return {k: v for k, v in environ.items() if k not in BRIDGE_ONLY_ENV}


async def ensure_tray(
    paths: Paths,
    launcher: Sequence[str],
    environ: Mapping[str, str],
    *,
    spawn: Callable[[Sequence[str], Mapping[str, str], Path, Path], int] = spawn_detached,
) -> Started:
    """Start the tray unless one runs or is starting; exactly one for many bridges."""
    private_dirs(paths.state_dir)
    private_dirs(paths.log_dir)
    handle = open_private(paths.autostart_lock, "a+")
    try:
        if not await _take_turn(handle, paths):
            return Started(None, True, "another bridge started mcp-tray")
        try:
            if instance_held(paths):
                return Started(None, True, "another bridge started mcp-tray")
            argv = [*launcher]
            pid = spawn(argv, tray_environment(environ), Path.home(), paths.autostart_log)
            _note(paths, f"bridge pid {os.getpid()} started mcp-tray: pid {pid}: {' '.join(argv)}")
            up = await _until(
                lambda: instance_held(paths) or not _alive(pid), LOCK_TAKEN_WAIT_SECONDS
            )
            if up and instance_held(paths):
                return Started(pid, True, f"started mcp-tray (pid {pid}, detached)")
            return Started(
                pid,
                False,
                f"started mcp-tray (pid {pid}), but it was gone before it was up; "
                f"what it said is in {paths.autostart_log}",
            )
        finally:
            unlock(handle)
    finally:
        handle.close()


async def _take_turn(handle: IO[str], paths: Paths) -> bool:
    """The autostart lock (True), or False once a tray holds the instance lock meanwhile."""
    deadline = time.monotonic() + TURN_WAIT_SECONDS
    while not try_lock(handle):
        if instance_held(paths):
            return False
        if time.monotonic() > deadline:
            # A bridge stuck holding it must not keep every other one from trying.
            return True
        await asyncio.sleep(POLL_SECONDS)
    return True


async def _until(done: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL_SECONDS)
    return True


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _note(paths: Paths, line: str) -> None:
    with open_private(paths.autostart_log) as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
