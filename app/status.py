"""The tray's colour and its one-line tooltip, from a core snapshot (docs/design.md §3.11).

Something waiting for the person's approval (a held call, a changed tool)
comes first, in its own blue: an agent is stopped until they answer. Then
the worst state wins: red (a server parked or a session tripped), amber
(starting, respawning, degraded, a stale worker, a warning, a refused
config edit), green (all ready), grey (nothing configured, or everything
stopped on purpose).

The tooltip names the most severe cause in words and what to do about it
("demo-fragile parked: it exited 6 times in a row — Respawn it from the
window, or mcp-tray respawn demo-fragile"), with how many other causes
there are; the menu's first lines say the same. Causes, most severe first:
parked servers, tripped sessions, a refused config edit, warnings (a taken
port first), degraded servers, stale workers, servers respawning, servers
starting. Only warnings count (core.base.severity's rule): advice (a
worker whose environment could not be read) and information (the API
token in a 0600 file for want of a Secret Service) stay in the Warnings
tab and never turn the icon amber.

Pure: no Qt here, so every combination is a plain test.
"""

import enum
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Final

from core.base.snapshot import ServerSnapshot, TraySnapshot, WarningSnapshot
from core.base.states import ServerState
from core.registry.identity import client_display_name

#: The whole tooltip, "mcp-tray: " included: a tray tooltip is one glance.
TOOLTIP_MAX: Final = 180
#: What to do gets at most this much of it; the cause gets the rest.
FIX_MAX: Final = 110
#: One line of the tray menu's header (a menu as wide as a tooltip is unreadable).
MENU_LINE_MAX: Final = 100
#: Shown first among warnings: HTTP clients cannot reach mcp-tray meanwhile.
URGENT_FAMILIES: Final = ("port-taken", "unsupported-env", "stale-runtime")
#: Where a long cause may be cut so that what is left still reads.
_CLAUSE_ENDS: Final = ("; ", " — ", ". ", " (", ", ", " before ")
#: Absolute paths in fixes shrink to their last part ("in config.json").
_PATH: Final = re.compile(r"(?<![\w.:/])/(?:[^\s/,;:()'\"]+/)*([^\s/,;:()'\"]+)")


class TrayColour(enum.Enum):
    #: A call or a changed tool waits for the person's approval.
    WAITING = "waiting"
    #: Needs the user: parked server or tripped session.
    RED = "red"
    #: Working on it, or something to look at.
    AMBER = "amber"
    #: Everything configured is ready.
    GREEN = "green"
    #: Nothing to watch.
    GREY = "grey"


#: A server's own colour: the glyph in its row matches the tray icon it would cause.
STATE_COLOURS: Final = {
    ServerState.READY: TrayColour.GREEN,
    ServerState.STARTING: TrayColour.AMBER,
    ServerState.DEGRADED: TrayColour.AMBER,
    ServerState.EXITED: TrayColour.AMBER,
    ServerState.PARKED: TrayColour.RED,
    ServerState.STOPPED: TrayColour.GREY,
    # Asleep on purpose (on demand) and answering lists: calm, never a worry.
    ServerState.SLEEPING: TrayColour.GREEN,
    # Nothing of ours broke, and it is tried again by itself: a warning, not an alarm.
    ServerState.UNREACHABLE: TrayColour.AMBER,
    # Only the person can do it, like an approval.
    ServerState.NEEDS_SIGN_IN: TrayColour.WAITING,
}


def state_colour(state: ServerState) -> TrayColour:
    return STATE_COLOURS[state]


@dataclass(frozen=True)
class Cause:
    colour: TrayColour
    #: What is wrong, in words ("demo-fragile parked: it exited 6 times in a row").
    text: str
    #: What to do about it ("" when nothing needs doing: it is under way).
    fix: str = ""


