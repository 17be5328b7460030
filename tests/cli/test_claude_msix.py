"""Claude Desktop on Windows installed as an MSIX package reads its config from the
package's own copy of AppData; ``--install`` and ``import`` use that file.

Strategy: the OS is injected (``system="win32"``, or core.cli.integrations'
``current_os`` replaced for the commands, which ask it themselves) and
``%LOCALAPPDATA%``/``%APPDATA%`` are folders under tmp_path, with a package
folder shaped like the real one (``Claude_pzs8sxrjxfjjc``) or none. The
real install and import code then writes and reads the files on disk.
"""

import argparse
import json
from pathlib import Path

import pytest

from core.cli import integrations
from core.cli.client_config import cmd_import
from core.cli.install import apply_install, plan_install, snippet_entries
from core.cli.integrations import client_config_path
from core.settings.paths import Paths

PACKAGE = "Claude_pzs8sxrjxfjjc"
CONFIG = "claude_desktop_config.json"


def packaged(local: Path, package: str = PACKAGE) -> Path:
    """Where the packaged app reads its config, its package folder made."""
    roaming = local / "Packages" / package / "LocalCache" / "Roaming"
    roaming.mkdir(parents=True)
    return roaming / "Claude" / CONFIG


def test_with_the_msix_package_installed_claudes_file_is_the_packages_own(tmp_path: Path) -> None:
    expected = packaged(tmp_path / "AppData" / "Local")
    assert client_config_path("claude", home=tmp_path, system="win32") == expected


def test_without_the_package_claudes_file_is_in_roaming_appdata(tmp_path: Path) -> None:
    (tmp_path / "AppData" / "Local" / "Packages" / "Microsoft.Other_8wekyb3d8bbwe").mkdir(
        parents=True
    )
    assert client_config_path("claude", home=tmp_path, system="win32") == (
        tmp_path / "AppData" / "Roaming" / "Claude" / CONFIG
    )


def test_the_package_is_found_under_the_environments_localappdata(tmp_path: Path) -> None:
    expected = packaged(tmp_path / "Local")
    environ = {"LOCALAPPDATA": str(tmp_path / "Local"), "APPDATA": str(tmp_path / "Roaming")}
    assert client_config_path("claude", system="win32", environ=environ) == expected


def test_of_two_claude_packages_the_one_holding_a_config_is_chosen(tmp_path: Path) -> None:
    local = tmp_path / "AppData" / "Local"
    packaged(local, "Claude_aaaaaaaaaaaaa")
    holding = packaged(local, "Claude_zzzzzzzzzzzzz")
    holding.parent.mkdir()
    holding.write_text("{}", encoding="utf-8")
    assert client_config_path("claude", home=tmp_path, system="win32") == holding


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_a_package_folder_means_nothing_on_other_oses(tmp_path: Path, system: str) -> None:
    packaged(tmp_path / "AppData" / "Local")
    assert "Packages" not in client_config_path("claude", home=tmp_path, system=system).parts


def test_only_claude_desktop_reads_a_package_copy(tmp_path: Path) -> None:
    packaged(tmp_path / "AppData" / "Local", "Code_1234")
    assert client_config_path("vscode", home=tmp_path, system="win32") == (
        tmp_path / "AppData" / "Roaming" / "Code" / "User" / "mcp.json"
    )


@pytest.fixture
def windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as Windows sees it: its OS, and its two AppData folders under tmp_path."""
    monkeypatch.setattr(integrations, "current_os", lambda: "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "Local"))
    monkeypatch.setenv("APPDATA", str(tmp_path / "Roaming"))
    return packaged(tmp_path / "Local")


def test_install_into_claude_writes_the_packages_file_not_roaming_appdata(
    windows: Path, tmp_path: Path
) -> None:
    result = apply_install(plan_install("claude", snippet_entries("claude", ["echo"])))
    assert result.written and result.plan.path == windows
    assert "echo" in json.loads(windows.read_text(encoding="utf-8"))["mcpServers"]
    assert not (tmp_path / "Roaming" / "Claude").exists()


def test_import_claude_reads_the_packages_file(
    windows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    windows.parent.mkdir(parents=True)
    server = {"command": "uvx", "args": ["mcp-server-time"]}
    windows.write_text(json.dumps({"mcpServers": {"time": server}}), encoding="utf-8")
    config = tmp_path / "tray" / "config.json"
    args = argparse.Namespace(client="claude", path=None, config=config, move_secrets="no")
    paths = Paths(tmp_path / "tray", tmp_path / "state", tmp_path / "logs", tmp_path / "run")

    assert cmd_import(args, paths) == 0

    assert str(windows) in capsys.readouterr().out
    assert json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["time"] == server
