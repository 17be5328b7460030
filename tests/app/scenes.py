"""Whole tray snapshots in shorthand, a menu's recorded actions, and the window opened on a
real core (not a test module).

The window's, the tray's and the dialogs' tests describe what core shows in
a line each: ``snapshot(server("a", ServerState.READY), sessions=[...])``.
"""

import contextlib
from collections.abc import Iterator
from typing import Any

from PySide6.QtWidgets import QMenu

from app.core_link import CoreLink
from app.window import MainWindow
from core.base.snapshot import (
    ServerSnapshot,
    SessionSnapshot,
    TraySnapshot,
    WarningSnapshot,
    WorkerSnapshot,
)
from core.base.states import ServerState
from core.serving.core_thread import CoreThread
from tests.app import builders

CONFIG = "/home/u/.config/mcp-tray/config.json"


def server(
    name: str, state: ServerState, reason: str | None = None, error: str | None = None
) -> ServerSnapshot:
    running = state in (ServerState.READY, ServerState.DEGRADED, ServerState.STARTING)
    return builders.server(
        name, state, pid=100 if running else None, parked_reason=reason, last_error=error
    )


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
    return WorkerSnapshot.from_row(
        {"worker_identity": f"w-{status}", "status": status, "client_name": "cursor", "server": "a"}
    )


def snapshot(
    *servers: ServerSnapshot,
    config_error: str | None = None,
    sessions: list[dict[str, Any]] = (),  # type: ignore[assignment]
    workers: list[dict[str, Any]] = (),  # type: ignore[assignment]
    warnings: tuple[WarningSnapshot, ...] = (),
) -> TraySnapshot:
    """Sessions and workers in shorthand: {"breaker": ...}, {"status": ...}."""
    return TraySnapshot(
        "0",
        CONFIG,
        tuple(servers),
        config_error,
        sessions=tuple(
            session(s.get("breaker") == "tripped", f"s{i}") for i, s in enumerate(sessions)
        ),
        workers=tuple(worker(str(w.get("status"))) for w in workers),
        warnings=warnings,
    )


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, args))


def titles(menu: QMenu) -> list[str]:
    return [action.text() for action in menu.actions() if not action.isSeparator()]


def submenu(menu: QMenu, title: str) -> QMenu:
    found = next(a.menu() for a in menu.actions() if a.text() == title)
    assert isinstance(found, QMenu)
    return found


@contextlib.contextmanager
def open_window(core: CoreThread) -> Iterator[MainWindow]:
    """The window on the core, shown; closed (with its link) inside the test."""
    link = CoreLink(core)
    window = MainWindow(link)
    window.show()
    try:
        yield window
    finally:
        window.close_down()
        window.close()
        link.close()
