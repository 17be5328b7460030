"""A bridge that finds no tray starts one: detached, headless without a display, one for many.

Strategy: real `mcp-tray connect` bridges (subprocesses of this checkout)
under real SDK stdio clients, on a private home with no tray running and no
display in their environment. The tray a bridge starts is the real one
(`mcp-tray run --minimized`, the console script of this venv), found
afterwards by the home in its environment. Every test ends every process
that carries its home (tray, servers) and then checks that none is left.
"""

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from core.base.envvars import AUTOSTART_ENV, HOME_ENV
from core.bridge.autostart import ensure_tray
from core.settings.paths import Paths
from core.settings.runtime import running_instance
from tests.conftest import ECHO, python_server, wait_until
from tests.support.cli_support import NO_KEYRING
from tests.support.gateway_support import REPO, bridge_client, bridge_env, text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="sessions and groups are POSIX's"),
]

#: Starting a tray (a Python with its imports, the echo server) on a loaded machine.
UP_SECONDS = 45.0


def bridge_extra(**more: str) -> dict[str, str]:
    """What the bridges here run with: autostart on, no keyring, no display."""
    return {AUTOSTART_ENV: "1", "PYTHON_KEYRING_BACKEND": NO_KEYRING, **more}


def processes_of(home: Path) -> list[psutil.Process]:
    """Every process whose environment names ``home``, but the bridges' and ours."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid == os.getpid() or "connect" in (proc.info["cmdline"] or []):
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(HOME_ENV) == str(home):
                found.append(proc)
    return found


def trays_of(home: Path) -> list[psutil.Process]:
    return [p for p in processes_of(home) if "--minimized" in (p.info["cmdline"] or [])]


def bridges() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "connect" in (p.cmdline() if p.is_running() else [])
    ]


@pytest.fixture
def home(tray_home: Paths, monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    """A home with the echo server, any port, and no display; its processes ended after."""
    tray_home.config_file.write_text(
        json.dumps({"gateway": {"port": 0}, "mcpServers": {"echo": python_server(ECHO)}})
    )
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    root = tray_home.state_dir.parent
    yield tray_home
    leftovers = processes_of(root)
    for proc in leftovers:
        if "--minimized" in (proc.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGTERM)  # its stop contract ends its servers
    _, alive = psutil.wait_procs(leftovers, timeout=20)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
    assert processes_of(root) == [], "a tray or a server outlived its test"


async def test_a_bridge_with_no_tray_starts_one_detached_and_its_client_is_answered(
    home: Paths, tmp_path: Path
) -> None:
    root = home.state_dir.parent
    log = tmp_path / "bridge.err"
    with log.open("w") as err:
        async with bridge_client(home, "echo", errlog=err, env=bridge_extra()) as client:
            assert text(await client.call_tool("echo", {"text": "first"})) == "first"

            (tray,) = trays_of(root)
            assert running_instance(home).pid == tray.pid
            (bridge,) = bridges()
            # Out of the client's tree: not the bridge's descendant, in a
            # session and process group of its own.
            assert tray.pid not in {p.pid for p in bridge.children(recursive=True)}
            assert tray.ppid() != bridge.pid
            if sys.platform != "win32":  # (the module is skipped there; this is for mypy)
                assert os.getsid(tray.pid) != os.getsid(bridge.pid)
                assert os.getpgid(tray.pid) != os.getpgid(bridge.pid)
            # Started as the login entry starts it.
            assert tray.cmdline()[-2:] == ["run", "--minimized"]
            # The client's own variables stay with the bridge.
            assert "MCP_TRAY_CLIENT" not in tray.environ()
    said = log.read_text()
    assert f"Autostart: started mcp-tray (pid {tray.pid}, detached)" in said
    # No display: the tray ran headless, and said so where its output goes.
    assert "running headless" in home.autostart_log.read_text()
    # The bridge is gone with its client; the tray it started stays up.
    assert tray.is_running()
    assert running_instance(home).pid == tray.pid


async def test_many_bridges_starting_at_once_start_exactly_one_tray(
    home: Paths, tmp_path: Path
) -> None:
    root = home.state_dir.parent

    async def one_client(n: int) -> str:
        env = bridge_extra(MCP_TRAY_CLIENT_SESSION=f"burst-{n}")
        with (tmp_path / f"bridge-{n}.err").open("w") as err:
            async with bridge_client(home, "echo", errlog=err, env=env) as client:
                return text(await client.call_tool("echo", {"text": f"client {n}"}))

    answers = await asyncio.wait_for(asyncio.gather(*(one_client(n) for n in range(5))), UP_SECONDS)

    assert answers == [f"client {n}" for n in range(5)]
    started = [
        line for line in home.autostart_log.read_text().splitlines() if "started mcp-tray" in line
    ]
    assert len(started) == 1, started
    assert len(trays_of(root)) == 1


async def test_with_autostart_off_initialize_is_answered_that_mcp_tray_is_not_running(
    home: Paths, tmp_path: Path
) -> None:
    root = home.state_dir.parent
    log = tmp_path / "bridge.err"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", "echo"],
        env=bridge_env(home, **bridge_extra(**{AUTOSTART_ENV: "0"})),
        cwd=str(REPO),
    )
    started = time.monotonic()
    with log.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                with pytest.raises(MCPError) as refused:
                    await session.initialize()
                answered_in = time.monotonic() - started

    message = str(refused.value)
    assert "mcp-tray is not running (waited 2 s for it)" in message
    assert "MCP_TRAY_AUTOSTART=0" in message
    assert answered_in < 30  # not the 60 s a request waits for a tray being started
    assert "MCP_TRAY_AUTOSTART=0" in log.read_text()
    assert not home.autostart_log.exists()
    await wait_until(lambda: not bridges(), what="the bridge to exit with its client")
    assert trays_of(root) == []


async def test_a_started_tray_that_dies_at_once_is_reported_with_where_it_said_why(
    home: Paths,
) -> None:
    dying = [sys.executable, "-c", "import sys; sys.exit('no tray today: a broken install')"]

    started = await ensure_tray(home, dying, dict(os.environ))

    assert started.pid is not None
    assert not started.up
    assert str(home.autostart_log) in started.text
    said = home.autostart_log.read_text()
    assert f"started mcp-tray: pid {started.pid}" in said
    assert "no tray today: a broken install" in said
