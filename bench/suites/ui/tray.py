"""The tray GUI in a subprocess, driven by signals and read from its output lines."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from bench.harness.errors import BenchError
from bench.harness.files import BENCH, ROOT
from bench.harness.tray import tray_cli, tray_env
from bench.suites.ui.constants import DEMO, DEMO_SERVERS, READY_SECONDS, REPLY_SECONDS, STOP_SECONDS
from core.settings.paths import Paths, default_paths


@dataclass(frozen=True)
class Reply:
    """The child's answer to SIGUSR2: its window's model row counts."""

    counts: dict[str, int]
    latency: float


@dataclass
class Window:
    """One measured span of the tray process."""

    name: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss: int = 0
    peak_uss: int = 0
    peak_children_rss: int = 0
    children: int = 0
    #: The child's answer right after the span (None: no answer in time).
    reply: Reply | None = None
    #: Its answer right before the span, when asked for (sample counts).
    before: Reply | None = None

    @property
    def cpu_percent(self) -> float:
        return 100.0 * self.cpu_seconds / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Stopped:
    code: int | None
    seconds: float
    forced: bool
    leftovers: list[int]


class Tray:
    """The GUI child from a private home; always stopped by ``stop``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = home / "bench-config.json"
        self.log = home / "tray-output.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.proc: psutil.Process | None = None
        self._log_file: IO[bytes] | None = None
        self.server_pids: set[int] = set()

    @property
    def env(self) -> dict[str, str]:
        return {**tray_env(self.home), "QT_QPA_PLATFORM": "offscreen"}

    @property
    def paths(self) -> Paths:
        return default_paths({"MCP_TRAY_HOME": str(self.home)})

    def write_config(self) -> list[str]:
        servers: dict[str, dict[str, Any]] = {}
        for script, count in DEMO_SERVERS:
            stem = script.removesuffix("_server.py")
            for i in range(1, count + 1):
                name = f"demo-{stem}-{i}"
                entry: dict[str, Any] = {"command": sys.executable, "args": [str(DEMO / script)]}
                if stem == "notes":
                    entry["env"] = {"DEMO_NOTES_FILE": str(self.home / f"{name}.txt")}
                servers[name] = entry
        self.config.write_text(json.dumps({"mcpServers": servers}, indent=2))
        return list(servers)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return tray_cli(self.env, *args)

    def status(self) -> dict[str, Any] | None:
        result = self.cli("status", "--json")
        if result.returncode != 0:
            return None
        body: dict[str, Any] = json.loads(result.stdout)
        return body

    def start(self) -> None:
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "ui.py"),
                "--child",
                "--config",
                str(self.config),
            ],
            env=self.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            # Its own process group: a last-resort kill reaches only what it started.
            start_new_session=True,
        )
        self.proc = psutil.Process(self.process.pid)

    def alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise BenchError(f"the tray exited with {self.process.returncode}:\n{self.output()}")

    def wait_ready(self, names: list[str]) -> None:
        deadline = time.monotonic() + READY_SECONDS
        last = "no status yet"
        while time.monotonic() < deadline:
            self.alive()
            if "READY" in self.output(200):
                body = self.status()
                if body is not None:
                    states = {s.get("name"): s.get("state") for s in body.get("servers", [])}
                    last = f"servers {states}"
                    if all(states.get(name) == "ready" for name in names):
                        self.server_pids = {int(s["pid"]) for s in body["servers"] if s.get("pid")}
                        return
            time.sleep(0.5)
        raise BenchError(f"servers not ready within {READY_SECONDS:g} s ({last}):\n{self.output()}")

    def wait_workers(self, count: int) -> None:
        """Until the tray's registry copy holds ``count`` rows (``status --json``)."""
        deadline = time.monotonic() + READY_SECONDS
        seen = -1
        while time.monotonic() < deadline:
            self.alive()
            body = self.status()
            if body is not None:
                seen = len(body.get("workers", []))
                if seen == count:
                    return
            time.sleep(0.5)
        raise BenchError(f"the tray shows {seen} worker rows, not {count}:\n{self.output()}")

    def _model_lines(self) -> list[str]:
        return [line for line in self.output(None).splitlines() if line.startswith("MODEL#")]

    def model(self, timeout: float = REPLY_SECONDS) -> Reply | None:
        """Ask the child (SIGUSR2) for its window's model row counts; None if no answer.

        The time to the answer is how long the GUI's event loop took to get
        to it: a measure of whether the window still responds.
        """
        assert self.process is not None
        before = len(self._model_lines())
        asked = time.monotonic()
        self.process.send_signal(signal.SIGUSR2)
        while time.monotonic() - asked < timeout:
            self.alive()
            lines = self._model_lines()
            if len(lines) > before:
                latency = time.monotonic() - asked
                counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[before])}
                return Reply(counts, latency)
            time.sleep(0.02)
        return None

    def show_workers_tab(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGUSR1)

    def toggle_window(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)

    def output(self, lines: int | None = 30) -> str:
        with contextlib.suppress(OSError):
            text = self.log.read_text(errors="replace").splitlines()
            return "\n".join(text if lines is None else text[-lines:])
        return "(no tray output)"

    def descendants(self) -> list[psutil.Process]:
        if self.proc is None:
            return []
        with contextlib.suppress(psutil.Error):
            return self.proc.children(recursive=True)
        return []

    def stop(self) -> Stopped:
        """SIGTERM and wait (the app stops its servers); SIGKILL only as a last resort.

        Every demo server seen running is checked afterwards; survivors are
        killed and listed.
        """
        process = self.process
        if process is None:
            return Stopped(None, 0.0, False, [])
        known = self.server_pids | {p.pid for p in self.descendants()}
        forced = False
        asked = time.monotonic()
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    forced = True
                    print(
                        f"bench: the tray did not stop within {STOP_SECONDS:g} s of SIGTERM; "
                        "killing it",
                        file=sys.stderr,
                    )
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(5)
            seconds = time.monotonic() - asked
            leftovers = []
            for pid in sorted(known):
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(pid)
                    if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                        leftovers.append(pid)
                        proc.kill()
            return Stopped(process.returncode, seconds, forced, leftovers)
        finally:
            if self._log_file is not None:
                self._log_file.close()
