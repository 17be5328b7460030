"""A tray started with a minimal PATH takes its user's login-shell PATH, once.

Strategy: the login shell is a real subprocess, a small shell script in
tmp_path standing in for zsh/bash: it prints rc-file noise around what it
is asked to print and runs the command with the PATH a user's rc files
would set. Other scripts hang (with a grandchild holding the pipe), print
nothing, or are missing, for the timeout and the fallback folders, which
live under a tmp home. The OS and the environment are injected into
``desktop_path``; the last test runs a real headless tray with a minimal
PATH whose only server is a command found on the shell's PATH alone, and
asks ``mcp-tray doctor`` where the PATH came from.
"""

import functools
import json
import os
import sys
from pathlib import Path

import pytest

from core.platform.login_path import PathOrigin, desktop_path, fallback_folders, is_minimal, merged
from tests.conftest import process_gone, wait_until_sync
from tests.support import paths
from tests.support.cli_support import Headless, home_env, run_mcp_tray

LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
ECHO = paths.SERVERS / "echo.py"


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def login_shell(tmp_path: Path, user_path: str) -> Path:
    """A shell whose rc files set ``user_path`` and print noise on stdout."""
    return script(
        tmp_path / "bin" / "fake-zsh",
        'echo "Last login: Mon Dec  1 on ttys000"\n'
        f'PATH="{user_path}"; export PATH\n'
        'echo "$@" > "$0.args"\n'
        '/bin/sh -c "$2"\n'
        'echo "oh-my-zsh: update available"\n',
    )


@pytest.mark.parametrize(
    ("path", "minimal"),
    [
        (LAUNCHD_PATH, True),
        ("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin", True),
        ("", True),
        ("/usr/bin:/bin:/home/ada/.local/bin", False),
        ("/opt/homebrew/bin:/usr/bin:/bin", False),
    ],
)
def test_a_path_of_system_folders_only_is_minimal(path: str, minimal: bool) -> None:
    assert is_minimal(path) is minimal


@pytest.mark.parametrize("system", ["darwin", "linux"])
def test_a_minimal_path_takes_the_login_shells_path_first_ignoring_its_noise(
    tmp_path: Path, system: str
) -> None:
    user = f"{tmp_path}/brew/bin:{tmp_path}/.local/bin:/usr/bin:/bin"
    shell = login_shell(tmp_path, user)
    path, origin = desktop_path(
        {"PATH": LAUNCHD_PATH, "SHELL": str(shell)}, system=system, home=tmp_path
    )
    assert path == f"{user}:/usr/sbin:/sbin"
    assert origin == PathOrigin(
        "login-shell", f"{shell} -ilc", (f"{tmp_path}/brew/bin", f"{tmp_path}/.local/bin")
    )
    assert Path(f"{shell}.args").read_text().startswith("-ilc ")  # login and interactive
    assert str(origin).startswith(f"PATH from the login shell ({shell} -ilc), which added")


def test_a_path_beyond_the_system_folders_is_kept_and_no_shell_is_asked(tmp_path: Path) -> None:
    shell = login_shell(tmp_path, "/nowhere")
    given = f"{tmp_path}/.local/bin:{LAUNCHD_PATH}"
    path, origin = desktop_path({"PATH": given, "SHELL": str(shell)}, system="darwin")
    assert (path, origin.source) == (given, "inherited")
    assert not Path(f"{shell}.args").exists()


def test_windows_keeps_the_path_explorer_gave_it_and_asks_no_shell(tmp_path: Path) -> None:
    shell = login_shell(tmp_path, "/nowhere")
    path, origin = desktop_path({"PATH": "/usr/bin", "SHELL": str(shell)}, system="win32")
    assert (path, origin.source) == ("/usr/bin", "inherited")
    assert "Explorer" in origin.detail and not Path(f"{shell}.args").exists()


def user_folders(home: Path) -> list[str]:
    """The fallback folders a user of ``home`` has: ~/.local/bin, volta, two nvm nodes."""
    for folder in (".local/bin", ".volta/bin", ".nvm/versions/node/v9.1.0/bin"):
        (home / folder).mkdir(parents=True)
    (home / ".nvm/versions/node/v20.11.1/bin").mkdir(parents=True)
    return [f"{home}/.local/bin", f"{home}/.volta/bin", f"{home}/.nvm/versions/node/v20.11.1/bin"]


