"""Find and end what a crashed earlier mcp-tray left running.

Every child carries ``MCP_TRAY_OWNER=<instance id>/<child id>`` in its
environment, and its grandchildren inherit it. At start-up we look for
processes of this user whose tag names an owner that is no longer alive,
and end them with their trees (their process groups on POSIX; on Windows a
dead tray's job objects already ended theirs). An owner id is ``<pid>-<start
time in ms>-<random>``: the start time tells a live owner from a recycled pid.

When the tray stops, the escapees the Linux subreaper adopted go too
(``end_adopted``): processes that cleared their environment, so no tag or
group names them, re-parented to the tray when their parent exited.
"""

import os
import secrets
import time
from dataclasses import dataclass
from typing import Final

import psutil

from core.base.envvars import TAG_SEPARATOR
from core.platform import procs
from core.platform.backends import backends

#: After the polite step on a leftover's tree, how long before the hard one.
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
    owner: str
    cmdline: str


def _leftovers(own_owner: str | None) -> list[tuple[psutil.Process, Leftover]]:
    alive_cache: dict[str, bool] = {}

    def dead_owner(tag: str) -> bool:
        owner = owner_of(tag)
        if owner == own_owner:
            return False
        if owner not in alive_cache:
            alive_cache[owner] = owner_alive(owner)
        return not alive_cache[owner]

    return [
        (proc, Leftover(proc.pid, owner_of(tag), procs.cmdline(proc)))
        for proc, tag in procs.tagged(dead_owner)
    ]


def find_leftovers(own_owner: str | None = None) -> list[Leftover]:
    """Tagged processes of this user whose owner is dead. Blocking: run in a thread."""
    return [item for _, item in _leftovers(own_owner)]


def sweep_leftovers(own_owner: str | None = None) -> list[Leftover]:
    """End every leftover with its tree; return what was found. Blocking."""
    found = _leftovers(own_owner)
    _end([proc for proc, _ in found], SWEEP_TERM_GRACE_SECONDS)
    return [item for _, item in found]


def end_adopted(own: set[int]) -> list[psutil.Process]:
    """End the escapees the subreaper adopted (none where there is no subreaper). Blocking."""
    reaper = backends().reaper
    adopted = reaper.adopted(own)
    if adopted:
        _end(adopted, SWEEP_TERM_GRACE_SECONDS)
    reaper.reap(own)
    return adopted


def _end(found: list[psutil.Process], grace: float) -> None:
    if not found:
        return
    held = backends().trees.hold(found)
    held.terminate()
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and held.alive():
        time.sleep(SWEEP_CHECK_INTERVAL_SECONDS)
    held.kill()
