"""The bridge answers every first line, and every request it gives up on.

Strategy: real `mcp-tray connect` bridges (subprocesses of this checkout) in
front of real trays (a TrayService in this process, or a `run --headless`
subprocess that is SIGKILLed), spoken to by the SDK's stdio client where it
can say what is tested, and by a raw line client (tests/support/bridge_lines.py)
where the SDK cannot: a line before initialize, a 2025-03-26 batch, stdin
closed under a call. Each bound the issue names (2 s) is an upper bound
measured from an event (the bridge's answer to a ping, the new tray up),
never reached by sleeping; each session has a read timeout far above it, so
an answer under the wrong id fails as that timeout, not as a hang.
"""

import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from core.settings.paths import Paths
from tests.conftest import ECHO, python_server, wait_until
from tests.support.bridge_lines import LineClient, hello
from tests.support.gateway_support import REPO, bridge_client, bridge_env, text
from tests.support.trays import Trays

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the bridge tests run on POSIX")

#: What the issue allows for any answer the bridge owes.
PROMPT_SECONDS = 2.0
#: An SDK session's read timeout: an answer it cannot match fails as this, not as a hang.
READ_TIMEOUT = 15.0


@pytest.fixture
async def trays(tray_home: Paths) -> AsyncIterator[Trays]:
    holder = Trays(tray_home)
    yield holder
    await holder.stop()


def configure(paths: Paths, port: int = 0, **echo_env: str) -> None:
    paths.config_file.write_text(
        json.dumps(
            {
                "gateway": {"port": port},
                "mcpServers": {"echo": python_server(ECHO, **echo_env)},
                "profiles": {"coding": {"servers": ["echo"]}},
            }
        )
    )


def bridge_params(paths: Paths, name: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", name],
        env=bridge_env(paths, **env),
        cwd=str(REPO),
    )


async def test_initialize_for_a_name_not_configured_is_answered_at_once_under_its_id(
    trays: Trays, tmp_path: Path
) -> None:
    configure(trays.paths)
    await trays.start()
    with (tmp_path / "bridge.err").open("w") as err:
        async with stdio_client(bridge_params(trays.paths, "ghost"), errlog=err) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as session:
                # A ping before initialize: the bridge is up and says so itself.
                assert (await session.send_ping()).model_dump(exclude_none=True) == {}
                asked = time.monotonic()
                with pytest.raises(MCPError) as refused:
                    await session.initialize()
                answered_in = time.monotonic() - asked

    said = str(refused.value)
    assert answered_in < PROMPT_SECONDS, answered_in
    assert "no server named 'ghost'" in said
    # What is there to connect to instead, and in which file.
    assert "servers: echo" in said and "@all" in said and "@coding" in said
    assert str(trays.paths.config_file) in said


async def test_a_ping_before_initialize_is_answered_and_the_session_then_opens(
    trays: Trays,
) -> None:
    configure(trays.paths)
    await trays.start()
    async with LineClient.start(bridge_env(trays.paths), "echo") as client:
        assert await client.ask({"jsonrpc": "2.0", "id": "p", "method": "ping"}) == {
            "jsonrpc": "2.0",
            "id": "p",
            "result": {},
        }
        opened = await client.ask(hello(1))
        assert opened["result"]["serverInfo"]
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "echo", "arguments": {"text": "after a ping"}}
        answer = await client.ask(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        )
        assert answer["result"]["content"][0]["text"] == "after a ping"


# Subscriptions and log levels are handshake-era things (the SDK warns of 2026-07-28).
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_an_idle_handshake_era_bridge_answers_at_once_when_the_tray_is_back(
    trays: Trays, free_tcp_port: int
) -> None:
    # The configured port: the new tray is where the old one was, and adopts the session.
    configure(trays.paths, port=free_tcp_port)
    await trays.start()
    async with bridge_client(
        trays.paths, "echo", session_kwargs={"read_timeout_seconds": READ_TIMEOUT}
    ) as client:
        for n in range(3):  # numbered lines the first tray dispatched
            assert text(await client.call_tool("echo", {"text": f"before {n}"})) == f"before {n}"
        await trays.stop()
        await trays.start()
        back = time.monotonic()
        answer = await client.call_tool("echo", {"text": "after"})
        answered_in = time.monotonic() - back
    assert text(answer) == "after"
    assert answered_in < PROMPT_SECONDS, answered_in


async def test_a_batch_cut_by_a_tray_killed_under_it_gets_an_error_per_request(
    tray_home: Paths, headless: Any, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    home = tray_home.state_dir.parent
    config = {
        "gateway": {"port": 0},
        "mcpServers": {"echo": python_server(ECHO, ECHO_MARKER_DIR=str(markers))},
    }
    tray = headless(config, home)
    await wait_until(lambda: tray_home.runtime_file.exists(), what="the tray up", timeout=30)
    async with LineClient.start(
        bridge_env(tray_home, MCP_TRAY_RECONNECT_SECONDS="1"), "echo"
    ) as client:
        assert "result" in await client.ask(hello(1, version="2025-03-26"), timeout=30)
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        write = {"name": "slow_write", "arguments": {"seconds": 30}}
        echo = {"name": "echo", "arguments": {"text": "in the batch"}}
        await client.send(
            [
                {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": write},
                {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": echo},
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
            ]
        )
        await wait_until((markers / "slow_write.started").exists, what="the batch under way")
        tray.proc.kill()
        tray.proc.wait(timeout=10)

        answers = await client.read(timeout=10)
    assert isinstance(answers, list), answers
    assert sorted(a["id"] for a in answers) == [7, 8]
    for answer in answers:
        assert "mcp-tray went away while this request was in flight" in answer["error"]["message"]


async def test_a_home_that_is_a_file_still_answers_initialize_with_why(
    tray_home: Paths, tmp_path: Path
) -> None:
    not_a_folder = tmp_path / "home-file"
    not_a_folder.write_text("not a folder")
    params = bridge_params(tray_home, "echo", MCP_TRAY_HOME=str(not_a_folder))
    with (tmp_path / "bridge.err").open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as session:
                with pytest.raises(MCPError) as refused:
                    await session.initialize()
    assert "cannot be opened" in str(refused.value)
    assert str(not_a_folder) in str(refused.value)


async def test_a_name_that_cannot_be_a_server_is_answered_not_left_to_time_out(
    tray_home: Paths,
) -> None:
    async with LineClient.start(bridge_env(tray_home), "no/such") as client:
        answer = await client.ask(hello(1))
        assert "'no/such' is not a server name" in answer["error"]["message"]
        ping = await client.ask({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert ping["id"] == 2 and "error" in ping


async def test_a_call_still_in_flight_when_the_client_closes_stdin_is_answered_before_exit(
    trays: Trays,
) -> None:
    configure(trays.paths)
    await trays.start()
    async with LineClient.start(bridge_env(trays.paths), "echo") as client:
        assert "result" in await client.ask(hello(1))
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        write = {"name": "slow_write", "arguments": {"seconds": 30}}
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": write})
        await client.close_input()
        answer = await client.read(timeout=15)
        assert answer["id"] == 2
        assert "the bridge stopped before mcp-tray answered" in answer["error"]["message"]
        assert await client.exit_code(timeout=15) == 0
