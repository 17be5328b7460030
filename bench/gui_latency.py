"""What the tray's window costs the gateway: GUI vs headless latency, in one interleaved run.

Two trays run side by side from this checkout, each on a private
MCP_TRAY_HOME with one server (tests/servers/echo.py):

- ``headless``: ``mcp-tray run --headless --config C``;
- ``gui``: ``mcp-tray run --config C`` as a person launches it, so the real
  app comes up with its window open (Servers tab: a 1 Hz tick, CPU/RSS
  sampled every 5 s), on an Xvfb display with a system tray (trayer) that
  this bench starts (``--display :N`` uses one already running instead).
  The bench checks the app said it runs in the tray, not headless.

A lean client (one HTTP/1.1 keep-alive connection per tray, JSON-RPC
written by hand, as bench/gateway.py's raw client) opens one session on
each and calls ``echo``: ``--warmup`` calls each, then ``--rounds`` rounds
of ``--batch`` calls to one tray and ``--batch`` to the other, the order
swapped every round, so both see the same machine at the same moments.
Reported per tray: p50/p95/p99 of the call latency, and the tray process's
CPU seconds over the measured rounds; then GUI p50 / headless p50 (the
target: within 5 %). Figures are reported, not asserted.

Needs Xvfb and trayer (Debian: apt-get install xvfb trayer libxcb-icccm4
libxcb-keysyms1 libxcb-cursor0). Run: .venv/bin/python bench/gui_latency.py
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

# Run as a script from a checkout: make `core` and `harness` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from bench.harness.files import ECHO_SCRIPT as ECHO
from bench.harness.files import ROOT
from bench.harness.records import Row, record
from bench.harness.stats import percentile
from bench.harness.tray import tray_env
from core.settings.paths import default_paths

READY_SECONDS: Final = 90.0
PROTOCOL: Final = "2025-06-18"
#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS: Final = (
    Row(
        "gateway p50 with the window open vs headless",
        "within 5 %",
        "{gui_over_headless_percent:+.1f} % ({gui_p50_ms:.2f} ms vs {headless_p50_ms:.2f} ms); "
        "tray CPU per call {gui_cpu_per_call_ms:.2f} ms vs {headless_cpu_per_call_ms:.2f} ms; "
        "interleaved, {rounds} rounds × {batch} calls",
    ),
)
TRAYER: Final = ("trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel")


class BenchError(Exception):
    pass


class LeanClient:
    """One keep-alive HTTP/1.1 connection, one MCP session, JSON-RPC by hand."""

    def __init__(self, port: int, token: str, server: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")
        self.head = (
            f"POST /mcp/{server} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            f"authorization: Bearer {token}\r\n"
            "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
            f"mcp-protocol-version: {PROTOCOL}\r\n"
        ).encode("latin-1")
        self.ids = 1

    def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps(message).encode()
        self.sock.sendall(self.head + b"content-length: %d\r\n\r\n" % len(body) + body)
        status = int(self.file.readline().split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while (line := self.file.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers, self.file.read(int(headers.get("content-length", "0")))

    def open_session(self) -> None:
        status, headers, body = self.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "gui-latency-bench", "version": "1"},
                },
            }
        )
        session = headers.get("mcp-session-id")
        if status != 200 or not session:
            raise BenchError(f"initialize: {status} {body[:200]!r}")
        self.head += f"mcp-session-id: {session}\r\n".encode("latin-1")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self) -> int:
        """One echo call; its wall time in ns."""
        self.ids += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}},
        }
        started = time.perf_counter_ns()
        status, _, body = self.post(message)
        took = time.perf_counter_ns() - started
        if status != 200 or b'"hi"' not in body:
            raise BenchError(f"call: {status} {body[:200]!r}")
        return took

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@dataclass
class Tray:
    name: str
    home: Path
    proc: subprocess.Popen[bytes]
    log: Path
    client: LeanClient | None = None
    samples: list[int] = field(default_factory=list)
    cpu: float = 0.0

    def ready(self) -> tuple[int, str]:
        """Wait until its runtime file and echo are up; (port, token)."""
        paths = default_paths({"MCP_TRAY_HOME": str(self.home)})
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                port = int(json.loads(paths.runtime_file.read_text())["port"])
                token = paths.token_file.read_text().strip()
                status = subprocess.run(
                    [sys.executable, "-m", "core.cli.main", "status", "--json"],
                    env=tray_env(self.home),
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                servers = json.loads(status.stdout).get("servers", [])
                if servers and servers[0].get("state") == "ready":
                    return port, token
            time.sleep(0.2)
        raise BenchError(f"{self.name} not ready in {READY_SECONDS:g} s")

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)


def start_tray(name: str, work: Path, gui: bool, display: str | None) -> Tray:
    home = work / name
    home.mkdir()
    config = home / "bench-config.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"echo": {"command": sys.executable, "args": [str(ECHO)]}},
                "gateway": {"port": 0},
            }
        )
    )
    env = tray_env(home)
    args = (
        ["run", "--config", str(config)] if gui else ["run", "--headless", "--config", str(config)]
    )
    if gui:
        assert display is not None
        env.update(DISPLAY=display, QT_QPA_PLATFORM="xcb")
        env.pop("WAYLAND_DISPLAY", None)
    else:
        env.pop("DISPLAY", None)
    log = work / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            # app.entry is the mcp-tray console script: core's CLI with the tray wired in.
            [sys.executable, "-m", "app.entry", *args],
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    return Tray(name, home, proc, log)


@contextlib.contextmanager
def virtual_display(given: str | None) -> Iterator[str]:
    """An Xvfb display with a system tray on it (or the one given)."""
    if given:
        yield given
        return
    for tool in ("Xvfb", "trayer"):
        if shutil.which(tool) is None:
            raise BenchError(f"{tool} is not installed (apt-get install xvfb trayer)")
    number = 90 + os.getpid() % 9
    display = f":{number}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(
            subprocess.Popen(
                ["Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{number}").exists():
            if time.monotonic() > deadline:
                raise BenchError(f"Xvfb did not come up on {display}")
            time.sleep(0.05)
        started.append(
            subprocess.Popen(
                [*TRAYER, "--width", "120", "--height", "32"],
                env=dict(os.environ, DISPLAY=display),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        time.sleep(1.0)  # the tray must own its selection before the app looks for one
        yield display
    finally:
        for proc in reversed(started):
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


def stop(tray: Tray) -> None:
    if tray.client is not None:
        tray.client.close()
    if tray.proc.poll() is None:
        tray.proc.send_signal(signal.SIGTERM)
        try:
            tray.proc.wait(30)
        except subprocess.TimeoutExpired:
            tray.proc.kill()
            tray.proc.wait()


def measure(trays: list[Tray], args: argparse.Namespace) -> None:
    for tray in trays:
        port, token = tray.ready()
        tray.client = LeanClient(port, token, "echo")
        tray.client.open_session()
        for _ in range(args.warmup):
            tray.client.call()
    before = {t.name: t.cpu_seconds() for t in trays}
    for round_no in range(args.rounds):
        order = trays if round_no % 2 == 0 else trays[::-1]
        for tray in order:
            assert tray.client is not None
            tray.samples += [tray.client.call() for _ in range(args.batch)]
    for tray in trays:
        tray.cpu = tray.cpu_seconds() - before[tray.name]


def report(trays: list[Tray], args: argparse.Namespace, command: str) -> None:
    print(f"gateway latency, GUI vs headless ({args.rounds} rounds x {args.batch} calls each, ")
    print(f"interleaved; {args.warmup} warm-up calls each; lean HTTP client, echo.py)")
    p50 = {}
    for tray in trays:
        ms = [ns / 1e6 for ns in tray.samples]
        p50[tray.name] = percentile(ms, 0.50)
        per_call = 1e3 * tray.cpu / len(ms)
        print(
            f"  {tray.name:9} n={len(ms):5}  p50 {percentile(ms, 0.50):.3f} ms  "
            f"p95 {percentile(ms, 0.95):.3f} ms  p99 {percentile(ms, 0.99):.3f} ms  "
            f"tray CPU {tray.cpu:.2f} s ({per_call:.3f} ms/call)"
        )
    ratio = p50["gui"] / p50["headless"]
    print(f"  GUI p50 / headless p50 = {ratio:.3f} ({100 * (ratio - 1):+.1f} %; target within 5 %)")
    print(f"reproduce: {command}")
    figures: dict[str, float | int] = {
        "gui_over_headless_percent": 100 * (ratio - 1),
        "rounds": args.rounds,
        "batch": args.batch,
    }
    for tray in trays:
        figures[f"{tray.name}_p50_ms"] = p50[tray.name]
        figures[f"{tray.name}_cpu_per_call_ms"] = 1e3 * tray.cpu / len(tray.samples)
    record("gui_latency", command, figures, ROWS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--display", help="an X display with a system tray (default: start Xvfb)")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python", "bench/gui_latency.py", *(argv or sys.argv[1:])])
    trays: list[Tray] = []
    with (
        tempfile.TemporaryDirectory(prefix="mcp-tray-gui-latency.") as tmp,
        virtual_display(args.display) as display,
    ):
        work = Path(tmp)
        try:
            trays = [
                start_tray("headless", work, gui=False, display=None),
                start_tray("gui", work, gui=True, display=display),
            ]
            measure(trays, args)
            gui_log = (work / "gui.log").read_text(errors="replace")
            if "running in the tray" not in gui_log:
                raise BenchError(f"the GUI tray did not come up in the tray: {gui_log[-1500:]}")
        except BenchError as exc:
            print(f"bench failed: {exc}", file=sys.stderr)
            return 1
        finally:
            for tray in trays:
                stop(tray)
        report(trays, args, command)
        for tray in trays:
            print(f"  {tray.name} exited {tray.proc.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
