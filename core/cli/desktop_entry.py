"""``mcp-tray install-desktop [--autostart] [--uninstall]``, on each OS.

What a person launches mcp-tray from, and what starts it at login:

- Linux (core.cli.desktop_linux): a freedesktop menu entry with its icon,
  and an XDG autostart entry;
- macOS (core.cli.desktop_macos): the app bundle is the menu entry (drag
  mcp-tray.app to Applications); ``--autostart`` writes a LaunchAgent plist
  to ``~/Library/LaunchAgents`` and loads it with ``launchctl bootstrap
  gui/UID``;
- Windows (core.cli.desktop_windows): a Start-menu shortcut, and with
  ``--autostart`` the ``HKCU\\…\\CurrentVersion\\Run`` value.

Every artefact starts the launcher (``launcher_argv``); the login one adds
``run --minimized``, so a login puts mcp-tray in the tray without a window
in the user's face. When ``MCP_TRAY_HOME`` is set for the installing
command, each artefact carries it: a session starts them without the
shell's environment, and a tray started under another home would not be
the one the user set up. The OS is injected (``system``), so tests check
the artefacts of all three on Linux.
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


def install(
    *,
    autostart: bool = False,
    environ: Mapping[str, str] | None = None,
    system: str | None = None,
) -> DesktopResult:
    """Put mcp-tray where people launch it (and, with ``autostart``, start it at login)."""
    system = system or current_os()
    if system == "darwin":
        from core.cli import desktop_macos

        return desktop_macos.install(autostart=autostart, environ=environ)
    if system == "win32":
        from core.cli import desktop_windows

        return desktop_windows.install(autostart=autostart, environ=environ)
    from core.cli import desktop_linux

    return desktop_linux.install(autostart=autostart, environ=environ)


def uninstall(environ: Mapping[str, str] | None = None, system: str | None = None) -> DesktopResult:
    """Remove what ``install`` put in place; what is missing is fine."""
    system = system or current_os()
    if system == "darwin":
        from core.cli import desktop_macos

        return desktop_macos.uninstall(environ=environ)
    if system == "win32":
        from core.cli import desktop_windows

        return desktop_windows.uninstall(environ=environ)
    from core.cli import desktop_linux

    return desktop_linux.uninstall(environ=environ)
