"""macOS: a LaunchAgent that starts mcp-tray at login.

The menu entry on a Mac is the app bundle itself (``make bundle`` builds
mcp-tray.app; drag it to Applications), so ``install-desktop`` without
``--autostart`` writes nothing and says so. ``--autostart`` writes
``~/Library/LaunchAgents/<LABEL>.plist`` and loads it into the user's GUI
domain with ``launchctl bootstrap gui/UID PLIST`` (``launchctl load -w`` is
deprecated and fails silently on recent systems); a plist loaded before is
booted out first, so a reinstall takes the new one. ``bootout`` returns
before launchd has torn the old job down, and a ``bootstrap`` into that
moment fails with "Bootstrap failed: 5: Input/output error" (or 37,
"Operation already in progress"), leaving nothing loaded until the next
login: so the reinstall waits, bounded, until ``launchctl print`` no longer
finds the label, and retries a bootstrap that fails with 5 or 37 a few
times. (``kickstart -k`` would restart the loaded job without that race,
but with its old arguments: a reinstall must reload the plist.)
``--uninstall`` boots it out and removes the file.

The plist: ``ProgramArguments`` = the launcher + ``run --minimized``;
``RunAtLoad``; ``ProcessType`` Interactive (a GUI app, not throttled);
``LimitLoadToSessionType`` Aqua (only in a graphical login, never over
ssh); and ``EnvironmentVariables`` with ``MCP_TRAY_HOME`` when it is set.
"""

import plistlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from core.base.envvars import HOME_ENV
from core.cli.launcher import AUTOSTART_ARGS, DesktopResult, home_override, launcher_argv
from core.platform.desktop import launchd_domain, run_command
from core.platform.files import private_dirs, set_mode

#: The LaunchAgent's label (reverse DNS, as launchd expects) and file name.
LABEL: Final = "io.github.mcp-tray"
BUNDLE_NOTE: Final = (
    "on macOS the app bundle is the menu entry: drag mcp-tray.app to Applications "
    "(make bundle builds it); install-desktop --autostart starts it at login"
)

#: How long a booted-out agent may take to leave launchd (it goes after bootout returns).
BOOTOUT_SETTLE_SECONDS: Final = 10.0
#: How often ``launchctl print`` is asked whether the label is gone yet.
SETTLE_POLL_SECONDS: Final = 0.05
#: Bootstraps tried while launchd answers "still unloading", and the pause before the next.
BOOTSTRAP_ATTEMPTS: Final = 5
BOOTSTRAP_RETRY_SECONDS: Final = 0.2
#: launchctl's exit codes for a job still on its way out: EIO and EALREADY.
STILL_UNLOADING: Final = frozenset({5, 37})

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
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
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
    service = f"{target}/{LABEL}"
    settled = True
    if _found(run, service):
        # A copy loaded earlier keeps its old arguments until it is booted out.
        run(["launchctl", "bootout", service])
        settled = _gone_within(run, service, BOOTOUT_SETTLE_SECONDS, sleep, clock)
    for attempt in range(BOOTSTRAP_ATTEMPTS):
        loaded = run(["launchctl", "bootstrap", target, str(path)])
        code = getattr(loaded, "returncode", 0)
        if code not in STILL_UNLOADING or attempt == BOOTSTRAP_ATTEMPTS - 1:
            break
        sleep(BOOTSTRAP_RETRY_SECONDS)
        _gone_within(run, service, BOOTOUT_SETTLE_SECONDS, sleep, clock)
    if code == 0:
        result.notes.append(f"loaded it with launchctl bootstrap {target}: it starts at login")
    else:
        why = (getattr(loaded, "stderr", "") or "").strip()
        if not settled:
            why += f"; the old agent was still unloading {BOOTOUT_SETTLE_SECONDS:g} s after bootout"
        result.notes.append(
            f"launchctl bootstrap {target} {path} failed ({why}); it loads at the next login"
        )
    return result


def _found(run: Runner, service: str) -> bool:
    """Whether launchd has ``service`` loaded (``launchctl print`` finds it)."""
    return bool(getattr(run(["launchctl", "print", service]), "returncode", 1) == 0)


def _gone_within(
    run: Runner,
    service: str,
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> bool:
    """Wait until launchd no longer has ``service``; False when ``timeout`` ran out first."""
    deadline = clock() + timeout
    while _found(run, service):
        if clock() >= deadline:
            return False
        sleep(SETTLE_POLL_SECONDS)
    return True


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
