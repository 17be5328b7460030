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

from collections.abc import Mapping

from core.cli.launcher import DesktopResult
from core.platform.osname import current_os


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
