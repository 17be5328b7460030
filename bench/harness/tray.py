"""A headless tray on a private home: its environment, its CLI, and the tray
process itself (asyncio's ``spawn_tray`` and the blocking ``Tray`` that
bench/gateway.py and bench/scale.py drive).
"""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Final

from bench.harness.clients import TOOL
from bench.harness.errors import BenchError
from bench.harness.files import ECHO_SCRIPT, ROOT
from bench.harness.processes import kill_group

#: The token stays in the private home's file, never in the user's OS keyring.
KEYRING_BACKEND: Final = "keyring.backends.fail.Keyring"
#: Bound on one ``mcp-tray`` CLI command (status, token) the benches run.
CLI_SECONDS: Final = 30


def tray_env(home: Path) -> dict[str, str]:
    """The caller's environment without MCP_TRAY_*, on the private home and this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
    env["MCP_TRAY_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND
    # The benches start and stop their trays themselves: a bridge never starts one.
    env["MCP_TRAY_AUTOSTART"] = "0"
    return env


def tray_cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``mcp-tray ARGS`` of this checkout in ``env``: its exit code and output, never raised."""
    return subprocess.run(
        [sys.executable, "-m", "core.cli.main", *args],
        env=dict(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        check=False,
    )


async def tray_cli_async(home: Path, *args: str, seconds: float = CLI_SECONDS) -> tuple[int, bytes]:
    """``mcp-tray ARGS`` on ``home`` without blocking the loop: its exit code and its
    output; killed past ``seconds``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        *args,
        env=tray_env(home),
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), seconds)
    except TimeoutError:
        process.kill()
        await process.wait()
        out = b""
    assert process.returncode is not None
    return process.returncode, out


def echo_config() -> dict[str, Any]:
    """A config of one server, ``echo`` (tests/servers/echo.py), on any free port."""
    return {
        "gateway": {"port": 0},
        "mcpServers": {SERVER: {"command": sys.executable, "args": [str(ECHO_SCRIPT)]}},
    }


async def spawn_tray(
    config: Path, home: Path, log: IO[bytes], preexec: Callable[[], None] | None = None
) -> asyncio.subprocess.Process:
    """``mcp-tray run --headless --config CONFIG`` on ``home``, its output into ``log``;
    ``preexec`` runs in the child before it starts (a POSIX limit, say)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        "run",
        "--headless",
        "--config",
        str(config),
        env=tray_env(home),
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        # Its own process group: a last-resort kill reaches only what it started.
        start_new_session=True,
        preexec_fn=preexec,
    )


def server_entry(status: dict[str, Any], name: str) -> dict[str, Any]:
    """Server ``name``'s row of ``status --json`` (empty when it has none)."""
    return next((s for s in status.get("servers", []) if s.get("name") == name), {})


SERVER: Final = "echo"


#: Bound on the tray's start-up (spawn, echo handshake, tools listed).
READY_SECONDS: Final = 60.0


#: How long the tray gets to stop its children and exit after SIGTERM.
STOP_SECONDS: Final = 20.0


#: The aggregate rows: the same echo call through ``/mcp`` and a profile's endpoint.
PROFILE: Final = "bench"


#: The tool as an aggregate endpoint names it (SERVER__TOOL).
AGGREGATE_TOOL: Final = f"{SERVER}__{TOOL}"


class Tray:
    """A headless tray in a subprocess, from a private home; always stopped by ``stop``."""

    def __init__(
        self,
        home: Path,
        profile: Path | None,
        runner: tuple[str, ...] = ("-m", "core.cli.main"),
        server: Path = ECHO_SCRIPT,
        document: dict[str, Any] | None = None,
    ) -> None:
        self.home = home
        #: The config to run (default: ``echo`` and the ``bench`` profile over it).
        self.document = document
        #: The script of the one server, ``echo`` (bench/scale.py may serve a leaner one).
        self.server = server
        self.config = home / "bench-config.json"
        self.log = home / "tray-output.log"
        self.profile = profile
        #: The interpreter arguments that run the CLI (bench/scale.py passes one that
        #: picks another event loop first).
        self.runner = runner
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.url = ""
        self.token = ""
        #: pid of the tray's own echo.py child, from ``status --json``.
        self.server_pid: int | None = None
        #: The revision the tray speaks to that child (its probe's verdict), from /metrics.
        self.server_protocol: str | None = None

    @property
    def env(self) -> dict[str, str]:
        return tray_env(self.home)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return tray_cli(self.env, *args)

    def start(self) -> None:
        config = self.document or {
            "mcpServers": {SERVER: {"command": sys.executable, "args": [str(self.server)]}},
            "profiles": {PROFILE: {"servers": [SERVER], "tools": [AGGREGATE_TOOL]}},
        }
        self.config.write_text(json.dumps(config, indent=2))
        runner = list(self.runner)
        if self.profile is not None:
            runner = ["-m", "cProfile", "-o", str(self.profile), *runner]
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, *runner, "run", "--headless", "--config", str(self.config)],
            env=self.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            # Its own process group: a last-resort kill reaches only what it started.
            start_new_session=True,
        )

    def wait_ready(self, seconds: float = READY_SECONDS, names: tuple[str, ...] = ()) -> None:
        """Until every server (or those of ``names``) is ready; its URL and token read."""
        assert self.process is not None
        deadline = time.monotonic() + seconds
        last = "no status yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the tray exited with {self.process.returncode} during start-up:\n{self.output()}"
                )
            status = self.cli("status", "--json")
            if status.returncode == 0:
                body = json.loads(status.stdout)
                servers = {s.get("name"): s for s in body.get("servers", [])}
                last = f"servers { {name: s.get('state') for name, s in servers.items()} }"
                waited = [servers.get(name, {}) for name in names] or list(servers.values())
                if waited and all(s.get("state") == "ready" for s in waited):
                    self.url = str(body["gateway"]["url"]).rstrip("/")
                    self.server_pid = servers.get(SERVER, {}).get("pid")
                    break
            else:
                last = (status.stderr or status.stdout).strip()
            time.sleep(0.2)
        else:
            raise BenchError(f"servers not ready within {seconds:g} s ({last}):\n{self.output()}")
        token = self.cli("token")
        if token.returncode != 0 or not token.stdout.strip():
            raise BenchError(f"mcp-tray token failed: {token.stderr.strip()}")
        self.token = token.stdout.strip()

    def output(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no tray output)"

    def stop(self) -> int | None:
        """SIGTERM and wait (the tray stops its children); SIGKILL its group as a last resort."""
        process = self.process
        if process is None:
            return None
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    print(
                        f"bench: the tray did not stop within {STOP_SECONDS:g} s; killing its group",
                        file=sys.stderr,
                    )
                    with contextlib.suppress(ProcessLookupError):
                        kill_group(process.pid, hard=True)
                    process.wait(5)
            return process.returncode
        finally:
            if self._log_file is not None:
                self._log_file.close()
