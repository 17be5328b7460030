"""The mcp-tray command end to end: a real headless instance, real CLI processes.

Strategy: start `mcp-tray run --headless` as a subprocess under a private
MCP_TRAY_HOME, drive it with the real CLI (python -m core.cli.main) and check
stdout, stderr and exit codes; kill it with SIGTERM and SIGKILL and look for
leftover processes with psutil.
"""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.settings.paths import Paths, default_paths
from core.supervision.sweep import sweep_leftovers
from tests.cli_support import run_mcp_tray, run_python
from tests.conftest import ECHO, GRANDCHILD, python_server, wait_until_sync
from tests.conftest import process_alive as alive


def home_env(home: Path) -> dict[str, str]:
    """Our environment, with mcp-tray's home at ``home``."""
    return dict(os.environ, MCP_TRAY_HOME=str(home))


def cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_mcp_tray(home_env(home), *args, timeout=timeout)


class Headless:
    def __init__(self, home: Path, config: dict[str, Any]) -> None:
        self.home = home
        self.config_path = home / "test-config.json"
        home.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(config))
        self.paths: Paths = default_paths({"MCP_TRAY_HOME": str(home)})
        env = home_env(home)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "core.cli.main",
                "run",
                "--headless",
                "--config",
                str(self.config_path),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_for(self, predicate: Any, what: str, timeout: float = 30) -> Any:
        def check() -> Any:
            if self.proc.poll() is not None:
                raise AssertionError(f"mcp-tray exited early: {self.proc.communicate()}")
            return predicate()

        return wait_until_sync(check, what=what, timeout=timeout)

    def status(self) -> dict[str, Any]:
        result = cli(self.home, "status", "--json")
        assert result.returncode == 0, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def wait_state(self, name: str, state: str, generation: int | None = None) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            result = cli(self.home, "status", "--json")
            if result.returncode == 3:  # not up yet (or a stale runtime file)
                return None
            assert result.returncode == 0, result.stderr
            servers: list[dict[str, Any]] = json.loads(result.stdout)["servers"]
            server = next(s for s in servers if s["name"] == name)
            if server["state"] == state and (
                generation is None or server["generation"] == generation
            ):
                return server
            return None

        result: dict[str, Any] = self.wait_for(check, f"{name} {state}")
        return result

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.communicate()


