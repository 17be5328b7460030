"""Every folder mcp-tray creates is private (0700), and its secret files 0600, whatever the umask.

Strategy: a fresh HOME under tmp_path with no XDG variables, so platformdirs
puts config and state under ~/.config and ~/.local/state, none of which
exist yet; the umask is 000 (the worst case: mkdir's own mode would give
0777) or 0277 (which would take the owner's own write bit) while mcp-tray
makes its folders and writes its runtime file and token; then each level
it made is looked at; the same for a whole headless tray started under
umask 000 (every folder under its home). POSIX modes only: on Windows the profile's ACL does
this job (docs/platforms.md).
"""

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.platform.files import open_private, private_dirs, write_private
from core.settings.paths import default_paths
from core.settings.runtime import load_or_create_file_token
from tests.conftest import ECHO, python_server
from tests.support.cli_support import cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")


@pytest.fixture(params=[0o000, 0o277], ids=["umask-000", "umask-277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_level_of_mcp_trays_default_folders_is_0700(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("MCP_TRAY_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    paths = default_paths()

    paths.ensure()

    made = [
        p
        for folder in (paths.config_dir, paths.state_dir, paths.log_dir, paths.runtime_dir)
        for p in (folder, *folder.parents)
        if home in p.parents
    ]
    assert home / ".config" in made and home / ".local" / "state" in made
    assert {str(p.relative_to(home)): oct(mode(p)) for p in made} == {
        str(p.relative_to(home)): oct(0o700) for p in made
    }


def test_secret_files_are_0600_in_private_folders_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    token_file = tmp_path / "a" / "b" / "token"
    load_or_create_file_token(token_file)
    write_private(tmp_path / "c" / "runtime.json", "{}")

    assert mode(token_file) == 0o600
    assert mode(tmp_path / "c" / "runtime.json") == 0o600
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "c"):
        assert mode(folder) == 0o700


def test_a_folder_that_already_exists_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    private_dirs(shared / "mine")
    assert mode(shared) == 0o755  # not ours to change
    assert mode(shared / "mine") == 0o700


def test_every_folder_a_running_tray_makes_is_0700_and_every_file_0600_under_umask_000(
    tmp_path: Path, headless: Any
) -> None:
    # The home holds the test's config file; every other file and folder in it is the tray's:
    # its registry (and SQLite's journal), locks, token, runtime file, a server's log.
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    previous = os.umask(0o000)  # the child inherits it at its start
    try:
        tray = headless(
            {"gateway": {"port": 0}, "mcpServers": {"echo": python_server(ECHO)}}, home=home
        )
    finally:
        os.umask(previous)
    tray.wait_state("echo", "ready")
    assert cli(home, "status").returncode == 0  # the CLI's own writes (none of its folders)
    tray.stop()

    made = [Path(root) / name for root, dirs, _ in os.walk(home) for name in dirs]
    assert {home / "config", home / "state", home / "logs", home / "run"} <= set(made)
    assert {str(p.relative_to(home)): oct(mode(p)) for p in made} == {
        str(p.relative_to(home)): oct(0o700) for p in made
    }
    files = [
        Path(root) / name
        for root, _, names in os.walk(home)
        for name in names
        if Path(root) / name != tray.config_path
    ]
    assert any(p.suffix == ".log" for p in files) and tray.paths.token_file in files
    assert {str(p.relative_to(home)): oct(mode(p)) for p in files} == {
        str(p.relative_to(home)): oct(0o600) for p in files
    }


def test_a_log_opened_to_append_is_0600_whatever_the_umask_and_an_old_one_becomes_it(
    tmp_path: Path, umask: int
) -> None:
    fresh = tmp_path / "logs" / "new.log"
    with open_private(fresh) as log:
        log.write("line\n")
    older = tmp_path / "logs" / "old.log"
    older.write_text("kept\n")
    older.chmod(0o644)
    with open_private(older, "a+") as log:
        log.write("more\n")
    assert (mode(fresh), mode(older)) == (0o600, 0o600)
    assert older.read_text() == "kept\nmore\n"
    assert mode(tmp_path / "logs") == 0o700
