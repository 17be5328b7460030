"""The command that starts mcp-tray, for everything that launches it: desktop
entries, login items, client snippets and the bridge's autostart.

``launcher_argv`` finds the launcher (the bundle's executable, the console or
windowed script, else this interpreter); ``home_override`` is the
``MCP_TRAY_HOME`` a launched process must be given. The per-OS desktop
modules (core.cli.desktop_linux, desktop_macos, desktop_windows) build on
these, and core.cli.desktop_entry chooses among them: this module imports
none of them, so nothing goes round in a circle.
"""

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from core.base.envvars import HOME_ENV
from core.platform.osname import current_os

APP_ID: Final = "mcp-tray"
#: The Windows bundle's console twin of its windowed launcher (packaging/bundle.py).
CLI_TWIN: Final = "mcp-tray-cli"
#: The windowed twin of the ``mcp-tray`` console script (pyproject's gui-scripts).
GUI_SCRIPT: Final = "mcp-tray-gui"
#: What the login entry adds to the launcher: the tray only, no window.
AUTOSTART_ARGS: Final = ("run", "--minimized")


@dataclass(frozen=True)
class DesktopResult:
    written: list[Path | str] = field(default_factory=list)
    removed: list[Path | str] = field(default_factory=list)
    #: Lines for the user beyond the paths (what was loaded, what to do by hand).
    notes: list[str] = field(default_factory=list)


def launcher_argv(*, console: bool = True, system: str | None = None) -> list[str]:
    """The absolute command that starts mcp-tray.

    The frozen bundle's own executable (on Windows the console twin for the
    command line and the bridge, the windowed one for the desktop when
    ``console`` is False); else, for the Windows desktop (``console`` False),
    the windowed ``mcp-tray-gui`` script pip and pipx make (a console script
    would hold a console window open for the tray's whole life), else
    ``pythonw -m app.entry``; else the ``mcp-tray`` script beside
    ``sys.executable`` (a venv; ``mcp-tray.exe`` on Windows), else the one on
    PATH, else this interpreter with ``-m app.entry``.
    """
    if getattr(sys, "frozen", False):
        executable = Path(sys.executable).resolve()
        wanted = executable.with_name((CLI_TWIN if console else APP_ID) + executable.suffix)
        return [str(wanted if wanted.is_file() else executable)]
    if not console and (system or current_os()) == "win32":
        windowed = _windowed_launcher(Path(sys.executable).parent)
        if windowed is not None:
            return windowed
    beside = shutil.which(APP_ID, path=str(Path(sys.executable).parent))
    if beside:
        return [os.path.abspath(beside)]
    found = shutil.which(APP_ID)
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "app.entry"]


def _windowed_launcher(folder: Path) -> list[str] | None:
    """Windows: ``mcp-tray-gui.exe`` beside the interpreter (a venv's or pipx's
    Scripts folder) or on PATH (``pip install --user``), else ``pythonw.exe``
    beside it; None when neither is there."""
    for script in (folder / f"{GUI_SCRIPT}.exe", shutil.which(f"{GUI_SCRIPT}.exe")):
        if script is not None and Path(script).is_file():
            return [os.path.abspath(script)]
    pythonw = folder / "pythonw.exe"
    if pythonw.is_file():
        return [os.path.abspath(pythonw), "-m", "app.entry"]
    return None


def home_override(environ: Mapping[str, str] | None = None) -> str | None:
    """``MCP_TRAY_HOME`` as an absolute path when it is set, else None.

    What a command launched from a snippet or a desktop entry must be given
    to find the same tray as the command that wrote it: clients and desktop
    sessions start it without this shell's environment. Resolved as
    ``default_paths`` resolves it, since the launched process has another
    working directory.
    """
    env = os.environ if environ is None else environ
    value = env.get(HOME_ENV, "")
    if not value:
        return None
    return str(Path(value).expanduser().resolve())
