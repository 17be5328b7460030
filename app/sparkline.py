"""Sparklines of a server's recent calls, failures and restarts, painted with QPainter.

One bar per bucket of the activity history (core.serving.observe.activity), scaled
to the busiest bucket of that row: calls in blue with the failed part in
red at its foot, a restart as a thin full-height mark (amber when a crash
caused it, grey when a person or a config edit did). A quiet server is a
flat baseline. No plotting library: a few rectangles per row, painted only
when Qt repaints the cell (the model signals a row only when its series
changed, at most once per bucket).
"""

from typing import Final

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, QSize
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from app.models import SERIES_ROLE
from core.serving.observe.activity import Series

CALLS: Final = QColor("#3b7dd8")
FAILURES: Final = QColor("#d23030")
#: The tray's amber: a restart after a crash is the amber state passing by.
CRASH_RESTART: Final = QColor("#f0a020")
RESTART: Final = QColor("#8a8a8a")
BASELINE: Final = QColor(128, 128, 128, 110)
#: Pixels per bucket in the size hint: 60 buckets -> 180 px, bars of 2 px with a 1 px gap.
BUCKET_PX: Final = 3
PADDING: Final = 3


def paint_series(
    painter: QPainter, rect: QRectF, series: Series, calls_colour: QColor = CALLS
) -> None:
    """Draw ``series`` inside ``rect`` (oldest bucket at the left); ``calls_colour``
    lets a selected row draw its calls in the selection's text colour."""
    count = len(series.calls)
    if count == 0 or rect.width() <= 0 or rect.height() <= 0:
        return
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
    width = rect.width() / count
    bottom = rect.bottom()
    painter.fillRect(QRectF(rect.left(), bottom - 1, rect.width(), 1), BASELINE)
    peak = max(series.calls)
    if peak:
        scale = (rect.height() - 1) / peak
        for i, calls in enumerate(series.calls):
            if not calls:
                continue
            left = rect.left() + i * width
            # A gap between bars once there is room for one: steady traffic
            # reads as bars, not as a block.
            bar = width - 1.0 if width >= 3 else max(1.0, width - 0.5)
            height = max(2.0, calls * scale)
            failed = min(calls, series.failures[i])
            failed_height = max(2.0, failed * scale) if failed else 0.0
            painter.fillRect(
                QRectF(left, bottom - height, bar, height - failed_height), calls_colour
            )
            if failed_height:
                painter.fillRect(QRectF(left, bottom - failed_height, bar, failed_height), FAILURES)
    for mark in series.restarts:
        x = rect.left() + (mark.bucket + 0.5) * width
        colour = CRASH_RESTART if mark.after_crash else RESTART
        painter.fillRect(QRectF(x - 0.5, rect.top(), 1.5, rect.height()), colour)
        painter.fillRect(QRectF(x - 2, rect.top(), 4.5, 2), colour)
    painter.restore()


class ActivityDelegate(QStyledItemDelegate):
    """Paints the ``SERIES_ROLE`` value of a cell as a sparkline (the text stays for tooltips,
    sorting and screen readers)."""

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        item = QStyleOptionViewItem(option)
        self.initStyleOption(item, index)
        item.text = ""
        widget = item.widget
        style = widget.style() if widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, item, painter, widget)
        series = index.data(SERIES_ROLE)
        if isinstance(series, Series):
            area = QRectF(item.rect).adjusted(PADDING + 1, PADDING, -PADDING - 1, -PADDING)
            selected = bool(item.state & QStyle.StateFlag.State_Selected)
            calls = item.palette.highlightedText().color() if selected else CALLS
            paint_series(painter, area, series, calls)

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        series = index.data(SERIES_ROLE)
        buckets = len(series.calls) if isinstance(series, Series) else 60
        hint = super().sizeHint(option, index)
        return QSize(buckets * BUCKET_PX + 2 * (PADDING + 1), hint.height())