def test_the_fallback_folders_are_those_that_exist_and_nvms_newest_node(tmp_path: Path) -> None:
    found = fallback_folders(tmp_path)
    assert all(Path(f).is_dir() for f in found)
    assert [f for f in found if f.startswith(str(tmp_path))] == []  # nothing of the user's yet
    expected = user_folders(tmp_path)
    assert [f for f in fallback_folders(tmp_path) if f.startswith(str(tmp_path))] == expected


def test_a_login_shell_that_hangs_is_killed_with_its_children_and_the_fallback_used(
    tmp_path: Path,
) -> None:
    expected = user_folders(tmp_path)
    pids = tmp_path / "pids"
    # The grandchild holds the shell's stdout open: killing the shell alone would not end the read.
    shell = script(
        tmp_path / "bin" / "hung-zsh",
        f'sleep 300 & echo $! > "{pids}"\necho $$ >> "{pids}"\nwait\n',
    )
    path, origin = desktop_path(
        {"PATH": LAUNCHD_PATH, "SHELL": str(shell)}, system="darwin", home=tmp_path, timeout=0.3
    )
    assert origin.source == "fallback"
    assert origin.detail == f"the login shell {shell} timed out after 0.3 s"
    assert [f for f in path.split(":") if f.startswith(str(tmp_path))] == expected
    assert path.endswith(LAUNCHD_PATH)
    for pid in map(int, pids.read_text().split()):
        wait_until_sync(functools.partial(process_gone, pid), what=f"pid {pid} gone", timeout=10)


@pytest.mark.parametrize(
    ("body", "why"),
    [("echo 'no PATH here'\nexit 1\n", "printed no PATH (exit code 1)"), (None, "could not start")],
)
def test_a_login_shell_that_cannot_say_leaves_the_fallback_folders(
    tmp_path: Path, body: str | None, why: str
) -> None:
    expected = user_folders(tmp_path)
    shell = tmp_path / "bin" / "broken-zsh"
    if body is not None:
        script(shell, body)
    path, origin = desktop_path(
        {"PATH": LAUNCHD_PATH, "SHELL": str(shell)}, system="linux", home=tmp_path
    )
    assert origin.source == "fallback" and why in origin.detail
    assert [f for f in path.split(":") if f.startswith(str(tmp_path))] == expected
    assert "the usual folders that exist were added instead" in str(origin)


def test_merging_keeps_the_first_paths_order_and_each_folder_once() -> None:
    assert merged("/a:/b:/usr/bin", "/usr/bin:/c:/a:") == "/a:/b:/usr/bin:/c"


def test_a_tray_started_with_a_minimal_path_runs_a_server_found_only_on_the_login_path(
    tmp_path: Path,
) -> None:
    brew = tmp_path / "brew" / "bin"
    script(brew / "fake-npx", f'exec "{sys.executable}" "{ECHO}" "$@"\n')
    shell = login_shell(tmp_path, f"{brew}:/usr/bin:/bin")
    home = tmp_path / "home"
    config = {"gateway": {"port": 0}, "mcpServers": {"echo": {"command": "fake-npx"}}}
    tray = Headless(home, config, env={"PATH": "/usr/bin:/bin", "SHELL": str(shell)})
    try:
        tray.wait_state("echo", "ready")
        doctor = run_mcp_tray(home_env(home), "doctor", "--json")
        [note] = [n for n in json.loads(doctor.stdout)["info"] if n["family"] == "path"]
        assert "login-shell" in note["text"] and str(brew) in note["text"]
    finally:
        stderr = tray.stop()
    assert f"PATH from the login shell ({shell} -ilc), which added {brew}" in stderr


def test_the_doctor_without_a_tray_says_what_a_tray_would_do_with_its_path(
    tmp_path: Path,
) -> None:
    env = {**home_env(tmp_path / "home"), "PATH": os.pathsep.join(["/usr/bin", "/bin"])}
    doctor = run_mcp_tray(env, "doctor", "--json")
    [note] = [n for n in json.loads(doctor.stdout)["info"] if n["family"] == "path"]
    assert "asks the login shell" in note["text"]
