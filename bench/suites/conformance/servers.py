"""What the suite talks to: the test server directly over HTTP, and a headless
tray fronting the same server as its stdio child.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import json
import subprocess
import time
from pathlib import Path

from bench.harness.errors import BenchError
from bench.harness.files import ROOT
from bench.harness.tray import tray_cli, tray_env
from bench.suites.conformance.constants import READY_SECONDS, SERVER, SERVER_SCRIPT
from bench.suites.conformance.processes import Processes, log_tail


class DirectServer:
    """conformance_server.py --http in its own process group."""

    def __init__(self, tmp: Path, processes: Processes) -> None:
        self.portfile = tmp / "direct.port"
        self.log = tmp / "direct-server.log"
        self.processes = processes
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER_SCRIPT), "--http", "--port-file", str(self.portfile)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.track(self.process.pid, "the direct test server", self.process)

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the direct server exited with {self.process.returncode}:\n{log_tail(self.log)}"
                )
            if self.portfile.exists():
                self.url = f"http://127.0.0.1:{int(self.portfile.read_text())}/mcp"
                return
            time.sleep(0.05)
        raise BenchError(f"the direct server did not listen within {READY_SECONDS:g} s")

    def stop(self) -> None:
        if self.process is not None:
            self.processes.stop(self.process.pid)


class Tray:
    """A headless tray from a private home, fronting the test server as its stdio child."""

    def __init__(self, home: Path, processes: Processes) -> None:
        self.home = home
        self.config = home / "conformance-config.json"
        self.log = home / "tray-output.log"
        self.processes = processes
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""

    @property
    def env(self) -> dict[str, str]:
        return tray_env(self.home)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return tray_cli(self.env, *args)

    def start(self) -> None:
        config = {
            # One entry, with the default "protocol": "auto", for both eras' scenarios.
            "mcpServers": {SERVER: {"command": sys.executable, "args": [str(SERVER_SCRIPT)]}},
            "gateway": {"port": 0},
        }
        self.config.write_text(json.dumps(config, indent=2))
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "core.cli.main",
                    "run",
                    "--headless",
                    "--config",
                    str(self.config),
                ],
                env=self.env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.track(self.process.pid, "the tray", self.process)

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        last = "no status yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the tray exited with {self.process.returncode} during start-up:\n"
                    f"{log_tail(self.log)}"
                )
            status = self.cli("status", "--json")
            if status.returncode == 0:
                body = json.loads(status.stdout)
                servers = {s.get("name"): s for s in body.get("servers", [])}
                last = f"servers { {name: s.get('state') for name, s in servers.items()} }"
                if servers.get(SERVER, {}).get("state") == "ready":
                    self.url = str(body["gateway"]["url"]).rstrip("/")
                    break
            else:
                last = (status.stderr or status.stdout).strip()
            time.sleep(0.2)
        else:
            raise BenchError(
                f"{SERVER} not ready in the tray within {READY_SECONDS:g} s ({last}):\n"
                f"{log_tail(self.log)}"
            )
        token = self.cli("token")
        if token.returncode != 0 or not token.stdout.strip():
            raise BenchError(f"mcp-tray token failed: {token.stderr.strip()}")
        self.token = token.stdout.strip()

    def stop(self) -> int | None:
        """SIGTERM the tray (it stops its children), SIGKILL its group as a last resort."""
        if self.process is None:
            return None
        self.processes.stop(self.process.pid)
        return self.process.poll()
