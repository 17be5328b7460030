"""The tray's colour and one-line tooltip, from a core snapshot (DESIGN 3.11).

The worst state wins: red (a server parked or a session tripped), amber
(starting, respawning, degraded, a stale worker, any warning, a refused
config edit), green (all ready), grey (nothing configured, or everything
stopped on purpose). Pure: no Qt here, so every combination is a plain test.
"""

import enum
from dataclasses import dataclass
from typing import Final

from core.base.snapshot import TraySnapshot
from core.base.states import ServerState

#: Tooltips longer than this are cut: a tray tooltip is one glance.
TOOLTIP_MAX: Final = 160


class TrayColour(enum.Enum):
    #: Needs the user: parked server or tripped session.
    RED = "red"
    #: Working on it, or something to look at.
    AMBER = "amber"
    #: Everything configured is ready.
    GREEN = "green"
    #: Nothing to watch.
    GREY = "grey"


@dataclass(frozen=True)
class TrayStatus:
    colour: TrayColour
    tooltip: str


def tray_status(snapshot: TraySnapshot) -> TrayStatus:
    servers = snapshot.servers
    warnings = snapshot.warnings

    parked = [s for s in servers if s.state is ServerState.PARKED]
    tripped = [s for s in snapshot.sessions if s.tripped]
    if parked or tripped:
        parts = [f"{s.name} parked" for s in parked]
        if tripped:
            parts.append(f"{len(tripped)} session{'s' if len(tripped) > 1 else ''} tripped")
        return _status(TrayColour.RED, ", ".join(parts) + " — open mcp-tray to respawn or reset")

    busy = [s for s in servers if s.state in (ServerState.STARTING, ServerState.EXITED)]
    degraded = [s for s in servers if s.state is ServerState.DEGRADED]
    stale = [w for w in snapshot.workers if w.status != "live"]
    problems: list[str] = []
    if snapshot.config_error:
        problems.append("config edit refused (still running the last good one)")
    problems += [
        f"{s.name} {'respawning' if s.state is ServerState.EXITED else 'starting'}" for s in busy
    ]
    problems += [f"{s.name} not answering pings" for s in degraded]
    if stale:
        problems.append(f"{len(stale)} stale worker{'s' if len(stale) > 1 else ''}")
    if warnings:
        problems.append(f"{len(warnings)} warning{'s' if len(warnings) > 1 else ''}")
    if problems:
        return _status(TrayColour.AMBER, ", ".join(problems))

    if not servers:
        return _status(
            TrayColour.GREY, "no servers configured — add them to " + snapshot.config_path
        )
    running = [s for s in servers if s.state is not ServerState.STOPPED]
    if not running:
        return _status(TrayColour.GREY, f"all {len(servers)} servers stopped")
    return _status(
        TrayColour.GREEN, f"{len(running)} server{'s' if len(running) > 1 else ''} ready"
    )


def _status(colour: TrayColour, text: str) -> TrayStatus:
    line = f"mcp-tray: {text}"
    if len(line) > TOOLTIP_MAX:
        line = line[: TOOLTIP_MAX - 1] + "…"
    return TrayStatus(colour, line)
