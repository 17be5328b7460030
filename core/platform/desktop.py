"""What a desktop integration asks of the OS itself (core.cli.desktop_* compose the artefacts).

- macOS: the launchd domain of the logged-in user, ``gui/<uid>``, for
  ``launchctl bootstrap``/``bootout`` (``load -w`` is deprecated and fails
  silently on recent systems), and running ``launchctl``.
- Windows: the per-user ``HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run``
  key (stdlib ``winreg``), read and written through ``RunKey``; a Start-menu
  shortcut (.lnk) is made by PowerShell's ``WScript.Shell`` COM object, the
  one way the OS offers without pywin32.

Each is a small seam so tests inject a fake and check what would be written.
"""

import subprocess
import sys
from collections.abc import Sequence
from typing import Final, Protocol

#: The per-user key whose values Windows runs at logon.
RUN_KEY: Final = r"Software\Microsoft\Windows\CurrentVersion\Run"


class RunKey(Protocol):
    """The values of the Run key (name -> command line)."""

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, command: str) -> None: ...

    def delete(self, name: str) -> bool:
        """Remove ``name``; False when it was not there."""
        ...


def run_command(argv: Sequence[str]) -> "subprocess.CompletedProcess[str]":
    """Run an OS tool (launchctl, powershell) and capture what it says."""
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)


if sys.platform == "win32":
    import winreg

    class WindowsRunKey:
        def get(self, name: str) -> str | None:
            try:
                with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
                    value, _ = winreg.QueryValueEx(key, name)
            except FileNotFoundError:
                return None
            return str(value)

        def set(self, name: str, command: str) -> None:
            with winreg.CreateKeyEx(
                winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE
            ) as key:
                winreg.SetValueEx(key, name, 0, winreg.REG_SZ, command)

        def delete(self, name: str) -> bool:
            try:
                with winreg.OpenKey(
                    winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE
                ) as key:
                    winreg.DeleteValue(key, name)
            except FileNotFoundError:
                return False
            return True

    def run_key() -> RunKey:
        return WindowsRunKey()

    def launchd_domain() -> str:
        raise OSError("launchd is macOS's; Windows has none")

else:
    import os

    def run_key() -> RunKey:
        raise OSError("the Run key is Windows'; this OS has none")

    def launchd_domain() -> str:
        """The logged-in user's GUI domain, as launchctl names it."""
        return f"gui/{os.getuid()}"
