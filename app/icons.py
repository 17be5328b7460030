"""Icons from resources/icons: each colour also has its own shape.

A server's row shows the icon its state would give the tray (``state_icon``),
so the table and the tray speak one visual language: green disc, amber
triangle, red octagon, grey ring; a sleeping server (on demand) a green ring
with a crescent, while the tray stays green.
"""

from functools import cache

from PySide6.QtGui import QIcon

from app.status import TrayColour, state_colour
from core.base.resources import icons_dir
from core.base.states import ServerState

ICONS = icons_dir()


@cache
def tray_icon(colour: TrayColour) -> QIcon:
    return QIcon(str(ICONS / f"tray-{colour.value}.svg"))


def state_icon(state: ServerState) -> QIcon:
    if state is ServerState.SLEEPING:
        # The tray stays green for it; its row says "asleep, fine" in a shape of its own.
        return _sleeping_icon()
    return tray_icon(state_colour(state))


@cache
def _sleeping_icon() -> QIcon:
    return QIcon(str(ICONS / "state-sleeping.svg"))


@cache
def app_icon() -> QIcon:
    return QIcon(str(ICONS / "mcp-tray.svg"))
