"""Whether this OS can show the tray's window now: the one GUI decision.

- Linux and the other POSIX systems: an X11 or Wayland session, which
  names itself in ``DISPLAY`` or ``WAYLAND_DISPLAY``; without either (ssh,
  a container, CI) Qt has nothing to draw on, so the tray runs headless.
- macOS: the window server belongs to the logged-in user's GUI session,
  and nothing in the environment names it (no ``DISPLAY``; XQuartz sets one
  for its own X11 apps only). The .app, its LaunchAgent and a Terminal are
  in that session, so the window is tried; an ssh login is not (Apple's
  TN2083: a non-GUI session cannot reach the window server), so it runs
  headless.
- Windows: the interactive desktop has no variable either; a windowed .exe,
  the Run value and a console are all on it, so the window is tried; an
  OpenSSH session is not on it (its windows would show nowhere).

On X11 one more thing is checked: Qt 6.5 and later load their X11 plugin
only with libxcb-cursor, which many distributions do not install by default.
Without it Qt ends the process with a message about "reinstalling the
application"; mcp-tray says which package is missing and runs headless
instead.

The OS, the environment and the library lookup are injected, so tests decide
for all three here.
"""

import ctypes.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from core.platform.osname import current_os


@dataclass(frozen=True)
class GuiVerdict:
    """Whether to try the window, and why (said when the answer is no)."""

    possible: bool
    reason: str


#: What Qt's X11 plugin needs that distributions leave out, and where to get it.
XCB_CURSOR_MISSING = (
    "Qt's X11 plugin needs libxcb-cursor, which is not installed "
    "(Debian, Ubuntu: sudo apt install libxcb-cursor0; Fedora: sudo dnf install "
    "xcb-util-cursor; Arch: sudo pacman -S xcb-util-cursor)"
)


def has_library(name: str) -> bool:
    """Whether the dynamic linker finds ``lib{name}``."""
    return ctypes.util.find_library(name) is not None


def gui_verdict(
    system: str | None = None,
    environ: Mapping[str, str] | None = None,
    library: Callable[[str], bool] = has_library,
) -> GuiVerdict:
    """Whether ``system`` (this OS by default) can show a GUI in ``environ`` now."""
    system = system or current_os()
    env = os.environ if environ is None else environ
    if system in ("darwin", "win32"):
        if env.get("SSH_CONNECTION") or env.get("SSH_TTY"):
            return GuiVerdict(False, "an ssh session, which cannot reach the desktop")
        if system == "darwin":
            return GuiVerdict(True, "macOS: the logged-in user's window server")
        return GuiVerdict(True, "Windows: the interactive desktop")
    if env.get("WAYLAND_DISPLAY"):
        return GuiVerdict(True, f"WAYLAND_DISPLAY={env['WAYLAND_DISPLAY']}")
    if env.get("DISPLAY"):
        platform = env.get("QT_QPA_PLATFORM", "xcb")
        if platform.startswith("xcb") and not library("xcb-cursor"):
            return GuiVerdict(False, XCB_CURSOR_MISSING)
        return GuiVerdict(True, f"DISPLAY={env['DISPLAY']}")
    return GuiVerdict(False, "no display (DISPLAY/WAYLAND_DISPLAY unset)")
