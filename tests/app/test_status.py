"""The tray colour rule and tooltip, for every combination that matters.

Strategy: build TraySnapshots by hand (the function is pure) and check the
worst state wins, with a tooltip that says why in one line.
"""

from typing import Any

import pytest

from app.status import TOOLTIP_MAX, TrayColour, tray_status
from core.base.snapshot import (
    ServerSnapshot,
    SessionSnapshot,
    TraySnapshot,
    WarningSnapshot,
    WorkerSnapshot,
)
from core.base.states import ServerState
from tests.app import builders


def server(name: str, state: ServerState, reason: str | None = None) -> ServerSnapshot:
    running = state in (ServerState.READY, ServerState.DEGRADED, ServerState.STARTING)
    return builders.server(name, state, pid=100 if running else None, parked_reason=reason)


def session(tripped: bool, id: str = "s1") -> SessionSnapshot:
    return builders.session(
        id,
        failures=3 if tripped else 0,
        server="a",
        client_name="claude-desktop",
        client="Claude Desktop",
        requests=3,
    )


def worker(status: str) -> WorkerSnapshot:
    return WorkerSnapshot.from_row({"worker_identity": f"w-{status}", "status": status})


def warning(family: str = "unsupported-env") -> WarningSnapshot:
    return WarningSnapshot(family, "MCP_TRAY_X", "unknown key", "remove it", f"{family}: x")


def snapshot(
    *servers: ServerSnapshot,
    config_error: str | None = None,
    sessions: list[dict[str, Any]] = (),  # type: ignore[assignment]
    workers: list[dict[str, Any]] = (),  # type: ignore[assignment]
    warnings: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> TraySnapshot:
    """Sessions, workers and warnings in shorthand: {"breaker": ...}, {"status": ...}, {...}."""
    return TraySnapshot(
        "0",
        "/home/u/.config/mcp-tray/config.json",
        tuple(servers),
        config_error,
        sessions=tuple(
            session(s.get("breaker") == "tripped", f"s{i}") for i, s in enumerate(sessions)
        ),
        workers=tuple(worker(str(w.get("status"))) for w in workers),
        warnings=tuple(warning(str(w.get("family", "unsupported-env"))) for w in warnings),
    )


READY = server("a", ServerState.READY)


@pytest.mark.parametrize(
    ("snap", "colour", "words"),
    [
        (snapshot(), TrayColour.GREY, "no servers configured"),
        (snapshot(server("a", ServerState.STOPPED)), TrayColour.GREY, "all 1 servers stopped"),
        (snapshot(READY, server("b", ServerState.READY)), TrayColour.GREEN, "2 servers ready"),
        (snapshot(READY, server("b", ServerState.STARTING)), TrayColour.AMBER, "b starting"),
        (snapshot(READY, server("b", ServerState.EXITED)), TrayColour.AMBER, "b respawning"),
        (
            snapshot(READY, server("b", ServerState.DEGRADED)),
            TrayColour.AMBER,
            "b not answering pings",
        ),
        (
            snapshot(READY, workers=[{"live": False, "status": "stale"}]),
            TrayColour.AMBER,
            "1 stale worker",
        ),
        (
            snapshot(READY, workers=[{"live": True, "status": "fenced"}]),
            TrayColour.AMBER,
            "1 stale worker",
        ),
        (snapshot(READY, warnings=[{"family": "unsupported-env"}]), TrayColour.AMBER, "1 warning"),
        (snapshot(READY, config_error="bad"), TrayColour.AMBER, "config edit refused"),
        (
            snapshot(READY, server("b", ServerState.PARKED, "kept dying")),
            TrayColour.RED,
            "b parked",
        ),
        (snapshot(READY, sessions=[{"breaker": "tripped"}]), TrayColour.RED, "1 session tripped"),
        (
            snapshot(
                server("b", ServerState.PARKED), server("c", ServerState.STARTING), warnings=[{}]
            ),
            TrayColour.RED,
            "b parked",
        ),
        (
            snapshot(
                server("c", ServerState.STARTING),
                sessions=[{"breaker": "tripped"}, {"breaker": "tripped"}],
            ),
            TrayColour.RED,
            "2 sessions tripped",
        ),
    ],
)
def test_the_worst_state_wins_and_the_tooltip_says_why(
    snap: TraySnapshot, colour: TrayColour, words: str
) -> None:
    status = tray_status(snap)
    assert status.colour is colour
    assert words in status.tooltip
    assert "\n" not in status.tooltip
    assert status.tooltip.startswith("mcp-tray: ")


def test_a_live_worker_and_a_closed_session_change_nothing() -> None:
    status = tray_status(
        snapshot(
            READY, workers=[{"live": True, "status": "live"}], sessions=[{"breaker": "closed"}]
        )
    )
    assert status.colour is TrayColour.GREEN


def test_the_tooltip_stays_one_short_line() -> None:
    many = [server(f"server-with-a-long-name-{i}", ServerState.PARKED) for i in range(20)]
    assert len(tray_status(snapshot(*many)).tooltip) <= TOOLTIP_MAX
