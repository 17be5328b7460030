"""Entries find their tray: a bridge entry written from a tray on a config file starts a tray on it.

Strategy: the whole path a person takes, with real processes. A real
headless tray runs on a config file that is not the per-user one;
`mcp-tray client-config claude-code --install` (a subprocess, HOME in a
temporary folder) writes Claude Code's entry from it; the tray is stopped;
then the entry itself (its command, args and env, as Claude Code would run
it) is launched under the SDK's stdio client, with autostart on and no
display: the tray it starts must serve the file's server. The empty case
starts a tray on an empty per-user config and reads what the client and
logs/autostart.log were told. Every tray a test started is ended after it.
"""

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from core.base.envvars import AUTOSTART_ENV, HOME_ENV
from core.settings.paths import Paths
from tests.conftest import ECHO, python_server, wait_until
from tests.support.cli_support import NO_KEYRING, run_mcp_tray
from tests.support.gateway_support import REPO, bridge_env, text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="sessions and groups are POSIX's"),
]

READ_TIMEOUT = 60.0


def trays_of(home: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info["cmdline"] or []
            if "run" in cmdline and proc.environ().get(HOME_ENV) == str(home):
                found.append(proc)
    return found


@pytest.fixture
def home(tray_home: Paths, monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    """A home with an empty per-user config and no display; its trays ended after."""
    tray_home.config_file.write_text(json.dumps({"gateway": {"port": 0}, "mcpServers": {}}))
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    yield tray_home
    root = tray_home.state_dir.parent
    left = trays_of(root)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)  # its stop contract ends its servers
    _, alive = psutil.wait_procs(left, timeout=20)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def client_env(home: Paths, user_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
    env.update(
        HOME=str(user_home),
        MCP_TRAY_HOME=str(home.state_dir.parent),
        PYTHON_KEYRING_BACKEND=NO_KEYRING,
        PYTHONPATH=str(REPO),
    )
    env.pop("XDG_CONFIG_HOME", None)
    return env


async def test_an_entry_installed_from_a_tray_on_a_config_file_starts_a_tray_on_that_file(
    home: Paths, tmp_path: Path, headless: object
) -> None:
    root = home.state_dir.parent
    user_home = tmp_path / "user"
    user_home.mkdir()
    config = {"gateway": {"port": 0}, "mcpServers": {"echo": python_server(ECHO)}}
    tray = headless(config, root)  # type: ignore[operator]
    tray.wait_for(lambda: home.runtime_file.exists(), what="the tray up")
    env = client_env(home, user_home)

    installed = run_mcp_tray(env, "client-config", "claude-code", "--install")
    assert installed.returncode == 0, installed.stderr
    tray.stop()

    entry = json.loads((user_home / ".claude.json").read_text())["mcpServers"]["echo"]
    config_file = str(tray.config_path.resolve())
    assert entry["args"][-2:] == ["--config", config_file]
    # The entry as Claude Code runs it: its command, args and env over the user's.
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**env, **entry["env"], AUTOSTART_ENV: "1"},
        cwd=str(REPO),
    )
    with (tmp_path / "bridge.err").open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as client:
                await client.initialize()
                assert text(await client.call_tool("echo", {"text": "found"})) == "found"
    (started,) = await wait_until(lambda: trays_of(root), what="the started tray")
    assert started.cmdline()[-4:] == ["run", "--minimized", "--config", config_file]


async def test_a_tray_started_on_a_config_with_no_servers_says_so_to_the_client_and_its_log(
    home: Paths, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", "echo"],
        env=bridge_env(home, **{AUTOSTART_ENV: "1", "PYTHON_KEYRING_BACKEND": NO_KEYRING}),
        cwd=str(REPO),
    )
    with (tmp_path / "bridge.err").open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as client:
                with pytest.raises(MCPError) as refused:
                    await client.initialize()
    said = str(refused.value)
    assert f"{home.config_file} configures no servers" in said
    assert f"{home.config_file} configures no servers" in home.autostart_log.read_text()