@dataclass(frozen=True)
class TrayStatus:
    colour: TrayColour
    #: The most severe cause (or the all-good line).
    cause: str
    fix: str = ""
    #: How many other causes there are.
    more: int = 0

    @property
    def tooltip(self) -> str:
        """One line: ``mcp-tray: <cause> — <fix> (+N more)``, at most TOOLTIP_MAX."""
        prefix = "mcp-tray: "
        tail = f" (+{self.more} more)" if self.more else ""
        fix = shorten(self.fix, FIX_MAX)
        room = TOOLTIP_MAX - len(prefix) - len(tail) - (len(fix) + 3 if fix else 0)
        text = shorten(self.cause, room)
        return prefix + text + (f" — {fix}" if fix else "") + tail

    @property
    def menu_lines(self) -> tuple[str, ...]:
        """The tray menu's header: the cause, then what to do, each short enough for a menu."""
        tail = f" (+{self.more} more)" if self.more else ""
        lines = [shorten(self.cause, MENU_LINE_MAX - len(tail)) + tail]
        if self.fix:
            lines.append("→ " + shorten(self.fix, MENU_LINE_MAX - 2))
        return tuple(lines)


def shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut after a whole clause when one fits."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"[:limit]
    head = text[: limit - 1]
    cut = max((head.rfind(end) for end in _CLAUSE_ENDS), default=-1)
    # A clause boundary in the first third would throw most of the room away.
    if cut > limit // 3:
        return head[:cut].rstrip(" ,;.—") + "…"
    return head.rstrip() + "…"


def short_paths(text: str) -> str:
    """``/home/u/.config/mcp-tray/config.json`` -> ``config.json``: a fix fits a glance."""
    return _PATH.sub(lambda match: match.group(1), text)


def _split_fix(text: str) -> tuple[str, str]:
    """("cause", "fix") from a ``… Fix: …`` text (own warnings, config errors)."""
    cause, found, fix = text.rpartition(" Fix: ")
    if not found:
        return text.strip().rstrip("."), ""
    return cause.strip().rstrip("."), fix.strip().rstrip(".")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


# ----------------------------------------------------------------- causes


def _parked(server: ServerSnapshot) -> Cause:
    reason = server.parked_reason or server.last_error or "it kept dying"
    return Cause(
        TrayColour.RED,
        f"{server.name} parked: {reason}",
        f"Respawn it from the window, or mcp-tray respawn {server.name}",
    )


def _tripped(snapshot: TraySnapshot) -> list[Cause]:
    tripped = [s for s in snapshot.sessions if s.tripped]
    if not tripped:
        return []
    first = tripped[0]
    who = f"{first.client} on {first.server}"
    if len(tripped) == 1:
        return [
            Cause(
                TrayColour.RED,
                f"1 session tripped: {who} failed {first.consecutive_failures} times in a row",
                f"Reset it from the window, or mcp-tray reset {first.id}",
            )
        ]
    return [
        Cause(
            TrayColour.RED,
            f"{len(tripped)} sessions tripped: {who} and {_plural(len(tripped) - 1, 'other')}",
            "Reset them from the window, or mcp-tray reset --all",
        )
    ]


def _config(snapshot: TraySnapshot) -> list[Cause]:
    if not snapshot.config_error:
        return []
    cause, fix = _split_fix(snapshot.config_error)
    config = snapshot.config_path
    if config and cause.startswith(config):
        cause = PurePath(config).name + cause[len(config) :]
    return [
        Cause(
            TrayColour.AMBER,
            f"config edit refused: {cause}",
            short_paths(_capital(fix) or "Fix the file") + "; the last good config keeps running",
        )
    ]


def _warning(warning: WarningSnapshot) -> Cause:
    cause, fix = _split_fix(warning.message)
    fix = warning.fix.strip().rstrip(".") or fix
    return Cause(TrayColour.AMBER, short_paths(cause), short_paths(_capital(fix)))


def _warnings(snapshot: TraySnapshot) -> list[Cause]:
    # Advice and information are listed in the Warnings tab, never amber.
    problems = [w for w in snapshot.warnings if w.is_warning]

    def rank(warning: WarningSnapshot) -> int:
        family = warning.family.rstrip(":")
        return URGENT_FAMILIES.index(family) if family in URGENT_FAMILIES else len(URGENT_FAMILIES)

    return [_warning(w) for w in sorted(problems, key=rank)]


def _degraded(server: ServerSnapshot) -> Cause:
    return Cause(
        TrayColour.AMBER,
        f"{server.name} not answering pings (its process lives)",
        f"Respawn it from the window if it stays so, or mcp-tray respawn {server.name}",
    )


