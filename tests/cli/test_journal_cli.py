"""``mcp-tray calls`` and the journal of a real ``mcp-tray run --headless`` process.

Strategy: a real tray subprocess on the real echo server; calls made over real HTTP as a
handshake-era client does (initialize, then tools/call with the session id); the real
``mcp-tray calls`` command run as a subprocess, through the API while the tray runs and
on the file once it is gone; the tray SIGKILLed to measure what the journal lost; a
journal file of garbage bytes put in its place before a tray starts.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from core.registry.journal import JOURNAL_FILE, CallQuery, read_calls
from core.settings.paths import default_paths
from tests.conftest import ECHO, python_server, wait_until_sync
from tests.support import paths
from tests.support.cli_support import Headless, RpcSession, cli, home_env

REPO = paths.REPO


def cursor_session(tray: Headless, server: str = "echo") -> RpcSession:
    """A handshake-era HTTP client session of a running headless tray (as Cursor)."""
    tray.wait_state(server, "ready")
    token = cli(tray.home, "token").stdout.strip()
    return RpcSession(f"{tray.status()['gateway']['url']}/mcp/{server}", token, "cursor-vscode")


def calls_json(home: Path, *args: str) -> list[dict[str, Any]]:
    done = cli(home, "calls", "--json", *args)
    assert done.returncode == 0, done.stderr
    records: list[dict[str, Any]] = json.loads(done.stdout)
    return records


def test_calls_json_filters_by_server_client_tool_outcome_since_and_limit(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    client = cursor_session(tray)
    client.call("echo", {"text": "one"})
    client.call("fail", {"message": "two"})
    client.call("whoami", {})
    every = wait_until_sync(lambda: len(calls_json(tray.home)) >= 3 and calls_json(tray.home))
    assert [r["tool"] for r in every] == ["echo", "fail", "whoami"]
    for record in every:
        assert {"time", "server", "tool", "client", "outcome", "duration_ms"} <= set(record)
        assert record["client"] == "Cursor"
        assert record["server"] == "echo"
    assert [r["tool"] for r in calls_json(tray.home, "--tool", "*o*")] == ["echo", "whoami"]
    assert [r["tool"] for r in calls_json(tray.home, "--outcome", "tool-error")] == ["fail"]
    assert [r["tool"] for r in calls_json(tray.home, "--limit", "1")] == ["whoami"]
    assert len(calls_json(tray.home, "--client", "cursor", "--since", "10m")) == 3
    assert calls_json(tray.home, "--client", "Claude Code") == []
    assert calls_json(tray.home, "--server", "other") == []
    bad = cli(tray.home, "calls", "--since", "soon")
    assert bad.returncode == 2
    assert "'soon' is neither a time ago" in bad.stderr
    table = cli(tray.home, "calls")
    assert table.returncode == 0
    assert "Cursor" in table.stdout and "fail" in table.stdout and "tool-error" in table.stdout
    # With the tray gone the record stays readable: the file is read directly.
    tray.stop()
    after = calls_json(tray.home, "--outcome", "tool-error")
    assert [r["tool"] for r in after] == ["fail"]


def interrupt(process: "subprocess.Popen[str]") -> None:
    """Ctrl+C, as a person at the terminal would; a process it does not end fails the
    test with what the OS says of its signals, and is killed, not left to later tests."""
    process.send_signal(signal.SIGINT)
    try:
        process.communicate(timeout=10)  # closes its pipes too
    except subprocess.TimeoutExpired:
        masks: list[str] = []
        with contextlib.suppress(OSError), open(f"/proc/{process.pid}/status") as status:  # Linux
            masks = [line.strip() for line in status if line.startswith(("SigBlk", "SigIgn"))]
        process.kill()
        process.communicate()
        # A shell starts a background job (`pytest &`) with SIGINT ignored, and every
        # process below it inherits that: then nothing here is wrong but the start.
        raise AssertionError(
            f"SIGINT did not end pid {process.pid} within 10 s: {masks} "
            "(SigIgn holding 0x2: SIGINT was ignored where the tests were started)"
        ) from None


def test_calls_follow_prints_each_new_call_as_one_json_line(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    client = cursor_session(tray)
    client.call("echo", {"text": "before"})
    wait_until_sync(lambda: calls_json(tray.home), what="the first record")
    follower = subprocess.Popen(
        [sys.executable, "-m", "core.cli.main", "calls", "--follow", "--json", "--limit", "1"],
        env=home_env(tray.home),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["arguments"] == {"text": "before"}
        client.call("echo", {"text": "after"})
        ended = time.monotonic()
        second = json.loads(follower.stdout.readline())
        assert second["arguments"] == {"text": "after"}
        # Written within its batch, then read on the follower's next look.
        assert time.monotonic() - ended < 5
    finally:
        interrupt(follower)


def test_a_tray_killed_hard_loses_at_most_the_last_second_of_calls(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    client = cursor_session(tray)
    ended: dict[int, float] = {}
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < 2.0:
        client.call("echo", {"text": f"call {n}"})
        ended[n] = time.monotonic()
        n += 1
    tray.proc.kill()  # SIGKILL: nothing of the tray runs after it
    killed = time.monotonic()
    tray.proc.wait(timeout=10)
    kept = {
        r.arguments
        for r in read_calls(tray.paths.state_dir / JOURNAL_FILE, CallQuery(limit=100_000))
    }
    lost = [i for i in ended if json.dumps({"text": f"call {i}"}) not in kept]
    assert n > 10
    assert all(killed - ended[i] <= 1.0 for i in lost), (
        f"{len(lost)} of {n} calls lost, the oldest ended "
        f"{max(killed - ended[i] for i in lost):.3f} s before the kill"
    )


def test_a_damaged_journal_is_moved_aside_and_the_tray_starts_with_a_warning(
    headless: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    state = default_paths({"MCP_TRAY_HOME": str(home)}).state_dir
    state.mkdir(parents=True, exist_ok=True)
    (state / JOURNAL_FILE).write_bytes(os.urandom(8192))
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}}, home)
    client = cursor_session(tray)
    client.call("echo", {"text": "on the new journal"})
    records = wait_until_sync(lambda: calls_json(home), what="a record in the new journal")
    assert records[-1]["arguments"] == {"text": "on the new journal"}
    assert len(list(state.glob(f"{JOURNAL_FILE}.damaged-*"))) == 1
    doctor = cli(home, "doctor")
    assert "journal-damaged" in doctor.stdout
    assert "moved to calls.sqlite.damaged-" in doctor.stdout
