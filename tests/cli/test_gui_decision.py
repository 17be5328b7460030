"""The GUI decision: whether ``mcp-tray run`` tries the window, on each OS, and the trace
a tray with no console leaves.

Strategy: the OS and the environment are injected into the one decision
(core.platform.display.gui_verdict) and into ``_try_gui``, whose GUI factory
is a recorder, so Linux with and without a display, macOS and Windows are
all decided here. The no-console trace runs mcp-tray in a real subprocess
that starts the way pythonw and a windowed .exe do (``sys.stderr`` and
``sys.stdout`` None, as CPython's docs describe them) on a broken config:
the error must reach the log file.
"""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli import tray
from core.cli.tray import NO_CONSOLE_LOG, _try_gui
from core.platform.display import gui_verdict
from core.settings.paths import Paths
from tests.support import paths
from tests.support.cli_support import home_env

ROOT = paths.REPO


@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_macos_and_windows_try_the_window_with_no_display_variable(system: str) -> None:
    assert gui_verdict(system, {}).possible


@pytest.mark.parametrize("system", ["darwin", "win32"])
@pytest.mark.parametrize("ssh", ["SSH_CONNECTION", "SSH_TTY"])
def test_an_ssh_login_to_macos_or_windows_runs_headless(system: str, ssh: str) -> None:
    verdict = gui_verdict(system, {ssh: "10.0.0.2 50000 10.0.0.1 22"})
    assert not verdict.possible and "ssh" in verdict.reason


@pytest.mark.parametrize(
    "environ",
    [{"DISPLAY": ":0"}, {"WAYLAND_DISPLAY": "wayland-0"}, {"DISPLAY": "", "WAYLAND_DISPLAY": "w"}],
)
def test_linux_tries_the_window_in_an_x11_or_wayland_session(environ: dict[str, str]) -> None:
    assert gui_verdict("linux", environ, library=lambda name: True).possible


def test_x11_without_libxcb_cursor_runs_headless_naming_the_package() -> None:
    asked: list[str] = []

    def library(name: str) -> bool:
        asked.append(name)
        return False

    verdict = gui_verdict("linux", {"DISPLAY": ":0"}, library=library)
    assert not verdict.possible
    assert asked == ["xcb-cursor"]
    assert "libxcb-cursor0" in verdict.reason and "apt install" in verdict.reason
    # Wayland, or another Qt platform the user chose, needs no X11 plugin.
    assert gui_verdict("linux", {"DISPLAY": ":0", "WAYLAND_DISPLAY": "w"}, library=library).possible
    offscreen = {"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}
    assert gui_verdict("linux", offscreen, library=library).possible
    assert asked == ["xcb-cursor"]


@pytest.mark.parametrize("system", ["linux", "freebsd14"])
def test_linux_and_other_posix_without_a_display_run_headless_and_say_why(system: str) -> None:
    verdict = gui_verdict(system, {"DISPLAY": ""})
    assert not verdict.possible
    assert "DISPLAY" in verdict.reason and "WAYLAND_DISPLAY" in verdict.reason


class Factory:
    """The GUI factory, recording whether it was asked for the tray."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self) -> None:
        self.asked += 1


@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_run_asks_for_the_tray_on_macos_and_windows_without_display_variables(
    system: str,
) -> None:
    factory = Factory()
    _try_gui(argparse.Namespace(gui=factory), system=system, environ={})
    assert factory.asked == 1


def test_run_on_linux_without_a_display_never_imports_the_tray_and_says_headless(
    capsys: pytest.CaptureFixture[str],
) -> None:
    factory = Factory()
    assert _try_gui(argparse.Namespace(gui=factory), system="linux", environ={}) is None
    assert factory.asked == 0
    assert "running headless" in capsys.readouterr().err


NO_CONSOLE = (
    "import sys; sys.stderr = None; sys.stdout = None\n"
    "from core.cli.main import main\n"
    "sys.exit(main(['run', '--headless', '--config', sys.argv[1]]))\n"
)


def test_a_tray_with_no_console_writes_its_error_to_a_log_file(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"mcpServers": {"x": {"command": 3}}}', encoding="utf-8")
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-c", NO_CONSOLE, str(config)],
        env=home_env(home),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == ""  # nothing reached the (absent) console
    log = (home / "logs" / NO_CONSOLE_LOG).read_text(encoding="utf-8")
    assert "config error" in log and str(config) in log


def test_a_tray_with_a_console_keeps_printing_there(tmp_path: Path) -> None:
    before = sys.stderr
    tray._stderr_to_log_without_console(Paths(tmp_path, tmp_path, tmp_path / "logs", tmp_path))
    assert sys.stderr is before and not (tmp_path / "logs").exists()
