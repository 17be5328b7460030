"""README's "Your first ten minutes", step by step, as a new user would type it.

Strategy: the real commands README names, in a subprocess each, on a
private home with no display: `mcp-tray run --demo` (headless there), then
`status`, `tools`, `call`, `sessions`, `reset`, `client-config`; step 4's
client is the MCP SDK's stdio client on a real `mcp-tray connect
demo-fragile` bridge. Each step asserts what README says the user sees.
The crash tool really kills the demo server. Nothing here is faked; the
waits are bounded polls on what the CLI prints.
"""

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from core.base.resources import demo_config
from core.settings.paths import default_paths
from tests.conftest import wait_until_sync
from tests.support.cli_support import cli, home_env, run_mcp_tray
from tests.support.gateway_support import REPO, bridge_env, text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TRIPPED = "⚠️ This session has failed 3 times in a row"


def status(home: Path) -> dict[str, dict[str, Any]]:
    result = cli(home, "status", "--json")
    assert result.returncode == 0, result.stderr
    return {server["name"]: server for server in json.loads(result.stdout)["servers"]}


def ready(home: Path, name: str, not_pid: int | None = None) -> dict[str, Any]:
    """Wait for ``name`` ready (under a pid other than ``not_pid``); its status row."""

    def check() -> dict[str, Any] | None:
        if cli(home, "status").returncode == 3:
            return None  # not up yet
        row = status(home)[name]
        return row if row["state"] == "ready" and row["pid"] != not_pid else None

    found: dict[str, Any] = wait_until_sync(check, what=f"{name} ready", timeout=60)
    return found


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Step 1: `mcp-tray run --demo` on a private home, with no display (so headless)."""
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    with (tmp_path / "tray.err").open("w") as err:
        tray = subprocess.Popen(
            [sys.executable, "-m", "core.cli.main", "run", "--demo"],
            env=home_env(home),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        for name in ("demo-notes", "demo-fragile", "demo-clock"):
            ready(home, name)
        yield home
    finally:
        tray.terminate()
        try:
            tray.wait(30)
        except subprocess.TimeoutExpired:
            tray.kill()
            tray.wait()


@contextlib.asynccontextmanager
async def client_on_bridge(home: Path, server: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", server],
        env=bridge_env(default_paths({"MCP_TRAY_HOME": str(home)})),
        cwd=str(REPO),
    )
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def test_the_first_ten_minutes_work_as_readme_writes_them_through_step_4(
    demo: Path, tmp_path: Path
) -> None:
    home = demo
    # 2. Look: the three servers, and demo-fragile's tools with which are retried.
    rows = status(home)
    assert {rows[name]["state"] for name in ("demo-notes", "demo-fragile", "demo-clock")} == {
        "ready"
    }
    tools = cli(home, "tools", "demo-fragile")
    assert tools.returncode == 0, tools.stderr
    lines = {line.split()[0]: line for line in tools.stdout.splitlines() if line.strip()}
    assert " retried " in lines["ping"]  # read-only: retried after a crash
    assert "not retried" in lines["crash"]

    # 3. Crash something: told the truth, then back under a new pid, and answered.
    first_pid = rows["demo-fragile"]["pid"]
    crashed = cli(home, "call", "demo-fragile", "crash")
    assert crashed.returncode == 1
    assert "exited mid-call" in crashed.stderr
    assert "timed out" not in crashed.stderr.lower()
    second_pid = ready(home, "demo-fragile", not_pid=first_pid)["pid"]
    pinged = cli(home, "call", "demo-fragile", "ping")
    assert pinged.returncode == 0, pinged.stderr
    assert f"pong from pid {second_pid}" in pinged.stdout

    # 4. Trip a session through the bridge, then reset it.
    async with client_on_bridge(home, "demo-fragile") as client:
        for _ in range(3):
            cut = await client.call_tool("crash", {})
            # "exited mid-call", or "exited again right after mcp-tray respawned it"
            # when the call waited for the child the previous crash had killed.
            assert cut.is_error and "exited" in text(cut)
        # The fourth request is answered at once with the hint.
        tripped = await client.call_tool("ping", {})
        assert tripped.is_error and text(tripped).startswith(TRIPPED)

        listed = cli(home, "sessions", "--json")
        assert listed.returncode == 0, listed.stderr
        (session,) = [
            row
            for row in json.loads(listed.stdout)
            if row["server"] == "demo-fragile" and row["breaker"] == "tripped"
        ]
        reset = cli(home, "reset", session["id"])
        assert reset.returncode == 0, reset.stderr

        # "...and the session works again": answered at once, by the child that is back.
        result = await client.call_tool("ping", {})
        assert not result.is_error, text(result)
        assert re.fullmatch(r"pong from pid \d+", text(result))
        assert status(home)["demo-fragile"]["breaker"] == "closed"


async def test_step_5_writes_the_running_demos_servers_into_cursors_own_file(
    demo: Path, tmp_path: Path
) -> None:
    home = demo
    # 5. Connect your client: the change to Cursor's own file, shown, then written.
    env_home = tmp_path / "user"
    env = home_env(home) | {"HOME": str(env_home)}
    dry = run_mcp_tray(env, "client-config", "cursor", "--install", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "demo-fragile" in dry.stdout + dry.stderr
    assert not (env_home / ".cursor" / "mcp.json").exists()
    written = run_mcp_tray(env, "client-config", "cursor", "--install")
    assert written.returncode == 0, written.stderr
    entries = json.loads((env_home / ".cursor" / "mcp.json").read_text())["mcpServers"]
    # A tray this entry has to start runs on the demo config too, not the per-user one.
    config = str(demo_config().resolve())
    assert entries["demo-fragile"]["args"][-4:] == ["connect", "demo-fragile", "--config", config]
    assert os.environ.get("HOME") != str(env_home)  # the user's own file was never touched
