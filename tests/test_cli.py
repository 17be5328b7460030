"""The mcp-tray command end to end: a real headless instance, real CLI processes.

Strategy: start `mcp-tray run --headless` as a subprocess under a private
MCP_TRAY_HOME, drive it with the real CLI (python -m core.cli.main) and check
stdout, stderr and exit codes; kill it with SIGTERM and SIGKILL and look for
leftover processes with psutil.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.cli.main import SETTLE_SECONDS, action_settled
from core.settings.paths import Paths, default_paths
from core.supervision.run import START_TIMEOUT_SECONDS
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

    def stop(self) -> str:
        """Stop it (SIGTERM, then SIGKILL); its stderr. Once only: the streams close."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is None or self.proc.stderr.closed:
            return ""
        return self.proc.communicate()[1]


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


# ------------------------------------------------ stable endpoints (issue #11)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def initialize(url: str, token: str) -> Any:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "cursor-vscode", "version": "1"},
    }
    return _post(url, token, 1, "initialize", params)


def test_the_http_snippet_names_the_configured_port_and_reaches_the_tray_across_restarts(
    headless: Any, tmp_path: Path
) -> None:
    port = free_port()
    config = {"mcpServers": {"echo": python_server(ECHO)}, "gateway": {"port": port}}
    home = tmp_path / "home"
    entries = []
    for _ in range(3):  # the first start, then two restarts
        tray = headless(config, home=home)
        tray.wait_state("echo", "ready")
        result = cli(home, "client-config", "cursor", "--http", "--config", str(tray.config_path))
        assert result.returncode == 0, result.stderr
        assert "listens on port" not in result.stderr  # no fallback, nothing to say
        entry = json.loads(result.stdout)["mcpServers"]["echo"]
        assert entry["url"] == f"http://127.0.0.1:{port}/mcp/echo"
        assert tray.status()["gateway"]["url"] == f"http://127.0.0.1:{port}"
        token = entry["headers"]["Authorization"].removeprefix("Bearer ")
        assert initialize(entry["url"], token).status_code == 200
        entries.append(entry)
        tray.stop()
    assert entries[0] == entries[1] == entries[2]


def test_a_taken_port_is_one_line_on_stderr_a_warning_in_doctor_and_a_note_in_client_config(
    headless: Any,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        tray = headless({"mcpServers": {"echo": python_server(ECHO)}, "gateway": {"port": port}})
        tray.wait_state("echo", "ready")
        url = tray.status()["gateway"]["url"]
        actual = int(url.rsplit(":", 1)[1])
        assert actual != port

        snippet = cli(
            tray.home, "client-config", "cursor", "--http", "--config", str(tray.config_path)
        )
        doctor = cli(tray.home, "doctor")
        status = cli(tray.home, "status")
        stderr = tray.stop()

    assert snippet.returncode == 0, snippet.stderr
    entry = json.loads(snippet.stdout)["mcpServers"]["echo"]
    assert entry["url"] == f"http://127.0.0.1:{port}/mcp/echo"  # the lasting one
    assert f"listens on port {actual}, not {port}" in snippet.stderr
    assert f"port {port} was taken" in snippet.stderr

    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert any(
        line.startswith(f"port-taken: port {port} is taken") for line in doctor.stdout.splitlines()
    )
    assert f"PORT TAKEN: port {port} is taken" in status.stdout

    taken = [line for line in stderr.splitlines() if "is taken" in line]
    assert len(taken) == 1, stderr
    assert f"mcp-tray listens on {actual} instead" in taken[0]
    assert f"clients configured for {port} will not reach it until" in taken[0]
    assert "Traceback" not in stderr


def test_start_and_respawn_print_the_state_the_action_ended_in(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")

    stopped = cli(tray.home, "stop", "echo")
    started = cli(tray.home, "start", "echo")
    respawned = cli(tray.home, "respawn", "echo")
    again = cli(tray.home, "start", "echo")  # already up: says so at once

    assert (stopped.returncode, stopped.stdout) == (0, "echo: stopped (generation 1)\n")
    assert (started.returncode, started.stdout) == (0, "echo: ready (generation 2)\n")
    assert (respawned.returncode, respawned.stdout) == (0, "echo: ready (generation 3)\n")
    assert (again.returncode, again.stdout) == (0, "echo: ready (generation 3)\n")
    assert tray.status()["servers"][0]["state"] == "ready"


def test_a_start_that_ends_parked_says_parked_and_why_and_exits_1(headless: Any) -> None:
    tray = headless({"mcpServers": {"ghost": {"command": "mcp-tray-no-such-command"}}})
    tray.wait_state("ghost", "parked")

    respawned = cli(tray.home, "respawn", "ghost")
    assert cli(tray.home, "stop", "ghost").returncode == 0
    started = cli(tray.home, "start", "ghost")

    for result, generation in ((respawned, 2), (started, 3)):
        assert result.returncode == 1, result
        lines = result.stdout.splitlines()
        assert lines[0] == f"ghost: parked (generation {generation})"
        assert lines[1].strip().startswith("parked: ")
        assert "mcp-tray-no-such-command" in lines[1] and "not found" in lines[1]
        assert "mcp-tray respawn ghost" in result.stderr
        assert "Traceback" not in result.stderr


def test_the_wait_after_a_start_is_bounded_and_then_prints_the_state(headless: Any) -> None:
    # Never answers its handshake: "starting" until the start timeout (60 s).
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    tray = headless({"mcpServers": {"silent": silent}})
    tray.wait_state("silent", "starting")

    began = time.monotonic()
    result = cli(tray.home, "start", "silent", "--wait", "1")
    elapsed = time.monotonic() - began

    assert result.returncode == 1
    assert result.stdout == "silent: starting (generation 1)\n"
    assert "still starting after 1 s" in result.stderr
    assert elapsed < 15
    assert cli(tray.home, "start", "silent", "--wait", "-1").returncode == 2


def test_the_cli_waits_by_default_as_long_as_a_server_may_take_to_start() -> None:
    assert SETTLE_SECONDS >= START_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    ("verb", "row", "settled"),
    [
        # Right after a start the row still shows the stopped server.
        ("start", {"state": "stopped", "generation": 1}, False),
        ("start", {"state": "starting", "generation": 2}, False),
        ("start", {"state": "ready", "generation": 2}, True),
        ("start", {"state": "exited", "generation": 2}, True),
        ("start", {"state": "parked", "generation": 2}, True),
        # A start on a server that is up, or parked, starts nothing new.
        ("start", {"state": "ready", "generation": 1}, True),
        ("start", {"state": "parked", "generation": 1}, True),
        # Right after a respawn the row may still show the old run.
        ("respawn", {"state": "ready", "generation": 1}, False),
        ("respawn", {"state": "parked", "generation": 1}, False),
        ("respawn", {"state": "parked", "generation": 2}, True),
        ("stop", {"state": "stopped", "generation": 1}, True),
    ],
)
def test_an_action_is_settled_once_the_server_left_where_it_began(
    verb: str, row: dict[str, Any], settled: bool
) -> None:
    assert action_settled(verb, 1, row) is settled
