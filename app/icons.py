"""Tray icons from resources/icons: each colour also has its own shape."""

from functools import cache
from pathlib import Path

from PySide6.QtGui import QIcon

from app.status import TrayColour

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"


@cache
def tray_icon(colour: TrayColour) -> QIcon:
    return QIcon(str(ICONS / f"tray-{colour.value}.svg"))


@cache
def app_icon() -> QIcon:
    return QIcon(str(ICONS / "mcp-tray.svg"))
