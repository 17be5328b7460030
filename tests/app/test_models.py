"""The thin table models: rows follow snapshots; ticks touch only what changed.

Strategy: feed rows by hand, watch the models' own signals with qtbot's
signal recorders, and let pytest-qt's model tester check Qt's contracts.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from PySide6.QtCore import QModelIndex
from pytestqt.qtbot import QtBot

from app.models import ServerRow, ServersModel, SessionsModel, WarningsModel, WorkersModel
from core.base.snapshot import ResourceUsage, WarningSnapshot, WorkerSnapshot
from core.base.states import ServerState
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
