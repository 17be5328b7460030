"""What the command line shows of a running tray, and what it takes from it.

Strategy: a real headless tray (``mcp-tray run --headless`` in a subprocess,
tests/support/cli_support.py) with real servers, driven by the real command line in
subprocesses. ``status --json`` is compared with the API's own server object
(asked directly) and with ``ServerSnapshot.to_json``, so the three cannot
drift; the doctor is run against a tray with a parked server and a tripped
session; ``client-config`` against a tray started on a config of its own;
the bridge with its stdin and stdout on regular files.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.base.states import ServerState
from core.cli.control_client import ControlClient
from core.cli.install import MASK
from core.platform import landlock
from core.settings.runtime import running_instance
from tests.app.builders import server
from tests.conftest import ECHO, python_server
from tests.support.cli_support import cli, home_env, run_mcp_tray, trip_a_session


def api_status(tray: Any) -> dict[str, Any]:
    """``/api/v1/status`` as the API itself answers it (the token from its 0600 file)."""
    token = tray.paths.token_file.read_text().strip()
    client = ControlClient(tray.paths, running_instance(tray.paths), token)
    return client.get("/api/v1/status")


def test_status_json_carries_every_field_of_the_apis_server_object(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")

    [shown] = tray.status()["servers"]
    [answered] = api_status(tray)["servers"]
    published = server("x", ServerState.READY).to_json()

    assert set(shown) == set(answered) == set(published)
    assert shown["name"] == answered["name"] == "echo"
    assert shown["command"] == answered["command"]
    assert shown["protocol"] == answered["protocol"] is not None


def test_status_shows_the_era_each_child_speaks(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    era = tray.wait_state("echo", "ready")["protocol"]

    result = cli(tray.home, "status")

    [line] = [line for line in result.stdout.splitlines() if line.strip().startswith("echo ")]
    assert line.split()[1] == "ready"
    assert line.endswith(f"era {era}")


@pytest.mark.skipif(
    landlock.abi_version() < landlock.NETWORK_ABI, reason="needs Landlock ABI 4 or later"
)
def test_status_says_under_each_server_whether_a_sandbox_is_enforced(headless: Any) -> None:
    boxed = {**python_server(ECHO), "sandbox": {"network": False}}
    tray = headless({"mcpServers": {"boxed": boxed, "free": python_server(ECHO)}})
    tray.wait_state("boxed", "ready")
    tray.wait_state("free", "ready")

    lines = cli(tray.home, "status").stdout.splitlines()
    shown = {s["name"]: s["sandbox"] for s in tray.status()["servers"]}

    expected = f"landlock ABI {landlock.abi_version()} — write 1 folder, network off"
    assert shown == {"boxed": expected, "free": "none"}
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("boxed "))
    assert lines[at + 1].strip() == f"sandbox: {expected}"
    assert not any("sandbox" in line for line in lines if "free" in line)


def test_doctor_exits_1_and_names_parked_servers_and_tripped_sessions(headless: Any) -> None:
    tray = headless({"mcpServers": {"ghost": {"command": "mcp-tray-no-such-command"}}})
    tray.wait_state("ghost", "parked")
    session = trip_a_session(tray, "ghost")

    text = cli(tray.home, "doctor")
    report = json.loads(cli(tray.home, "doctor", "--json").stdout)

    assert text.returncode == 1, text.stdout + text.stderr
    [parked] = [line for line in text.stdout.splitlines() if line.startswith("parked:")]
    assert "server 'ghost' is parked" in parked and "mcp-tray-no-such-command" in parked
    assert parked.endswith("(reported by the running mcp-tray)")
    assert "mcp-tray respawn ghost" in parked
    [tripped] = [line for line in text.stdout.splitlines() if line.startswith("session-tripped:")]
    assert f"session {session} (Cursor on ghost) failed 3 times" in tripped
    assert f"mcp-tray reset {session}" in tripped
    assert "no problems found" not in text.stdout
    assert report["ok"] is False
    assert {row["family"] for row in report["warnings"]} >= {"parked", "session-tripped"}


def test_client_config_without_config_takes_the_running_trays_and_says_so(
    headless: Any,
) -> None:
    # The tray runs on a config of its own; the per-user one does not exist.
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")
    assert not tray.paths.config_file.exists()

    result = cli(tray.home, "client-config", "claude")

    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)["mcpServers"]) == ["echo"]
    assert f"the servers of the running mcp-tray's config, {tray.config_path}" in result.stderr


def test_a_dry_run_install_shows_the_token_masked(headless: Any, tmp_path: Path) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")
    token = cli(tray.home, "token").stdout.strip()
    env = home_env(tray.home) | {"HOME": str(tmp_path / "user")}

    dry = run_mcp_tray(env, "client-config", "cursor", "--http", "--install", "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert f'"Authorization": "Bearer {MASK}"' in dry.stdout
    assert token not in dry.stdout + dry.stderr
    assert not (tmp_path / "user" / ".cursor" / "mcp.json").exists()


def test_the_bridge_reads_requests_from_a_file_and_writes_answers_to_a_file(
    headless: Any, tmp_path: Path
) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")
    requests = tmp_path / "requests.jsonl"
    answers = tmp_path / "answers.jsonl"
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "shell", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))

    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        result = subprocess.run(
            [sys.executable, "-m", "core.cli.main", "connect", "echo"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=home_env(tray.home),
            timeout=60,
            check=False,
        )

    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    replies = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [reply["id"] for reply in replies] == [1, 2]
    assert "echo" in {tool["name"] for tool in replies[1]["result"]["tools"]}
