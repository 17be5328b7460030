"""``mcp-tray install-desktop``: the freedesktop menu entry, its icon and the autostart entry.

Strategy: point XDG_DATA_HOME and XDG_CONFIG_HOME (and HOME, so a fallback
could never touch the real one) at tmp_path, call core.cli.desktop_entry directly
for the file contents and the Exec rules, then run the real CLI in a
subprocess for exit codes and output. When ``desktop-file-validate`` is
installed the written entries must pass it; without it that one check is
skipped.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.base.errors import DesktopEntryError
from core.cli import desktop_linux
from core.cli.desktop_entry import install, uninstall
from core.cli.desktop_linux import AUTOSTART_LINE, desktop_files, exec_value
from core.cli.launcher import home_override, launcher_argv
from tests.support import paths

ROOT = paths.REPO


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # The entry carries MCP_TRAY_HOME when it is set; these tests set it themselves.
    monkeypatch.delenv("MCP_TRAY_HOME", raising=False)
    return env


def entry_keys(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line and not line.startswith("#"))


def test_install_writes_the_menu_entry_and_the_icon_under_xdg_data_home(
    xdg: dict[str, str], tmp_path: Path
) -> None:
    result = install()
    data = tmp_path / "data"
    entry = data / "applications" / "mcp-tray.desktop"
    icon = data / "icons" / "hicolor" / "scalable" / "apps" / "mcp-tray.svg"
    assert result.written == [entry, icon]
    keys = entry_keys(entry)
    assert keys["Type"] == "Application"
    assert keys["Name"] == "mcp-tray"
    assert keys["Icon"] == "mcp-tray"
    assert keys["Terminal"] == "false"
    assert "X-GNOME-Autostart-enabled" not in keys
    launcher = keys["Exec"].split(" ")[0].strip('"')
    assert Path(launcher).is_absolute(), keys["Exec"]
    assert icon.read_bytes() == (ROOT / "resources" / "icons" / "mcp-tray.svg").read_bytes()
    assert not (tmp_path / "config" / "autostart" / "mcp-tray.desktop").exists()


def test_the_autostart_entry_is_written_only_with_the_flag_and_adds_only_the_autostart_key(
    xdg: dict[str, str], tmp_path: Path
) -> None:
    autostart = tmp_path / "config" / "autostart" / "mcp-tray.desktop"
    install(autostart=False)
    assert not autostart.exists()
    result = install(autostart=True)
    assert autostart in result.written
    menu = desktop_files().entry.read_text(encoding="utf-8")
    exec_line = next(line for line in menu.splitlines() if line.startswith("Exec="))
    # The same entry, started minimized (the tray only) and marked for autostart.
    expected = menu.replace(exec_line, exec_line + " run --minimized") + AUTOSTART_LINE + "\n"
    assert autostart.read_text(encoding="utf-8") == expected


def test_uninstall_removes_all_three_files_and_a_second_uninstall_is_a_no_op(
    xdg: dict[str, str],
) -> None:
    install(autostart=True)
    files = desktop_files()
    assert all(path.exists() for path in files.all)
    assert uninstall().removed == list(files.all)
    assert not any(path.exists() for path in files.all)
    assert uninstall().removed == []


def test_relative_xdg_values_are_ignored_as_the_base_directory_spec_says() -> None:
    env = {"XDG_DATA_HOME": "rel/data", "XDG_CONFIG_HOME": "rel/config"}
    files = desktop_files(env)
    assert files.entry == Path.home() / ".local/share/applications/mcp-tray.desktop"
    assert files.autostart == Path.home() / ".config/autostart/mcp-tray.desktop"


@pytest.mark.skipif(
    shutil.which("desktop-file-validate") is None, reason="desktop-file-validate not installed"
)
def test_the_written_entries_pass_desktop_file_validate(xdg: dict[str, str]) -> None:
    install(autostart=True)
    files = desktop_files()
    result = subprocess.run(
        ["desktop-file-validate", str(files.entry), str(files.autostart)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " error: " not in result.stdout


def test_exec_quotes_and_escapes_arguments_per_the_desktop_entry_spec() -> None:
    assert exec_value(["/usr/bin/mcp-tray"]) == "/usr/bin/mcp-tray"
    assert exec_value(["/home/a b/bin/mcp-tray"]) == '"/home/a b/bin/mcp-tray"'
    # Inside quotes `$` is backslash-escaped; then the string-value escape doubles `\`.
    assert exec_value(["/x/$y"]) == '"/x/\\\\$y"'
    assert exec_value(["/x/100%"]) == "/x/100%%"
    assert exec_value(["/py", "-m", "app.entry"]) == "/py -m app.entry"


def test_the_launcher_is_the_mcp_tray_script_beside_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = tmp_path / "my venv" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "mcp-tray"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))
    assert launcher_argv() == [str(script)]
    assert exec_value(launcher_argv()) == f'"{script}"'


def test_without_a_script_the_launcher_is_the_one_on_path_else_python_m_core_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    onpath = tmp_path / "onpath"
    onpath.mkdir()
    monkeypatch.setenv("PATH", str(onpath))
    assert launcher_argv() == [str(tmp_path / "python"), "-m", "app.entry"]
    script = onpath / "mcp-tray"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert launcher_argv() == [str(script)]


def test_a_missing_template_is_a_clear_error_and_writes_nothing(
    xdg: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(desktop_linux, "TEMPLATE", tmp_path / "nope.desktop.in")
    with pytest.raises(DesktopEntryError, match="template is missing"):
        install()
    assert not any(path.exists() for path in desktop_files().all)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "core.cli.main", "install-desktop", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_the_cli_installs_prints_each_path_and_uninstalls(xdg: dict[str, str]) -> None:
    files = desktop_files()
    done = cli(xdg, "--autostart")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"wrote {path}" for path in files.all]
    assert "Exec=/" in files.entry.read_text(encoding="utf-8")

    done = cli(xdg, "--uninstall")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"removed {path}" for path in files.all]
    assert not any(path.exists() for path in files.all)

    done = cli(xdg, "--uninstall")
    assert done.returncode == 0, done.stderr
    assert "nothing to remove" in done.stdout


def test_the_cli_refuses_autostart_together_with_uninstall_as_a_usage_error(
    xdg: dict[str, str],
) -> None:
    done = cli(xdg, "--autostart", "--uninstall")
    assert done.returncode == 2
    assert "not allowed with" in done.stderr
    assert not any(path.exists() for path in desktop_files().all)


def test_the_entry_carries_mcp_tray_home_when_it_is_set(
    xdg: dict[str, str], tmp_path: Path
) -> None:
    tray_home = tmp_path / "tray home"  # a space: the Exec argument must be quoted
    install(autostart=True, environ={**xdg, "MCP_TRAY_HOME": str(tray_home)})

    for path, tail in (
        (desktop_files().entry, []),
        (desktop_files().autostart, ["run", "--minimized"]),
    ):
        command = entry_keys(path)["Exec"]
        program, assignment = command.split(" ", 1)
        assert Path(program).is_absolute() and Path(program).name == "env", command
        assert assignment.startswith(f'"MCP_TRAY_HOME={tray_home}" /'), command
        assert command.endswith(exec_value([*launcher_argv(), *tail]))


def test_a_relative_mcp_tray_home_is_made_absolute_and_an_empty_one_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert home_override({"MCP_TRAY_HOME": "rel/home"}) == str(tmp_path.resolve() / "rel/home")
    assert home_override({"MCP_TRAY_HOME": ""}) is None
    assert home_override({}) is None


def test_the_cli_writes_mcp_tray_home_into_the_entry_and_says_so(
    xdg: dict[str, str], tmp_path: Path
) -> None:
    tray_home = tmp_path / "tray"
    done = cli({**xdg, "MCP_TRAY_HOME": str(tray_home)})
    assert done.returncode == 0, done.stderr
    assert f"MCP_TRAY_HOME={tray_home}" in done.stderr
    command = entry_keys(desktop_files().entry)["Exec"]
    assert f" MCP_TRAY_HOME={tray_home} " in command
    if shutil.which("desktop-file-validate"):
        checked = subprocess.run(
            ["desktop-file-validate", str(desktop_files().entry)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
