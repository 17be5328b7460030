"""The sparkline painter: calls, failed calls and restart marks where their buckets are.

Strategy: paint a hand-made Series into a QImage (offscreen) and read
pixels back: each bucket is 10 px wide here, so a column's colour says what
was drawn for that bucket; the delegate is checked through a real view's
size hint.
"""

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QStyleOptionViewItem, QTableView
from pytestqt.qtbot import QtBot

from app.models import ServerRow, ServersModel
from app.sparkline import (
    BUCKET_PX,
    CALLS,
    CRASH_RESTART,
    FAILURES,
    RESTART,
    ActivityDelegate,
    paint_series,
)
from core.base.states import ServerState
from core.serving.observe.activity import Restart, Series
from tests.app.builders import server

WIDTH, HEIGHT = 60, 20


def render(series: Series) -> QImage:
    image = QImage(WIDTH, HEIGHT, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    paint_series(painter, QRectF(0, 0, WIDTH, HEIGHT), series)
    painter.end()
    return image


def colour(image: QImage, x: int, y: int) -> str:
    return image.pixelColor(x, y).name()


def column_colours(image: QImage, x: int) -> set[str]:
    return {colour(image, x, y) for y in range(HEIGHT)}


def test_calls_are_blue_with_the_failed_part_red_at_their_foot() -> None:
    series = Series(10.0, (4, 0, 2, 0, 0, 0), (2, 0, 0, 0, 0, 0))
    image = render(series)

    assert colour(image, 5, HEIGHT - 3) == FAILURES.name()
    assert colour(image, 5, 3) == CALLS.name()
    # Half as many calls: a bar half as high, all blue.
    assert colour(image, 25, HEIGHT - 3) == CALLS.name()
    assert colour(image, 25, 3) == "#ffffff"
    # A bucket without calls draws nothing above the baseline.
    assert column_colours(image, 15) - {"#ffffff"} <= {colour(image, 15, HEIGHT - 1)}


def test_restart_marks_are_amber_after_a_crash_and_grey_otherwise() -> None:
    series = Series(10.0, (0,) * 6, (0,) * 6, (Restart(1, True), Restart(4, False)))
    image = render(series)
    assert colour(image, 15, HEIGHT // 2) == CRASH_RESTART.name()
    assert colour(image, 45, HEIGHT // 2) == RESTART.name()


def test_a_quiet_server_is_a_flat_baseline() -> None:
    image = render(Series(10.0, (0,) * 6, (0,) * 6))
    for x in range(WIDTH):
        assert {colour(image, x, y) for y in range(HEIGHT - 1)} == {"#ffffff"}
        assert colour(image, x, HEIGHT - 1) != "#ffffff"


def test_the_activity_column_is_as_wide_as_its_buckets(qtbot: QtBot) -> None:
    model = ServersModel()
    series = Series(10.0, (0,) * 60, (0,) * 60)
    model.set_rows([ServerRow(server("a", ServerState.READY), activity=series)])
    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    delegate = ActivityDelegate(view)
    index = model.index(0, ServersModel.column("activity"))
    assert delegate.sizeHint(QStyleOptionViewItem(), index).width() >= 60 * BUCKET_PX
