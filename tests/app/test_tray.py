"""The tray menu, built from a snapshot each time it opens, and the notification limit.

Strategy: a real QMenu filled by build_menu from hand-made snapshots; its
actions are triggered to check they reach the (recording) actions object.
"""

from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from app.status import tray_status
from app.tray import Notifier, build_menu
from core.base.states import ServerState
from tests.app import builders
from tests.app.scenes import Recording, server, snapshot, submenu, titles


def test_the_menu_lists_each_server_with_its_actions_and_the_tripped_count(qtbot: QtBot) -> None:
    menu = QMenu()
    actions = Recording()
    snap = snapshot(
        server("notes", ServerState.READY),
        server("fragile", ServerState.STOPPED),
        sessions=[{"breaker": "tripped"}, {"breaker": "closed"}, {"breaker": "tripped"}],
    )

    build_menu(menu, snap, actions)  # type: ignore[arg-type]

    entries = titles(menu)
    assert entries[:2] == [
        "2 sessions tripped: Claude Desktop on a and 1 other",
        "→ Reset them from the window, or mcp-tray reset --all",
    ]
    assert [a.isEnabled() for a in menu.actions()[:2]] == [True, False]
    assert menu.actions()[0].font().bold()
    assert "notes — ready" in entries and "fragile — stopped" in entries
    assert "Reset tripped sessions (2)" in entries
    assert entries[-2:] == ["Open window", "Quit"]
    notes = submenu(menu, "notes — ready")
    assert titles(notes) == ["Respawn", "Stop", "Start", "Open log"]
    assert [a.isEnabled() for a in notes.actions()] == [True, True, False, True]
    fragile = submenu(menu, "fragile — stopped")
    assert [a.isEnabled() for a in fragile.actions()] == [True, False, True, True]

    notes.actions()[0].trigger()
    fragile.actions()[2].trigger()
    next(a for a in menu.actions() if a.text().startswith("Reset tripped")).trigger()
    menu.actions()[0].trigger()
    assert actions.calls == [
        ("respawn", ("notes",)),
        ("start", ("fragile",)),
        ("reset_all", ()),
        ("open_window", ()),
    ]


def test_a_remote_that_needs_a_sign_in_says_so_first_and_its_menu_signs_in(
    qtbot: QtBot,
) -> None:
    menu = QMenu()
    actions = Recording()
    snap = snapshot(
        server("notes", ServerState.READY),
        builders.server("tracker", ServerState.NEEDS_SIGN_IN, remote=True),
    )

    build_menu(menu, snap, actions)  # type: ignore[arg-type]

    assert titles(menu)[:2] == [
        "tracker needs you to sign in",
        "→ Sign in to tracker… in the mcp-tray menu, or mcp-tray login tracker",
    ]
    assert tray_status(snap).colour.value == "waiting"
    tracker = submenu(menu, "tracker — needs-sign-in")
    assert "Sign in to tracker…" in titles(tracker)
    assert "Sign in to notes…" not in titles(submenu(menu, "notes — ready"))
    next(a for a in tracker.actions() if a.text() == "Sign in to tracker…").trigger()
    assert actions.calls == [("sign_in", ("tracker", snap.config_path))]


def test_rebuilding_replaces_the_old_entries(qtbot: QtBot) -> None:
    menu = QMenu()
    build_menu(menu, snapshot(server("a", ServerState.READY)), Recording())  # type: ignore[arg-type]
    build_menu(menu, snapshot(), Recording())  # type: ignore[arg-type]
    entries = titles(menu)
    assert "No servers configured" in entries
    assert not any(e.startswith("a —") for e in entries)
    assert "Reset tripped sessions (0)" in entries


def test_the_menu_opens_with_the_tooltips_cause_and_fix(qtbot: QtBot) -> None:
    menu = QMenu()
    snap = snapshot(server("fragile", ServerState.PARKED, "it exited 6 times in a row"))
    build_menu(menu, snap, Recording())  # type: ignore[arg-type]
    status = tray_status(snap)
    assert titles(menu)[:2] == [
        "fragile parked: it exited 6 times in a row",
        "→ Respawn it from the window, or mcp-tray respawn fragile",
    ]
    assert status.tooltip == (
        "mcp-tray: fragile parked: it exited 6 times in a row — "
        "Respawn it from the window, or mcp-tray respawn fragile"
    )


def test_notifications_are_limited_to_one_per_key_per_minute() -> None:
    now = [1000.0]
    notifier = Notifier(clock=lambda: now[0])
    assert notifier.allow("parked:a")
    assert not notifier.allow("parked:a")
    assert notifier.allow("parked:b")
    now[0] += 59
    assert not notifier.allow("parked:a")
    now[0] += 1
    assert notifier.allow("parked:a")
