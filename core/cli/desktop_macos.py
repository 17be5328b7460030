"""macOS: a LaunchAgent that starts mcp-tray at login.

The menu entry on a Mac is the app bundle itself (``make bundle`` builds
mcp-tray.app; drag it to Applications), so ``install-desktop`` without
``--autostart`` writes nothing and says so. ``--autostart`` writes
``~/Library/LaunchAgents/<LABEL>.plist`` and loads it into the user's GUI
domain with ``launchctl bootstrap gui/UID PLIST`` (``launchctl load -w`` is
deprecated and fails silently on recent systems); a plist loaded before is
booted out first, so a reinstall takes the new one. ``--uninstall`` boots
it out and removes the file.

The plist: ``ProgramArguments`` = the launcher + ``run --minimized``;
``RunAtLoad``; ``ProcessType`` Interactive (a GUI app, not throttled);
``LimitLoadToSessionType`` Aqua (only in a graphical login, never over
ssh); and ``EnvironmentVariables`` with ``MCP_TRAY_HOME`` when it is set.
"""

import plistlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from core.base.envvars import HOME_ENV
from core.cli.desktop_entry import AUTOSTART_ARGS, DesktopResult, home_override, launcher_argv
from core.platform.desktop import launchd_domain, run_command
from core.platform.files import private_dirs, set_mode

#: The LaunchAgent's label (reverse DNS, as launchd expects) and file name.
LABEL: Final = "io.github.mcp-tray"
BUNDLE_NOTE: Final = (
    "on macOS the app bundle is the menu entry: drag mcp-tray.app to Applications "
    "(make bundle builds it); install-desktop --autostart starts it at login"
)

Runner = Callable[[Sequence[str]], Any]


def agent_path(home: Path | None = None) -> Path:
    return (home or Path.home()) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def agent(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The LaunchAgent, as plistlib writes it."""
    plist: dict[str, Any] = {
        "Label": LABEL,
        "ProgramArguments": [*launcher_argv(), *AUTOSTART_ARGS],
        "RunAtLoad": True,
        "ProcessType": "Interactive",
        "LimitLoadToSessionType": "Aqua",
    }
    home = home_override(environ)
    if home is not None:
        plist["EnvironmentVariables"] = {HOME_ENV: home}
    return plist


def install(
    *,
    autostart: bool = False,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    run: Runner = run_command,
    domain: Callable[[], str] = launchd_domain,
) -> DesktopResult:
    result = DesktopResult(notes=[BUNDLE_NOTE])
    if not autostart:
        return result
    path = agent_path(home)
    private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(plistlib.dumps(agent(environ)))
    set_mode(temporary, 0o644)
    temporary.replace(path)
    result.written.append(path)
    target = domain()
    # A copy loaded earlier keeps its old arguments until it is booted out.
    run(["launchctl", "bootout", f"{target}/{LABEL}"])
    loaded = run(["launchctl", "bootstrap", target, str(path)])
    if getattr(loaded, "returncode", 0) == 0:
        result.notes.append(f"loaded it with launchctl bootstrap {target}: it starts at login")
    else:
        why = (getattr(loaded, "stderr", "") or "").strip()
        result.notes.append(
            f"launchctl bootstrap {target} {path} failed ({why}); it loads at the next login"
        )
    return result


def uninstall(
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    run: Runner = run_command,
    domain: Callable[[], str] = launchd_domain,
) -> DesktopResult:
    result = DesktopResult()
    path = agent_path(home)
    if not path.exists():
        return result
    run(["launchctl", "bootout", f"{domain()}/{LABEL}"])
    path.unlink()
    result.removed.append(path)
    return result
