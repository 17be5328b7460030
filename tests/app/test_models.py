"""The thin table models: rows follow snapshots; ticks touch only what changed.

Strategy: feed rows by hand, watch the models' own signals with qtbot's
signal recorders, and let pytest-qt's model tester check Qt's contracts;
roles beyond the text (sort keys, the state glyph, the activity series)
are read back through ``data`` as a view would.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QIcon
from pytestqt.qtbot import QtBot

from app.details import DetailsPane
from app.icons import tray_icon
from app.models import (
    SERIES_ROLE,
    SORT_ROLE,
    ServerRow,
    ServersModel,
    SessionsModel,
    ToolsModel,
    WarningsModel,
    WorkersModel,
    server_rows,
)
from app.status import TrayColour
from core.base.snapshot import ResourceUsage, WarningSnapshot, WorkerSnapshot
from core.base.states import ServerState
from core.serving.observe.activity import Restart, Series
from core.supervision.offer import ToolRow
from tests.app.builders import server, session

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def worker(identity: str, beat_seconds_ago: float, ttl: float = 60) -> WorkerSnapshot:
    return WorkerSnapshot(
        worker_identity=identity,
        client_name="cursor",
        session_id=f"s-{identity}",
        server="echo",
        pid=42,
        started_at=NOW.isoformat(),
        last_heartbeat_at=(NOW - timedelta(seconds=beat_seconds_ago)).isoformat(),
        heartbeat_age_seconds=beat_seconds_ago,
        ttl_seconds=ttl,
        status="live",
    )


class Recorder:
    def __init__(self, model: Any) -> None:
        self.changed: list[tuple[int, int, int, int]] = []
        self.resets = 0
        model.dataChanged.connect(
            lambda tl, br, roles=None: self.changed.append(
                (tl.row(), br.row(), tl.column(), br.column())
            )
        )
        model.modelReset.connect(self._reset)

    def _reset(self) -> None:
        self.resets += 1

    def cells(self) -> set[tuple[int, int]]:
        """Every (row, column) some dataChanged covered."""
        return {
            (row, column)
            for top, bottom, left, right in self.changed
            for row in range(top, bottom + 1)
            for column in range(left, right + 1)
        }


def test_a_tick_updates_only_the_age_cells_of_rows_whose_age_text_changed(
    qtmodeltester: Any,
) -> None:
    model = WorkersModel()
    model.set_rows([worker("a", 5.0), worker("b", 125.4), worker("c", 10.0)], now=NOW.timestamp())
    qtmodeltester.check(model)
    recorder = Recorder(model)
    age_column = [c for c, _ in WorkersModel.COLUMNS].index("age")

    # 0.5 s later: "5 s" -> "5 s" unchanged for a (5.5), b stays "2 min 05 s" (125.9), c 10 -> 10 (10.5)
    assert model.tick(NOW.timestamp() + 0.5) == 0
    assert recorder.changed == []
    # 1 s later: every age text moves by one second.
    assert model.tick(NOW.timestamp() + 1.0) == 3
    assert recorder.cells() == {(0, age_column), (1, age_column), (2, age_column)}
    assert recorder.resets == 0
    assert model.data(model.index(1, age_column)) == "2 min 06 s"


def test_rows_whose_age_text_did_not_change_get_no_signal() -> None:
    model = WorkersModel()
    # b's age is at .2 s: half a second on, a and c show a new second, b does not.
    model.set_rows([worker("a", 5.6), worker("b", 7.2), worker("c", 9.6)], now=NOW.timestamp())
    recorder = Recorder(model)
    age_column = [c for c, _ in WorkersModel.COLUMNS].index("age")

    assert model.tick(NOW.timestamp() + 0.5) == 2

    assert recorder.cells() == {(0, age_column), (2, age_column)}
    assert len(recorder.changed) == 2  # two runs, row 1 left out


def test_a_row_past_its_ttl_turns_stale_on_the_tick_without_a_registry_read() -> None:
    model = WorkersModel()
    model.set_rows([worker("a", 55.0)], now=NOW.timestamp())
    status_column = [c for c, _ in WorkersModel.COLUMNS].index("status")
    assert model.data(model.index(0, status_column)) == "live"
    model.tick(NOW.timestamp() + 10)
    assert model.data(model.index(0, status_column)) == "stale"


def test_set_rows_inserts_updates_and_removes_without_a_reset(
    qtbot: QtBot, qtmodeltester: Any
) -> None:
    model = SessionsModel()
    recorder = Recorder(model)
    with qtbot.waitSignal(model.rowsInserted):
        model.set_rows([session("s1"), session("s2")])
    qtmodeltester.check(model)
    model.set_rows([session("s1", failures=3), session("s2")])
    columns = [c for c, _ in SessionsModel.COLUMNS]
    assert recorder.changed == [
        (0, 0, columns.index("consecutive_failures"), columns.index("breaker"))
    ]
    with qtbot.waitSignal(model.rowsRemoved):
        model.set_rows([session("s2")])
    assert model.keys() == ["s2"]
    assert recorder.resets == 0


def test_a_session_reached_through_an_aggregate_endpoint_says_which() -> None:
    model = SessionsModel()
    model.set_rows([session("s1.echo", via="@coding"), session("s2")])
    via = [c for c, _ in SessionsModel.COLUMNS].index("kind")
    assert model.data(model.index(0, via)) == "http @coding"
    assert model.data(model.index(1, via)) == "http"


def test_servers_show_state_uptime_resources_and_the_parked_reason() -> None:
    model = ServersModel()
    now = NOW.timestamp()
    model.set_rows(
        [
            ServerRow(
                server(
                    "a",
                    ServerState.READY,
                    pid=7,
                    generation=2,
                    restarts=1,
                    started_at=now - 3725,
                ),
                ResourceUsage(cpu_percent=1.25, rss_bytes=50 * 1024 * 1024),
            ),
            ServerRow(
                server(
                    "b",
                    ServerState.PARKED,
                    generation=6,
                    restarts=5,
                    last_error="x",
                    parked_reason="exited 6 times",
                )
            ),
        ],
        now=now,
    )
    columns = [c for c, _ in ServersModel.COLUMNS]

    def cell(row: int, col: str) -> Any:
        return model.data(model.index(row, columns.index(col)))

    assert cell(0, "uptime") == "1 h 02 min"
    assert cell(0, "cpu") == "1.2" or cell(0, "cpu") == "1.3"
    assert cell(0, "rss") == "50.0 MiB"
    assert cell(1, "last_error") == "exited 6 times"
    assert cell(1, "pid") == ""
    assert model.rowCount(QModelIndex()) == 2


def test_warnings_rows_are_keyed_by_their_text() -> None:
    model = WarningsModel()
    warning = WarningSnapshot("unsupported-env", "MCP_TRAY_X", "m", "f", "t1")
    model.set_rows([warning])
    model.set_rows([WarningSnapshot("unsupported-env", "MCP_TRAY_X", "m", "f", "t1")])
    assert model.rowCount() == 1


MIB = 1024 * 1024


def test_a_remote_server_is_marked_remote_where_a_local_one_has_its_pid_and_memory() -> None:
    model = ServersModel()
    model.set_rows(
        [ServerRow(server("far", ServerState.READY, remote=True, command="https://x.example/mcp"))]
    )
    columns = [c for c, _ in ServersModel.COLUMNS]

    def cell(col: str, role: Qt.ItemDataRole = Qt.ItemDataRole.DisplayRole) -> Any:
        return model.data(model.index(0, columns.index(col)), role)

    assert cell("pid") == "remote"
    assert cell("rss") == "" and cell("cpu") == ""
    assert cell("latency") == ""  # no call answered yet
    assert "https://x.example/mcp" in cell("pid", Qt.ItemDataRole.ToolTipRole)
    model.set_rows([ServerRow(server("far", ServerState.READY, remote=True, latency_ms=3.14))])
    assert cell("latency") == "3.1 ms"


def test_usage_shows_only_beside_the_child_it_was_sampled_from() -> None:
    """A stopped server kept showing 68 MiB: a figure must not outlive its child."""
    usage = ResourceUsage(cpu_percent=2.0, rss_bytes=68 * MIB)
    sampled = {"a": (7, usage), "b": (8, usage), "c": (9, usage)}
    rows = server_rows(
        [
            server("a", ServerState.READY, pid=7),
            server("b", ServerState.STOPPED, pid=None),
            server("c", ServerState.READY, pid=10, generation=2),
        ],
        sampled,
    )
    assert [row.usage for row in rows] == [usage, None, None]


def test_numbers_sort_as_numbers_not_as_text() -> None:
    model = ServersModel()
    model.set_rows(
        [
            ServerRow(server("big", ServerState.READY, pid=7), ResourceUsage(1.0, 680 * MIB)),
            ServerRow(server("small", ServerState.READY, pid=8), ResourceUsage(1.0, 9 * MIB)),
        ]
    )
    rss = ServersModel.column("rss")
    texts = [model.data(model.index(r, rss)) for r in range(2)]
    keys = [model.data(model.index(r, rss), SORT_ROLE) for r in range(2)]
    assert texts == ["680.0 MiB", "9.0 MiB"] and sorted(texts)[0] == "680.0 MiB"
    assert keys[1] < keys[0]


def test_the_state_cell_carries_the_glyph_of_the_tray_colour_it_would_cause(qtbot: QtBot) -> None:
    model = ServersModel()
    model.set_rows([ServerRow(server("a", ServerState.PARKED))])
    icon = model.data(model.index(0, ServersModel.column("state")), Qt.ItemDataRole.DecorationRole)
    assert isinstance(icon, QIcon) and not icon.isNull()
    assert icon.cacheKey() == tray_icon(TrayColour.RED).cacheKey()


def test_an_activity_cell_changes_only_when_its_series_does() -> None:
    model = ServersModel()
    quiet = Series(10.0, (0, 0, 0), (0, 0, 0))
    busy = Series(10.0, (0, 2, 1), (0, 1, 0), (Restart(1, True),))
    snap = server("a", ServerState.READY, pid=7)
    model.set_rows([ServerRow(snap, activity=quiet)])
    recorder = Recorder(model)
    column = ServersModel.column("activity")

    model.set_rows([ServerRow(snap, activity=Series(10.0, (0, 0, 0), (0, 0, 0)))])
    assert recorder.changed == []
    model.set_rows([ServerRow(snap, activity=busy)])
    assert recorder.cells() == {(0, column)}
    assert model.data(model.index(0, column), SERIES_ROLE) == busy
    assert model.data(model.index(0, column)) == (
        "last 0.5 min: 3 calls, 1 failed, 1 restart (1 after a crash)"
    )


def test_the_last_error_stays_on_one_line_in_the_table() -> None:
    model = ServersModel()
    model.set_rows([ServerRow(server("a", ServerState.EXITED, last_error="line one\n  line two"))])
    assert model.data(model.index(0, ServersModel.column("last_error"))) == "line one line two"


def test_tools_rows_show_the_replay_mark_and_say_why_in_the_tooltip(qtmodeltester: Any) -> None:
    model = ToolsModel()
    model.set_rows(
        [
            ToolRow(
                "echo", "", "Return the text.", True, False, True, "the tool is marked readOnlyHint"
            ),
            ToolRow("write_note", "Write", "Append.", False, False, False, "not marked"),
        ]
    )
    qtmodeltester.check(model)
    retried = ToolsModel.column("retried")
    assert [model.data(model.index(r, retried)) for r in range(2)] == ["↻ retried", "not retried"]
    assert "readOnlyHint" in model.data(model.index(0, retried), Qt.ItemDataRole.ToolTipRole)
    assert "may or may not" in model.data(model.index(1, retried), Qt.ItemDataRole.ToolTipRole)


def test_an_own_warning_shows_its_fix_in_the_fix_column_and_token_storage_is_information() -> None:
    model = WarningsModel()
    model.set_rows(
        [
            WarningSnapshot(
                "token-storage",
                "mcp-tray",
                "the token is in a file. Fix: run a Secret Service.",
                "",
                "t",
            )
        ]
    )
    cell = {
        key: model.data(model.index(0, WarningsModel.column(key)))
        for key, _ in WarningsModel.COLUMNS
    }
    assert cell == {
        "family": "token-storage (information)",
        "subject": "mcp-tray",
        "message": "the token is in a file.",
        "fix": "run a Secret Service.",
    }


def test_the_servers_tab_says_whether_a_sandbox_is_enforced_and_by_what() -> None:
    model = ServersModel()
    enforced = "landlock ABI 7 — write 2 folders, network off"
    model.set_rows(
        [
            ServerRow(server("boxed", ServerState.READY, sandbox=enforced)),
            ServerRow(server("free", ServerState.READY)),
        ],
        now=NOW.timestamp(),
    )
    column = ServersModel.column("sandbox")
    assert model.data(model.index(0, column)) == enforced
    assert model.data(model.index(1, column)) == "none"


def test_the_details_of_a_remote_server_offer_its_sign_in(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[str, str]] = []
    monkeypatch.setattr(
        "app.details.start_sign_in", lambda name, config: started.append((name, config))
    )
    pane = DetailsPane(lambda name: None, lambda: "/home/me/config.json")
    qtbot.addWidget(pane)
    pane.show()

    pane.show_server(server("local", ServerState.READY, pid=7))
    assert not pane.sign_in.isVisible()
    pane.show_server(
        server("far", ServerState.NEEDS_SIGN_IN, remote=True, command="https://x.example/mcp")
    )
    assert pane.sign_in.isVisible()
    assert "remote" in pane.facts.text() and "<b>URL</b>" in pane.command.text()
    pane.sign_in.click()

    assert started == [("far", "/home/me/config.json")]
    assert "finish it in your browser" in pane.sign_in_note.text()
