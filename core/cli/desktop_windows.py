"""Windows: a Start-menu shortcut, and the Run value that starts mcp-tray at logon.

- The shortcut: ``%APPDATA%\\Microsoft\\Windows\\Start Menu\\Programs\\mcp-tray.lnk``,
  pointing at the windowed launcher (``mcp-tray-gui.exe``, ``pythonw``, or
  the bundle's ``mcp-tray.exe``: no console window behind the tray). A .lnk
  is a binary COM object; PowerShell's ``WScript.Shell`` makes it, its
  values handed over in environment variables so no quoting can go wrong.
- ``--autostart``: the value ``mcp-tray`` of
  ``HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run``, a command line
  of the launcher + ``run --minimized``.

A Run value and a shortcut cannot set a variable, so with ``MCP_TRAY_HOME``
set the launcher is given ``--home DIR`` (core.cli.main puts it back into
the environment). No cmd.exe: its parsing is not the C runtime's that
``subprocess.list2cmdline`` writes for (a quoted ``set "…"`` left ``&&``
inside quotes), and it would flash a console at logon. The command line
is parsed by the launcher's C runtime (CommandLineToArgvW's rules), which
``list2cmdline`` quotes for; a Windows path holds no ``"``.
"""

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from core.cli.launcher import (
    APP_ID,
    AUTOSTART_ARGS,
    DesktopResult,
    home_override,
    launcher_argv,
)
from core.platform.desktop import RunKey, run_key
from core.platform.files import private_dirs

#: The Run value's name.
RUN_VALUE: Final = APP_ID
#: Fills in a shortcut from the LNK_* variables (WScript.Shell's COM object).
SHORTCUT_SCRIPT: Final = (
    "$s = (New-Object -ComObject WScript.Shell).CreateShortcut($env:LNK_PATH); "
    "$s.TargetPath = $env:LNK_TARGET; $s.Arguments = $env:LNK_ARGS; "
    "$s.Description = 'mcp-tray: your MCP servers, shared with every AI client'; "
    "$s.Save()"
)

Runner = Callable[..., Any]


def start_menu_shortcut(environ: Mapping[str, str], home: Path | None = None) -> Path:
    appdata = environ.get("APPDATA", "")
    base = Path(appdata) if appdata else (home or Path.home()) / "AppData" / "Roaming"
    return base / "Microsoft" / "Windows" / "Start Menu" / "Programs" / f"{APP_ID}.lnk"


def command_argv(extra: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[str]:
    """The windowed launcher, ``--home DIR`` when ``MCP_TRAY_HOME`` is set, then ``extra``."""
    home = home_override(environ)
    return [
        *launcher_argv(console=False, system="win32"),
        *(("--home", home) if home is not None else ()),
        *extra,
    ]


def run_value(environ: Mapping[str, str] | None = None) -> str:
    """The Run value's command line."""
    return subprocess.list2cmdline(command_argv(AUTOSTART_ARGS, environ))


def shortcut_request(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """How PowerShell is asked to make the shortcut: its argv and its extra environment."""
    target, *arguments = command_argv((), environ)
    return {
        "argv": ["powershell.exe", "-NoProfile", "-NonInteractive", "-Command", SHORTCUT_SCRIPT],
        "env": {
            "LNK_PATH": str(path),
            "LNK_TARGET": target,
            "LNK_ARGS": subprocess.list2cmdline(arguments),
        },
    }


def _powershell(request: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    env = {**os.environ, **environ, **request["env"]}
    return subprocess.run(
        request["argv"], env=env, capture_output=True, text=True, check=False, timeout=60
    )


def install(
    *,
    autostart: bool = False,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    key: RunKey | None = None,
    shell: Runner = _powershell,
) -> DesktopResult:
    env = os.environ if environ is None else environ
    result = DesktopResult()
    shortcut = start_menu_shortcut(env, home)
    private_dirs(shortcut.parent)
    made = shell(shortcut_request(shortcut, environ), env)
    if getattr(made, "returncode", 0) == 0:
        result.written.append(shortcut)
    else:
        why = (getattr(made, "stderr", "") or "").strip()
        result.notes.append(f"the Start-menu shortcut could not be made ({why})")
    if autostart:
        (key or run_key()).set(RUN_VALUE, run_value(environ))
        result.written.append(
            f"HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run\\{RUN_VALUE}"
        )
    return result


def uninstall(
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    key: RunKey | None = None,
) -> DesktopResult:
    env = os.environ if environ is None else environ
    result = DesktopResult()
    shortcut = start_menu_shortcut(env, home)
    if shortcut.exists():
        shortcut.unlink()
        result.removed.append(shortcut)
    if (key or run_key()).delete(RUN_VALUE):
        result.removed.append(
            f"HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run\\{RUN_VALUE}"
        )
    return result
