"""``install-desktop`` on macOS (a LaunchAgent) and Windows (the Run value, a Start-menu shortcut).

Strategy: the OS-facing seams are injected (``launchctl`` and PowerShell as
recorders, the Run key as a dict, the launchd domain as a constant, the
home as tmp_path), so the artefacts of both OSes are checked here on Linux:
the plist is parsed back with plistlib, the Run value is the command line
Windows would run, and each OS tool is asked exactly what it would be asked.
"""

import plistlib
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from core.cli import desktop_entry, desktop_macos, desktop_windows
from core.cli.launcher import launcher_argv

DOMAIN = "gui/501"


class Recorder:
    """Stands in for an OS tool: writes down each command, answers success
    (``launchctl print``: the agent is not loaded, unless ``answers`` says otherwise)."""

    def __init__(self, returncode: int = 0, answers: dict[str, int] | None = None) -> None:
        self.calls: list[Any] = []
        self.returncode = returncode
        self.answers = {"print": 113, **(answers or {})}

    def __call__(self, *args: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(args[0] if len(args) == 1 else args)
        verb = args[0][1] if len(args) == 1 and len(args[0]) > 1 else ""
        code = self.answers.get(verb, self.returncode)
        return subprocess.CompletedProcess(args, code, "", "no such domain")


class DictRunKey:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def set(self, name: str, command: str) -> None:
        self.values[name] = command

    def delete(self, name: str) -> bool:
        return self.values.pop(name, None) is not None


def launchctl(calls: Sequence[Any]) -> list[list[str]]:
    return [list(call) for call in calls]


def test_the_macos_autostart_is_a_launch_agent_loaded_with_bootstrap(tmp_path: Path) -> None:
    run = Recorder()
    result = desktop_macos.install(
        autostart=True, environ={}, home=tmp_path, run=run, domain=lambda: DOMAIN
    )

    path = tmp_path / "Library" / "LaunchAgents" / "io.github.mcp-tray.plist"
    assert result.written == [path]
    agent = plistlib.loads(path.read_bytes())
    assert agent == {
        "Label": "io.github.mcp-tray",
        "ProgramArguments": [*launcher_argv(), "run", "--minimized"],
        "RunAtLoad": True,
        "ProcessType": "Interactive",
        "LimitLoadToSessionType": "Aqua",
    }
    # Nothing loaded before (print finds no label): straight to bootstrap; never `load`.
    assert launchctl(run.calls) == [
        ["launchctl", "print", f"{DOMAIN}/io.github.mcp-tray"],
        ["launchctl", "bootstrap", DOMAIN, str(path)],
    ]
    assert any("starts at login" in note for note in result.notes)


def test_the_launch_agent_carries_mcp_tray_home_and_a_failed_bootstrap_is_said(
    tmp_path: Path,
) -> None:
    run = Recorder(returncode=5)
    result = desktop_macos.install(
        autostart=True,
        environ={"MCP_TRAY_HOME": str(tmp_path / "tray")},
        home=tmp_path,
        run=run,
        domain=lambda: DOMAIN,
        sleep=lambda seconds: None,
    )
    agent = plistlib.loads(desktop_macos.agent_path(tmp_path).read_bytes())
    assert agent["EnvironmentVariables"] == {"MCP_TRAY_HOME": str(tmp_path / "tray")}
    assert any("failed (no such domain); it loads at the next login" in n for n in result.notes)


def test_on_macos_without_autostart_nothing_is_written_and_the_bundle_is_named(
    tmp_path: Path,
) -> None:
    result = desktop_entry.install(system="darwin", environ={})
    assert result.written == []
    assert "mcp-tray.app" in result.notes[0]


def test_the_macos_uninstall_boots_the_agent_out_and_removes_it(tmp_path: Path) -> None:
    run = Recorder()
    desktop_macos.install(autostart=True, environ={}, home=tmp_path, run=run, domain=lambda: DOMAIN)
    run.calls.clear()
    result = desktop_macos.uninstall(home=tmp_path, run=run, domain=lambda: DOMAIN)
    assert result.removed == [desktop_macos.agent_path(tmp_path)]
    assert not desktop_macos.agent_path(tmp_path).exists()
    assert launchctl(run.calls) == [["launchctl", "bootout", f"{DOMAIN}/io.github.mcp-tray"]]
    assert desktop_macos.uninstall(home=tmp_path, run=run, domain=lambda: DOMAIN).removed == []


def test_the_windows_autostart_is_the_run_value_and_the_menu_entry_a_shortcut(
    tmp_path: Path,
) -> None:
    key = DictRunKey()
    shell = Recorder()
    environ = {"APPDATA": str(tmp_path / "Roaming")}
    result = desktop_windows.install(autostart=True, environ=environ, key=key, shell=shell)

    launcher = launcher_argv(console=False, system="win32")
    assert key.values == {"mcp-tray": subprocess.list2cmdline([*launcher, "run", "--minimized"])}
    shortcut = tmp_path / "Roaming/Microsoft/Windows/Start Menu/Programs/mcp-tray.lnk"
    [(request, _env)] = shell.calls
    assert request["argv"][:2] == ["powershell.exe", "-NoProfile"]
    assert "CreateShortcut($env:LNK_PATH)" in request["argv"][-1]
    assert request["env"] == {
        "LNK_PATH": str(shortcut),
        "LNK_TARGET": launcher[0],
        "LNK_ARGS": subprocess.list2cmdline(launcher[1:]),
    }
    assert shortcut in result.written
    assert any(str(w).endswith("CurrentVersion\\Run\\mcp-tray") for w in result.written)


@pytest.mark.parametrize("autostart", [False, True])
def test_the_windows_uninstall_removes_the_shortcut_and_the_run_value(
    tmp_path: Path, autostart: bool
) -> None:
    key = DictRunKey()
    environ = {"APPDATA": str(tmp_path / "Roaming")}
    desktop_windows.install(autostart=autostart, environ=environ, key=key, shell=Recorder())
    shortcut = desktop_windows.start_menu_shortcut(environ)
    shortcut.write_bytes(b"lnk")  # what PowerShell would have made

    result = desktop_windows.uninstall(environ=environ, key=key)

    assert shortcut in result.removed
    assert (len(result.removed) == 2) is autostart
    assert key.values == {}
