"""What Windows runs from the Start-menu shortcut and the Run value: the windowed
launcher, the home as ``--home``, and a command line its C runtime parses back.

Strategy: the OS is injected (``system="win32"``) and the interpreter's
folder is a tmp folder holding the files pip or pipx would put there
(``mcp-tray-gui.exe``, ``pythonw.exe``), so the choice of launcher is
made here on Linux. The command line is parsed with a model of
CommandLineToArgvW written from Microsoft's "Parsing C command-line
arguments" rules, and the model is first checked against the examples
that page publishes. ``--home`` is checked end to end: a real
``mcp-tray --home DIR`` subprocess prints a snippet naming that home.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli import desktop_windows
from core.cli.launcher import GUI_SCRIPT, launcher_argv
from tests.support.cli_support import NO_KEYRING, run_mcp_tray
from tests.support.windows_argv import command_line_to_argv


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('"a b c" d e', ["a b c", "d", "e"]),
        ('"ab\\"c" "\\\\" d', ['ab"c', "\\", "d"]),
        ('a\\\\\\b d"e f"g h', ["a\\\\\\b", "de fg", "h"]),
        ('a\\\\\\"b c d', ['a\\"b', "c", "d"]),
        ('a\\\\\\\\"b c" d e', ["a\\\\b c", "d", "e"]),
        ('a"b"" c d', ['ab" c d']),
    ],
)
def test_the_command_line_model_splits_microsofts_published_examples_as_documented(
    line: str, expected: list[str]
) -> None:
    assert command_line_to_argv(f'"C:\\Program Files\\prog.exe" {line}')[1:] == expected


def test_the_model_reads_the_program_name_without_escapes() -> None:
    assert command_line_to_argv('"C:\\odd dir\\p.exe"x y') == ["C:\\odd dir\\p.exe", "x", "y"]
    assert command_line_to_argv("C:\\p.exe") == ["C:\\p.exe"]


@pytest.mark.parametrize(
    "home",
    [
        "C:\\Users\\Ana María\\mcp tray",
        "C:\\Users\\me\\tray && calc",
        "C:\\a&b^c(d)\\x y\\",
        "D:\\",
        "\\\\server\\share\\tray home",
    ],
)
def test_a_windows_command_line_with_a_home_parses_back_to_the_launcher_and_the_home(
    home: str,
) -> None:
    argv = ["C:\\Program Files\\mcp-tray\\Scripts\\mcp-tray-gui.exe", "--home", home, "run"]
    assert command_line_to_argv(subprocess.list2cmdline(argv)) == argv


def _scripts_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> Path:
    folder = tmp_path / "Program Files" / "mcp-tray venv" / "Scripts"
    folder.mkdir(parents=True)
    for name in ("python.exe", *names):
        (folder / name).write_bytes(b"MZ")
    monkeypatch.setattr(sys, "executable", str(folder / "python.exe"))
    return folder


def test_the_windows_desktop_launcher_is_the_gui_script_beside_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _scripts_folder(
        tmp_path, monkeypatch, "mcp-tray.exe", f"{GUI_SCRIPT}.exe", "pythonw.exe"
    )
    assert launcher_argv(console=False, system="win32") == [str(folder / "mcp-tray-gui.exe")]


def test_without_the_gui_script_the_windows_desktop_launcher_is_pythonw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _scripts_folder(tmp_path, monkeypatch, "mcp-tray.exe", "pythonw.exe")
    assert launcher_argv(console=False, system="win32") == [
        str(folder / "pythonw.exe"),
        "-m",
        "app.entry",
    ]


@pytest.mark.parametrize(
    ("console", "system"), [(True, "win32"), (False, "linux"), (False, "darwin")]
)
def test_the_command_line_and_other_oses_never_get_the_windowed_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, console: bool, system: str
) -> None:
    _scripts_folder(tmp_path, monkeypatch, f"{GUI_SCRIPT}.exe", "pythonw.exe")
    launcher = launcher_argv(console=console, system=system)
    assert not any(GUI_SCRIPT in part or "pythonw" in part for part in launcher)


def test_the_run_value_with_a_home_starts_the_gui_script_with_home_and_no_cmd_exe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _scripts_folder(tmp_path, monkeypatch, f"{GUI_SCRIPT}.exe")
    home = tmp_path / "my tray && co"
    value = desktop_windows.run_value({"MCP_TRAY_HOME": str(home)})
    assert command_line_to_argv(value) == [
        str(folder / "mcp-tray-gui.exe"),
        "--home",
        str(home),
        "run",
        "--minimized",
    ]


def test_the_shortcut_with_a_home_passes_it_in_its_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _scripts_folder(tmp_path, monkeypatch, f"{GUI_SCRIPT}.exe")
    home = tmp_path / "tray home"
    request = desktop_windows.shortcut_request(tmp_path / "x.lnk", {"MCP_TRAY_HOME": str(home)})
    target, arguments = request["env"]["LNK_TARGET"], request["env"]["LNK_ARGS"]
    # The shell runs the target with the shortcut's arguments appended.
    line = subprocess.list2cmdline([target]) + " " + arguments
    assert command_line_to_argv(line) == [str(folder / "mcp-tray-gui.exe"), "--home", str(home)]


def test_home_on_the_command_line_is_mcp_tray_home_for_the_whole_process(tmp_path: Path) -> None:
    home = tmp_path / "given home"
    env = {"PATH": "/usr/bin:/bin", "PYTHON_KEYRING_BACKEND": NO_KEYRING, "HOME": str(tmp_path)}
    done = run_mcp_tray(env, "--home", str(home), "client-config", "cursor", "--server", "echo")
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)["mcpServers"].values()
    assert entry["env"]["MCP_TRAY_HOME"] == str(home)