@pytest.fixture
def headless(tmp_path: Path) -> Iterator[Any]:
    started: list[Headless] = []

    def start(config: dict[str, Any], home: Path | None = None) -> Headless:
        instance = Headless(home or tmp_path / "home", config)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()
    # Whatever a SIGKILLed instance left behind must not outlive the test.
    sweep_leftovers()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"mcpServers": {"a": {"command": "x",}}}', "invalid JSON"),
        ('{"mcpServers": {"a": {"args": []}}}', "has no 'command'"),
        ('{"mcpServers": {"a": {"command": ["npx"]}}}', "must be a non-empty string"),
        ('{"mcpServers": {"a": {"command": "x", "enviroment": {}}}}', "unknown key"),
        ("", "the file is empty"),
    ],
    ids=["invalid-json", "missing-command", "wrong-type", "unknown-key", "empty-file"],
)
def test_a_bad_config_exits_2_with_one_clear_message(
    tmp_path: Path, text: str, expected: str
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(text)

    result = cli(tmp_path / "home", "run", "--headless", "--config", str(config))

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(config) in lines[0]
    assert expected in lines[0]
    assert "Fix:" in lines[0]


def test_commands_exit_3_when_mcp_tray_is_not_running(tmp_path: Path) -> None:
    for args in (["status"], ["call", "a", "b"], ["respawn", "a"], ["stop", "a"], ["start", "a"]):
        result = cli(tmp_path / "home", *args)
        assert result.returncode == 3, (args, result)
        assert "mcp-tray is not running" in result.stderr
        assert "Traceback" not in result.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert cli(tmp_path / "home", "call").returncode == 2
    assert cli(tmp_path / "home", "frobnicate").returncode == 2


def test_status_call_respawn_stop_start_and_logs_against_a_running_instance(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    first = tray.wait_state("echo", "ready")
    status = tray.status()
    assert status["version"]
    assert set(first) == {"name", "state", "pid", "generation", "restarts", "breaker", "last_error"}
    assert first["generation"] == 1 and first["breaker"] == "closed"
    assert psutil.Process(first["pid"]).is_running()

    result = cli(tray.home, "call", "echo", "echo", "--args", '{"text": "hi there"}')
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["content"][0]["text"] == "hi there"

    result = cli(tray.home, "call", "echo", "fail", "--args", '{"message": "nope"}')
    assert result.returncode == 1
    assert json.loads(result.stdout)["isError"] is True
    assert "tool 'fail' reported an error" in result.stderr

    result = cli(tray.home, "call", "ghost", "echo")
    assert result.returncode == 1
    assert "no server named 'ghost'" in result.stderr

    result = cli(tray.home, "call", "echo", "echo", "--args", "{not json")
    assert result.returncode == 2

    assert cli(tray.home, "respawn", "echo").returncode == 0
    second = tray.wait_state("echo", "ready", generation=2)
    assert second["pid"] != first["pid"]
    assert not alive(first["pid"])

    assert cli(tray.home, "stop", "echo").returncode == 0
    stopped = tray.wait_state("echo", "stopped")
    assert stopped["pid"] is None
    result = cli(tray.home, "call", "echo", "echo", "--args", '{"text": "x"}')
    assert result.returncode == 1
    assert "mcp-tray start echo" in result.stderr

    assert cli(tray.home, "start", "echo").returncode == 0
    tray.wait_state("echo", "ready", generation=3)

    result = cli(tray.home, "logs", "echo", "-n", "200")
    assert result.returncode == 0
    assert "echo: started pid" in result.stdout
    assert "generation 3 spawned" in result.stdout


def test_a_second_instance_refuses_to_start(headless: Any, tmp_path: Path) -> None:
    tray = headless({"mcpServers": {}})
    tray.wait_for(lambda: tray.paths.runtime_file.exists(), "runtime file")
    config = tmp_path / "empty.json"
    config.write_text('{"mcpServers": {}}')

    result = cli(tray.home, "run", "--headless", "--config", str(config))

    assert result.returncode == 1
    assert "already running" in result.stderr


def test_sigterm_stops_every_child_and_grandchild_and_exits_0(
    headless: Any, tmp_path: Path
) -> None:
    pid_file = tmp_path / "gc.pid"
    tray = headless(
        {"mcpServers": {"gc": python_server(GRANDCHILD, GRANDCHILD_PID_FILE=str(pid_file))}}
    )
    server = tray.wait_state("gc", "ready")
    grandchild = int(pid_file.read_text())

    tray.proc.send_signal(signal.SIGTERM)
    assert tray.proc.wait(timeout=20) == 0

    assert not alive(server["pid"])
    assert not alive(grandchild)
    assert not tray.paths.runtime_file.exists()


def test_after_sigkill_the_next_start_sweeps_the_leftovers(headless: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "gc.pid"
    config = {"mcpServers": {"gc": python_server(GRANDCHILD, GRANDCHILD_PID_FILE=str(pid_file))}}
    tray = headless(config)
    server = tray.wait_state("gc", "ready")
    grandchild = int(pid_file.read_text())

    tray.proc.kill()
    tray.proc.wait()
    assert alive(server["pid"]) and alive(grandchild)  # orphans, until the next start
    assert cli(tray.home, "status").returncode == 3  # a stale runtime file is not a running tray

    again = headless(config, home=tray.home)
    again.wait_state("gc", "ready")

    assert not alive(server["pid"])
    assert not alive(grandchild)


def _post(
    url: str,
    token: str,
    request_id: int,
    method: str,
    params: dict[str, Any],
    session: str | None = None,
) -> Any:
    """One JSON-RPC request, posted as an MCP client posts it."""
    import httpx

    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return httpx.post(url, json=message, headers=headers, timeout=30)


def test_sessions_reset_and_token_commands_against_a_running_instance(headless: Any) -> None:
    tray = headless({"mcpServers": {"ghost": {"command": "mcp-tray-no-such-command"}}})
    tray.wait_state("ghost", "parked")
    token = cli(tray.home, "token").stdout.strip()
    assert token
    status = tray.status()
    url = f"{status['gateway']['url']}/mcp/ghost"
    init = _post(
        url,
        token,
        1,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "cursor-vscode", "version": "1"},
        },
    )
    session = init.headers["mcp-session-id"]
    for request_id in range(2, 6):
        reply = _post(url, token, request_id, "tools/call", {"name": "x", "arguments": {}}, session)
        assert reply.json()["result"]["isError"] is True

    rows = json.loads(cli(tray.home, "sessions", "--json").stdout)
    assert rows == [
        {
            "id": session,
            "client_name": "cursor",
            "server": "ghost",
            "opened_at": rows[0]["opened_at"],
            "requests": 4,
            "consecutive_failures": 3,
            "breaker": "tripped",
        }
    ]
    assert tray.status()["sessions"][0]["breaker"] == "tripped"

    reset = cli(tray.home, "reset", session)
    assert reset.returncode == 0, reset.stderr
    assert json.loads(cli(tray.home, "sessions", "--json").stdout)[0]["breaker"] == "closed"
    assert cli(tray.home, "reset", "no-such-session").returncode == 1
    all_reset = cli(tray.home, "reset", "--all")
    assert all_reset.returncode == 0 and "reset 0 tripped" in all_reset.stdout


def test_a_second_gui_launch_exits_0_and_says_the_tray_already_runs(headless: Any) -> None:
    tray = headless({"mcpServers": {}})
    tray.wait_for(lambda: cli(tray.home, "status").returncode == 0, "the first instance")
    env = home_env(tray.home) | {"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}
    env.pop("MCP_TRAY_HEADLESS", None)

    second = run_python(["-m", "app.entry"], env)

    assert second.returncode == 0, second.stderr
    assert "already running" in second.stderr
    assert "headless" in second.stderr  # the first one has no window to raise
    assert tray.proc.poll() is None
