"""The mcp-tray command end to end: a real headless instance, real CLI processes.

Strategy: start `mcp-tray run --headless` as a subprocess under a private
MCP_TRAY_HOME, drive it with the real CLI (python -m core.cli.main) and check
stdout, stderr and exit codes; stop it with ``quit`` (every OS), SIGTERM and
SIGKILL (POSIX; on Windows SIGTERM is a hard kill and the job objects leave
no orphans, so those tests are marked per OS) and look for leftover
processes with psutil. Hostile input (bad numbers, names no config
can hold, a FIFO as the config, a damaged registry file written by the test,
empty stdin) must give one line on stderr and an exit code from the
documented set, never a traceback. Every process runs with keyring's "fail"
backend, so no test touches the real OS keyring and the API token lives in
its 0600 file; tests that need a working keyring use tests/support/fake_keyring.
Two seams run in-process: a handler that fails like a bug, and an API peer
that hangs up.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.base.errors import CommandError
from core.cli import main as cli_main
from core.cli import secret
from core.cli.control_client import ControlClient
from core.cli.parser import MAX_SECONDS, SETTLE_SECONDS
from core.cli.servers import action_settled
from core.registry.records import ROLE_BRIDGE
from core.registry.store import WorkerRegistry
from core.serving.http.api import MAX_CALL_TIMEOUT_SECONDS
from core.settings.paths import Paths, default_paths
from core.settings.runtime import RuntimeInfo
from core.settings.secrets import KEYRING_SERVICE
from core.supervision.run import START_TIMEOUT_SECONDS
from tests.conftest import ECHO, GRANDCHILD, make_fifo, python_server, wait_until_sync
from tests.conftest import process_alive as alive
from tests.support.cli_support import (
    api_status,
    cli,
    home_env,
    post_jsonrpc,
    run_mcp_tray,
    run_python,
    trip_a_session,
)
from tests.support.fake_keyring import FileKeyring


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """``home_env`` without any other MCP_TRAY_* variable (the doctor would report it)."""
    env = {k: v for k, v in home_env(home).items() if not k.startswith("MCP_TRAY_")}
    return env | {"MCP_TRAY_HOME": str(home)} | extra


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a failing command printed on stderr (and no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"mcpServers": {"a": {"command": "x",}}}', "invalid JSON"),
        ('{"mcpServers": {"a": {"args": []}}}', "has no 'command'"),
        ('{"mcpServers": {"a": {"command": ["npx"]}}}', "must be a non-empty string"),
        ('{"mcpServers": {"a": {"command": "x", "enviroment": {}}}}', "unknown key"),
        ("", "the file is empty"),
        ('{"mcpServers": {"a": {"command": "x", "keepalive_seconds": NaN}}}', "NaN"),
        ('{"mcpServers": ' + "[" * 1000 + "]" * 1000 + "}", "nested deeper than"),
        ('{"mcpServers": {"a": {"command": "x\\u0000"}}}', "NUL character"),
        ('{"mcpServers": {"a": {"command": "\\ud800"}}}', "lone surrogate"),
        ('{"mcpServers": {"a\\n": {"command": "x"}}}', "a server name may hold only"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}', "no '='"),
    ],
    ids=[
        "invalid-json",
        "missing-command",
        "wrong-type",
        "unknown-key",
        "empty-file",
        "nan",
        "deep-nesting",
        "nul",
        "lone-surrogate",
        "newline-in-name",
        "equals-in-env-name",
    ],
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


@pytest.mark.skipif(
    sys.platform == "win32",
    reason="SIGTERM is TerminateProcess on Windows, a hard kill with no stop contract "
    "(docs/platforms.md); the quit test below is the polite stop there",
)
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


def test_quit_stops_every_child_and_grandchild_and_exits_0(headless: Any, tmp_path: Path) -> None:
    # The polite stop of every OS (Windows has no SIGTERM to hear).
    pid_file = tmp_path / "gc.pid"
    tray = headless(
        {"mcpServers": {"gc": python_server(GRANDCHILD, GRANDCHILD_PID_FILE=str(pid_file))}}
    )
    server = tray.wait_state("gc", "ready")
    grandchild = int(pid_file.read_text())

    result = cli(tray.home, "quit")
    assert result.returncode == 0, result.stderr
    assert f"mcp-tray (pid {tray.proc.pid}) stopped every server and exited" in result.stdout
    assert tray.proc.wait(timeout=20) == 0
    assert not alive(server["pid"])
    assert not alive(grandchild)
    assert not tray.paths.runtime_file.exists()
    assert cli(tray.home, "quit").returncode == 3  # nothing left to ask


@pytest.mark.skipif(
    sys.platform == "win32",
    reason="on Windows the job objects end every server with the killed tray "
    "(KILL_ON_JOB_CLOSE): no orphans are left to sweep, by design; the next test checks that",
)
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


@pytest.mark.skipif(
    sys.platform != "win32", reason="the job object is Windows'; POSIX sweeps orphans instead"
)
def test_on_windows_a_killed_tray_takes_every_server_and_grandchild_with_it(
    headless: Any, tmp_path: Path
) -> None:
    pid_file = tmp_path / "gc.pid"
    config = {"mcpServers": {"gc": python_server(GRANDCHILD, GRANDCHILD_PID_FILE=str(pid_file))}}
    tray = headless(config)
    server = tray.wait_state("gc", "ready")
    grandchild = int(pid_file.read_text())

    tray.proc.kill()  # TerminateProcess: the tray's job handles close with it
    tray.proc.wait()
    wait_until_sync(
        lambda: not alive(server["pid"]) and not alive(grandchild), what="the job's end"
    )


def test_sessions_reset_and_token_commands_against_a_running_instance(headless: Any) -> None:
    tray = headless({"mcpServers": {"ghost": {"command": "mcp-tray-no-such-command"}}})
    tray.wait_state("ghost", "parked")
    token = cli(tray.home, "token").stdout.strip()
    assert token
    session = trip_a_session(tray, "ghost")

    rows = json.loads(cli(tray.home, "sessions", "--json").stdout)
    assert rows == [
        {
            "id": session,
            "client_name": "cursor",
            "server": "ghost",
            "via": "",
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

    table = cli(tray.home, "sessions").stdout.splitlines()
    assert table[0].split() == [
        "SESSION",
        "CLIENT",
        "SERVER",
        "VIA",
        "REQUESTS",
        "FAILURES",
        "BREAKER",
    ]
    assert table[1].split()[:4] == [session, "Cursor", "ghost", "-"]


def test_a_second_gui_launch_exits_0_and_says_the_tray_already_runs(headless: Any) -> None:
    tray = headless({"mcpServers": {}})
    tray.wait_for(lambda: api_status(tray.paths) is not None, "the first instance")
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
    return post_jsonrpc(url, token, 1, "initialize", params)


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
    silent = {"command": sys.executable, "args": ["-c", "import signal; signal.pause()"]}
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


# ------------------------------------------------------- hostile input


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "oversized"])
def test_a_config_that_is_no_regular_file_or_too_big_exits_2_at_once(
    tmp_path: Path, kind: str
) -> None:
    config = tmp_path / "config.json"
    if kind == "fifo":
        make_fifo(config)  # no writer: an open() without O_NONBLOCK would wait forever
        expected = "named pipe (FIFO)"
    elif kind == "device":
        config = Path("/dev/zero")  # a read of it never ends
        expected = "character device"
    elif kind == "folder":
        config.mkdir()
        expected = "a folder"
    else:
        config.write_bytes(b'{"mcpServers": {}}' + b" " * (2 * 1024 * 1024))
        expected = "more than a config may be (1048576 bytes, 1 MiB)"

    result = cli(tmp_path / "home", "run", "--headless", "--config", str(config), timeout=30)

    assert result.returncode == 2
    line = one_line(result)
    assert str(config) in line and expected in line and "Fix:" in line


@pytest.mark.parametrize(
    "args",
    [
        ["call", "a", "b", "--timeout", "nan"],
        ["call", "a", "b", "--timeout", "inf"],
        ["call", "a", "b", "--timeout", "-1"],
        ["call", "a", "b", "--timeout", "0"],
        ["call", "a", "b", "--timeout", "1e309"],
        ["call", "a", "b", "--timeout", "86401"],
        ["call", "a", "b", "--timeout", "1e-130"],
        ["start", "a", "--wait", "nan"],
        ["respawn", "a", "--wait", "inf"],
        ["start", "a", "--wait", "-1"],
        ["logs", "a", "-n", "0"],
        ["logs", "a", "-n", "-5"],
        ["logs", "a", "-n", "1e3"],
        ["frobnicate"],
        ["call"],
    ],
    ids=lambda args: " ".join(args),
)
def test_a_bad_number_or_usage_exits_2_with_one_line(tmp_path: Path, args: list[str]) -> None:
    result = cli(tmp_path / "home", *args)
    assert result.returncode == 2
    assert "--help" in one_line(result)


def test_the_cli_refuses_call_timeouts_the_api_would_refuse() -> None:
    assert MAX_SECONDS == MAX_CALL_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    "args",
    [
        ["call", "a b", "echo"],
        ["respawn", "../etc"],
        ["start", "echo\n"],
        ["logs", "../../etc/passwd"],
        ["connect", "a/b"],
    ],
    ids=["space", "slash", "newline", "path", "connect"],
)
def test_a_name_no_config_can_hold_is_refused_before_it_reaches_a_url_or_a_path(
    tmp_path: Path, args: list[str]
) -> None:
    # Input that ends at once: a bridge answers what its client sends until then.
    result = run_mcp_tray(home_env(tmp_path / "home"), *args, stdin="")
    assert result.returncode == 2
    assert "is not a server name" in one_line(result)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"x": NaN}', "NaN is not JSON"),
        ('{"x": -Infinity}', "-Infinity is not JSON"),
        ('{"x": ' + "[" * 10_000 + "]" * 10_000 + "}", "nested too deeply"),
        ('{"x": ' + "9" * 5000 + "}", "thousands of digits"),
    ],
    ids=["nan", "infinity", "deep", "huge-number"],
)
def test_call_arguments_that_are_not_plain_json_exit_2(
    tmp_path: Path, arguments: str, expected: str
) -> None:
    result = cli(tmp_path / "home", "call", "echo", "echo", "--args", arguments)
    assert result.returncode == 2
    assert expected in one_line(result)


def test_secret_set_says_the_keyring_is_unusable_before_it_reads_a_value(tmp_path: Path) -> None:
    result = run_mcp_tray(home_env(tmp_path / "home"), "secret", "set", "gh", stdin="s3cret\n")
    assert result.returncode == 1
    assert "the OS keyring is not usable" in one_line(result)
    assert "s3cret" not in result.stdout + result.stderr


def test_secret_set_reads_stdin_that_is_not_a_terminal_and_refuses_an_empty_one(
    tmp_path: Path, fake_keyring: FileKeyring
) -> None:
    env = dict(os.environ, MCP_TRAY_HOME=str(tmp_path / "home"))  # the test keyring's variables

    empty = run_mcp_tray(env, "secret", "set", "gh", stdin="")
    piped = run_mcp_tray(env, "secret", "set", "gh", stdin="s3cret\n")
    again = run_mcp_tray(env, "secret", "set", "gh", stdin="other")
    bad_name = run_mcp_tray(env, "secret", "set", "gh\nx", stdin="v")

    assert empty.returncode == 2
    assert "gave an empty value, so nothing was stored" in one_line(empty)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("stored 'gh'")
    assert again.returncode == 0 and again.stdout.startswith("replaced 'gh'")
    assert fake_keyring.get_password(KEYRING_SERVICE, "gh") == "other"
    assert bad_name.returncode == 2
    assert "is not a usable secret name" in one_line(bad_name)


def write_default_config(home: Path, servers: dict[str, Any]) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(home)})
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(json.dumps({"mcpServers": servers}))


def test_doctor_exits_1_on_a_literal_secret_in_the_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_default_config(home, {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "ghp_123"}}})

    result = run_mcp_tray(clean_env(home), "doctor")
    report = json.loads(run_mcp_tray(clean_env(home), "doctor", "--json").stdout)

    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("secret-literal: server 'gh' has a literal value")
    assert "ghp_123" not in result.stdout
    assert report["ok"] is False
    assert [(w["family"], w["hard"]) for w in report["warnings"]] == [("secret-literal", True)]


def test_doctor_shows_a_token_kept_in_a_file_as_information_and_exits_0(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = default_paths({"MCP_TRAY_HOME": str(home)})
    paths.token_file.parent.mkdir(parents=True)
    paths.token_file.write_text("t0k\n")

    result = run_mcp_tray(clean_env(home), "doctor")
    report = json.loads(run_mcp_tray(clean_env(home), "doctor", "--json").stdout)

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "no problems found"
    assert lines[1].startswith(f"info: token-storage: the API token is kept in {paths.token_file}")
    assert report["ok"] is True and report["warnings"] == []
    families = ["token-storage", *["platform"] * 12, "path"]
    assert [note["family"] for note in report["info"]] == families
    assert report["info"][-2]["text"].startswith("express lane: on")


def test_doctor_names_the_backends_in_use_and_mcp_tray_platform_chooses_them(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    native = json.loads(run_mcp_tray(clean_env(home), "doctor", "--json").stdout)["platform"]
    portable_env = dict(clean_env(home), MCP_TRAY_PLATFORM="portable")
    text = run_mcp_tray(portable_env, "doctor")
    portable = json.loads(run_mcp_tray(portable_env, "doctor", "--json").stdout)["platform"]

    assert native["set"] == f"native ({sys.platform})"
    assert portable["set"] == f"portable ({sys.platform})"
    assert portable["exit watch"].startswith("wait thread")
    assert portable["process tree"].startswith("psutil tree")
    if sys.platform == "linux":
        assert native["exit watch"].startswith("pidfd")
        assert native["escapees"].startswith("child subreaper")
    assert "info: platform: pipes: threads (one per pipe)" in text.stdout.splitlines()
    assert text.returncode == 0


def test_an_unknown_mcp_tray_platform_is_a_usage_error_naming_the_choices(tmp_path: Path) -> None:
    env = dict(clean_env(tmp_path / "home"), MCP_TRAY_PLATFORM="bsd")
    result = run_mcp_tray(env, "doctor")
    assert result.returncode == 2
    assert "MCP_TRAY_PLATFORM='bsd' names no backend set: set it to 'native' or 'portable'" in (
        result.stderr
    )


def damage(registry_file: Path, how: str) -> None:
    """A registry file sqlite cannot use: garbage, or a real one with a page overwritten."""
    registry_file.parent.mkdir(parents=True, exist_ok=True)
    if how == "garbage":
        registry_file.write_bytes(b"this is no sqlite file\n" * 500)
        return
    with WorkerRegistry(registry_file) as registry:
        for index in range(200):
            registry.register(
                worker_identity=f"worker-{index}-" + "x" * 40,
                client_name="cursor",
                session_id=f"s{index}",
                role=ROLE_BRIDGE,
            )
    data = bytearray(registry_file.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # the table's root page, past the readable header
    registry_file.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["garbage", "overwritten-page"])
def test_a_damaged_registry_is_one_line_with_its_fix_for_workers_and_doctor(
    tmp_path: Path, how: str
) -> None:
    home = tmp_path / "home"
    registry_file = default_paths({"MCP_TRAY_HOME": str(home)}).registry_file
    damage(registry_file, how)
    before = registry_file.read_bytes()

    workers = run_mcp_tray(clean_env(home), "workers")
    doctor = run_mcp_tray(clean_env(home), "doctor")

    assert workers.returncode == 1
    line = one_line(workers)
    assert str(registry_file) in line and "move it aside" in line
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert "Traceback" not in doctor.stderr
    assert doctor.stdout.startswith("registry: worker registry")
    assert str(registry_file) in doctor.stdout and "move it aside" in doctor.stdout
    assert registry_file.read_bytes() == before  # left untouched


def test_logs_of_an_unknown_server_say_so_and_list_the_configured_ones(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_default_config(home, {"echo": python_server(ECHO), "notes": {"command": "x"}})

    unknown = cli(home, "logs", "nosuch")
    silent = cli(home, "logs", "echo")

    assert unknown.returncode == 1
    assert "no such server 'nosuch'" in one_line(unknown)
    assert "echo, notes" in unknown.stderr
    assert silent.returncode == 1
    assert "no log yet for server 'echo'" in one_line(silent)


def test_status_and_doctor_show_the_trays_token_file_as_information_not_a_warning(
    headless: Any,
) -> None:
    # Any free port: a tray elsewhere on the default one would add a port-taken warning.
    tray = headless({"gateway": {"port": 0}, "mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")

    status = cli(tray.home, "status")
    as_json = tray.status()
    doctor = run_mcp_tray(clean_env(tray.home), "doctor")

    assert "info: token-storage: the API token is kept in" in status.stdout
    assert "warning" not in status.stdout
    assert as_json["warnings"] == []
    assert [note["family"] for note in as_json["info"]] == ["token-storage"]
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.splitlines()[0] == "no problems found"
    assert doctor.stdout.count("info: token-storage:") == 1


def test_a_fifo_renamed_onto_a_running_trays_config_is_refused_and_sigterm_still_stops_it(
    headless: Any, tmp_path: Path
) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    pid = tray.wait_state("echo", "ready")["pid"]
    fifo = tmp_path / "pipe"
    make_fifo(fifo)
    os.replace(fifo, tray.config_path)

    def refused() -> str | None:
        error = cli(tray.home, "status", "--json")
        data = json.loads(error.stdout) if error.returncode == 0 else {}
        return data.get("config_error")

    error = tray.wait_for(refused, "the FIFO refused")
    doctor = run_mcp_tray(clean_env(tray.home), "doctor")
    assert "named pipe (FIFO), not a regular file" in error
    assert tray.status()["servers"][0]["pid"] == pid
    assert doctor.returncode == 1
    assert "config-error: the running mcp-tray refused the last edit" in doctor.stdout

    tray.proc.send_signal(signal.SIGTERM)
    assert tray.proc.wait(timeout=20) == 0
    assert not alive(pid)


def test_an_unexpected_error_is_one_line_and_its_traceback_goes_to_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_TRAY_HOME", str(tmp_path / "home"))

    def broken(args: Any, paths: Paths) -> int:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(secret, "cmd_token", broken)

    assert cli_main.main(["token"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    crash_log = default_paths().log_dir / cli_main.CRASH_LOG
    assert err == [
        "mcp-tray: unexpected error (RuntimeError: simulated bug); please report it with "
        f"the traceback in {crash_log}"
    ]
    assert "Traceback" in crash_log.read_text() and "simulated bug" in crash_log.read_text()


def test_a_tray_that_hangs_up_without_answering_is_one_line_exit_1(tmp_path: Path) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path / "home")})
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        info = RuntimeInfo(
            pid=1,
            port=port,
            url=f"http://127.0.0.1:{port}",
            version="0",
            owner="test",
            started_at=0.0,
        )
        client = ControlClient(paths, info, "t0k", timeout=30)

        def hang_up() -> None:
            peer, _ = server.accept()
            peer.recv(65536)
            peer.close()

        thread = threading.Thread(target=hang_up)
        thread.start()
        with pytest.raises(CommandError) as caught:
            client.request("GET", "/api/v1/status")
        thread.join()

    assert caught.value.code == 1
    assert f"the connection to mcp-tray (pid 1, port {port}) failed" in str(caught.value)
