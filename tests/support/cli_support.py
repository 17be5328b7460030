"""The mcp-tray command in a subprocess, and a headless tray as one, for the tests
that drive it from outside (not a test module)."""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.base.errors import NotRunning
from core.cli.control_client import ControlClient
from core.settings.paths import Paths, default_paths
from core.settings.runtime import running_instance
from tests.conftest import wait_until_sync


def run_python(
    args: Sequence[str], env: Mapping[str, str], *, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with exactly ``env``: output captured as text, the exit code returned."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=timeout,
        check=False,
    )


def run_mcp_tray(
    env: Mapping[str, str], *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``mcp-tray ARGS`` from this checkout (``python -m core.cli.main``)."""
    return run_python(["-m", "core.cli.main", *args], env, stdin=stdin, timeout=timeout)


#: keyring's backend that is never usable: the token falls back to its file.
NO_KEYRING = "keyring.backends.fail.Keyring"


def home_env(home: Path) -> dict[str, str]:
    """Our environment, with mcp-tray's home at ``home`` and no OS keyring."""
    return dict(os.environ, MCP_TRAY_HOME=str(home), PYTHON_KEYRING_BACKEND=NO_KEYRING)


def cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_mcp_tray(home_env(home), *args, timeout=timeout)


def _file_limit(limit: int) -> Callable[[], None]:
    """What a child runs before it starts: RLIMIT_NOFILE soft and hard at ``limit``."""

    def apply() -> None:
        if sys.platform != "win32":
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


def api_status(paths: Paths) -> dict[str, Any] | None:
    """The running tray's ``/api/v1/status``, asked from this process (None while none is
    up), through the client the CLI uses. For waits: a ``mcp-tray status`` per look is a
    Python start, a tenth of a second of CPU taken from the tray being waited for. The
    token is read from its file, as the tray under test writes it (no keyring)."""
    try:
        info = running_instance(paths)
        token = paths.token_file.read_text().strip()
    except (NotRunning, OSError):
        return None
    try:
        return ControlClient(paths, info, token).get("/api/v1/status")
    except NotRunning:
        return None


class Headless:
    def __init__(
        self,
        home: Path,
        config: dict[str, Any],
        file_limit: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``env``: variables to set (or replace) in the tray's environment."""
        self.home = home
        self.config_path = home / "test-config.json"
        home.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(config))
        self.paths: Paths = default_paths({"MCP_TRAY_HOME": str(home)})
        env = {**home_env(home), **(env or {})}
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
            preexec_fn=None if file_limit is None else _file_limit(file_limit),
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
            status = api_status(self.paths)
            if status is None:  # not up yet (or a stale runtime file)
                return None
            servers: list[dict[str, Any]] = status["servers"]
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
            if sys.platform == "win32":
                # SIGTERM is TerminateProcess there, a hard kill: ask as `mcp-tray quit` does.
                cli(self.home, "quit", timeout=30)
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is None or self.proc.stderr.closed:
            return ""
        return self.proc.communicate()[1]


def post_jsonrpc(
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


def trip_a_session(tray: Headless, server: str) -> str:
    """Open an HTTP client session (as Cursor) on parked ``server`` and trip it:
    four calls, each failing with the parked reason. Its session id."""
    token = cli(tray.home, "token").stdout.strip()
    url = f"{tray.status()['gateway']['url']}/mcp/{server}"
    init = post_jsonrpc(
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
    session: str = init.headers["mcp-session-id"]
    for request_id in range(2, 6):
        reply = post_jsonrpc(
            url, token, request_id, "tools/call", {"name": "x", "arguments": {}}, session
        )
        assert reply.json()["result"]["isError"] is True
    return session


class RpcSession:
    """A handshake-era HTTP client session by plain JSON-RPC posts (from the test's thread)."""

    def __init__(self, url: str, token: str, client_name: str) -> None:
        self.url, self.token = url, token
        init = post_jsonrpc(
            url,
            token,
            1,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": client_name, "version": "1"},
            },
        )
        self.session: str = init.headers["mcp-session-id"]
        self.ids = 1

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        self.ids += 1
        reply = post_jsonrpc(
            self.url,
            self.token,
            self.ids,
            "tools/call",
            {"name": tool, "arguments": arguments},
            self.session,
        )
        assert reply.status_code == 200, reply.text
        return reply