def _stale(snapshot: TraySnapshot) -> list[Cause]:
    stale = [w for w in snapshot.workers if w.status != "live"]
    if not stale:
        return []
    first = stale[0]
    client = client_display_name(first.client_name) if first.client_name else "a client"
    where = f" ({client} on {first.server})" if first.server else f" ({client})"
    return [
        Cause(
            TrayColour.AMBER,
            f"{_plural(len(stale), 'stale worker')}{where}: its heartbeat stopped or was fenced",
            "Restart that client if it stays so (the Workers tab lists them)",
        )
    ]


def _exited(server: ServerSnapshot) -> Cause:
    why = server.last_error or "its process exited"
    return Cause(TrayColour.AMBER, f"{server.name} respawning: {why}")


def _unreachable(server: ServerSnapshot) -> Cause:
    run = server.last_error or "unreachable"
    why = run.split(" ", 2)[-1] if run.startswith("generation ") else run
    again = f"; tried again in {server.retry_in:.0f} s" if server.retry_in is not None else ""
    return Cause(
        TrayColour.AMBER,
        f"{server.name} {why}{again}",
        f"Check the network or the service; Respawn (or mcp-tray respawn {server.name}) tries now",
    )


def _sign_in(server: ServerSnapshot) -> Cause:
    return Cause(
        TrayColour.WAITING,
        f"{server.name} needs you to sign in",
        f"Sign in to {server.name}… in the mcp-tray menu, or mcp-tray login {server.name}",
    )


def _starting(server: ServerSnapshot) -> Cause:
    return Cause(TrayColour.AMBER, f"{server.name} starting")


def _waiting(snapshot: TraySnapshot) -> list[Cause]:
    calls = [item for item in snapshot.approvals if item.kind == "call"]
    changes = [item for item in snapshot.approvals if item.kind != "call"]
    found = []
    if calls:
        first = calls[0]
        waits = "1 call waits" if len(calls) == 1 else f"{len(calls)} calls wait"
        found.append(
            Cause(
                TrayColour.WAITING,
                f"{waits} for your approval ({first.client}: {first.tool} on {first.server})",
                f"Allow or deny in the window's Approvals tab, or mcp-tray approve {first.id}",
            )
        )
    if changes:
        first = changes[0]
        tools = (
            "1 changed tool waits" if len(changes) == 1 else f"{len(changes)} changed tools wait"
        )
        found.append(
            Cause(
                TrayColour.WAITING,
                f"{tools} for your approval ({first.tool} on {first.server}: {first.reason})",
                f"Compare and approve in the window's Approvals tab, or mcp-tray approve {first.id}",
            )
        )
    return found


def causes(snapshot: TraySnapshot) -> list[Cause]:
    """Every problem in the snapshot, most severe first."""
    servers = snapshot.servers
    found = _waiting(snapshot)
    found += [_sign_in(s) for s in servers if s.state is ServerState.NEEDS_SIGN_IN]
    found += [_parked(s) for s in servers if s.state is ServerState.PARKED]
    found += _tripped(snapshot)
    found += _config(snapshot)
    found += _warnings(snapshot)
    found += [_degraded(s) for s in servers if s.state is ServerState.DEGRADED]
    found += _stale(snapshot)
    found += [_unreachable(s) for s in servers if s.state is ServerState.UNREACHABLE]
    found += [_exited(s) for s in servers if s.state is ServerState.EXITED]
    found += [_starting(s) for s in servers if s.state is ServerState.STARTING]
    return found


def tray_status(snapshot: TraySnapshot) -> TrayStatus:
    found = causes(snapshot)
    if found:
        worst = found[0]
        return TrayStatus(worst.colour, worst.text, worst.fix, len(found) - 1)
    servers = snapshot.servers
    if not servers:
        return TrayStatus(
            TrayColour.GREY,
            "no servers configured",
            f"Add them to {snapshot.config_path}",
        )
    running = [s for s in servers if s.state is not ServerState.STOPPED]
    if not running:
        return TrayStatus(
            TrayColour.GREY,
            f"all {_plural(len(servers), 'server')} stopped",
            "Start them from the window, or mcp-tray start NAME",
        )
    stopped = len(servers) - len(running)
    sleeping = sum(1 for s in servers if s.state is ServerState.SLEEPING)
    awake = len(running) - sleeping
    return TrayStatus(
        TrayColour.GREEN,
        f"{_plural(awake, 'server')} ready"
        + (f", {sleeping} sleeping" if sleeping else "")
        + (f", {stopped} stopped" if stopped else ""),
    )
