"""Find and end what a crashed earlier mcp-tray left running.

Every child carries ``MCP_TRAY_OWNER=<instance id>`` in its environment, and
its grandchildren inherit it. At start-up we look for processes of this user
whose tag names an owner that is no longer alive, and end their groups.
An owner id is ``<pid>-<start time in ms>-<random>``: the start time tells a
live owner from a recycled pid.
"""

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from typing import Final

import psutil

from core.base.envvars import OWNER_ENV, TAG_SEPARATOR

#: After SIGTERM to a leftover group, how long before SIGKILL.
SWEEP_TERM_GRACE_SECONDS: Final = 1.0
#: How often the sweep re-checks whether the leftovers it signalled are gone.
SWEEP_CHECK_INTERVAL_SECONDS: Final = 0.02


def new_owner_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    started_ms = int(psutil.Process(pid).create_time() * 1000)
    return f"{pid}-{started_ms}-{secrets.token_hex(4)}"


def owner_of(tag: str) -> str:
    """The tray instance id of a child's tag (``<owner>/<child>``; older tags are the owner)."""
    return tag.split(TAG_SEPARATOR, 1)[0]


def owner_alive(owner: str) -> bool:
    try:
        pid_text, started_text, _ = owner.split("-", 2)
        pid, started_ms = int(pid_text), int(started_text)
    except ValueError:
        return False  # not a tag we wrote: treat its owner as gone
    try:
        return int(psutil.Process(pid).create_time() * 1000) == started_ms
    except psutil.Error:
        return False


@dataclass(frozen=True)
class Leftover:
    pid: int
    pgid: int
    owner: str
    cmdline: str


def find_leftovers(own_owner: str | None = None) -> list[Leftover]:
    """Tagged processes of this user whose owner is dead. Blocking: run in a thread."""
    uid = os.getuid()
    found: list[Leftover] = []
    alive_cache: dict[str, bool] = {}
    for proc in psutil.process_iter(["pid", "uids"]):
        try:
            if proc.info["uids"] is None or proc.info["uids"].real != uid:
                continue
            tag = proc.environ().get(OWNER_ENV)
            if not tag:
                continue
            owner = owner_of(tag)
            if owner == own_owner:
                continue
            if owner not in alive_cache:
                alive_cache[owner] = owner_alive(owner)
            if alive_cache[owner]:
                continue
            found.append(
                Leftover(proc.pid, os.getpgid(proc.pid), owner, " ".join(proc.cmdline())[:200])
            )
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return found


def sweep_leftovers(own_owner: str | None = None) -> list[Leftover]:
    """End the groups of every leftover; return what was found. Blocking."""
    leftovers = find_leftovers(own_owner)
    groups = {item.pgid for item in leftovers}
    pids = {item.pid for item in leftovers}
    for pgid in groups:
        _kill_group(pgid, signal.SIGTERM)
    for pid in pids:
        # A leftover that left its group (setsid) is signalled by pid as well.
        _kill_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + SWEEP_TERM_GRACE_SECONDS
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(SWEEP_CHECK_INTERVAL_SECONDS)
    for pgid in groups:
        _kill_group(pgid, signal.SIGKILL)
    for pid in pids:
        _kill_pid(pid, signal.SIGKILL)
    return leftovers


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_pid(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
