"""A client launched while no tray runs: how long until its bridge's first answer.

Each round makes a private home (the echo test server, any free port, no
display, no keyring) with no tray running, launches ``mcp-tray connect
echo`` under the MCP SDK's stdio client and times launch -> the answer to
its ``initialize``: the bridge starts the tray (``mcp-tray run
--minimized``, headless here), the tray starts the server, and the answer
comes through. Then the tray is stopped (SIGTERM, its stop contract) before
the next round. With ``MCP_TRAY_AUTOSTART=0`` the same launch is answered
"mcp-tray is not running" instead; that time is measured too. Figures are
reported, not asserted.

Run: .venv/bin/python bench/autostart.py [--rounds 5]
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import psutil
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness.records import Row, record  # noqa: E402
from core.settings.paths import default_paths  # noqa: E402
from core.settings.runtime import running_instance  # noqa: E402

#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS = (
    Row(
        "a client's bridge with no tray running → first answer, p50",
        "answered (the bridge starts the tray)",
        "{on_p50_s:.2f} s (min {on_min_s:.2f}, max {on_max_s:.2f}; the tray's start and the "
        "child's); with MCP_TRAY_AUTOSTART=0 the 'not running' answer in {off_p50_s:.2f} s",
    ),
)

ECHO = ROOT / "tests" / "servers" / "echo.py"


def bridge_env(home: Path, autostart: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    env.update(
        MCP_TRAY_HOME=str(home),
        MCP_TRAY_AUTOSTART="1" if autostart else "0",
        PYTHONPATH=str(ROOT),
        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
    )
    return env


async def one_round(home: Path, autostart: bool, quiet: TextIO) -> tuple[float, str]:
    """Launch -> first answer (seconds), and what the answer was."""
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    entry = {"command": sys.executable, "args": [str(ECHO)]}
    config = {"gateway": {"port": 0}, "mcpServers": {"echo": entry}}
    paths.config_file.write_text(json.dumps(config))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", "echo"],
        env=bridge_env(home, autostart),
        cwd=str(ROOT),
    )
    started = time.perf_counter()
    async with stdio_client(params, errlog=quiet) as (read, write):
        async with ClientSession(read, write) as session:
            try:
                result = await session.initialize()
                answer = f"initialize answered by {result.server_info.name}"
            except MCPError as exc:
                answer = f"error: {str(exc)[:60]}…"
            elapsed = time.perf_counter() - started
    try:
        pid = running_instance(paths).pid
    except Exception:
        return elapsed, answer
    tray = psutil.Process(pid)
    tray.send_signal(signal.SIGTERM)
    tray.wait(30)
    return elapsed, answer


async def measure(rounds: int, quiet: TextIO) -> None:
    figures: dict[str, float] = {}
    for autostart in (True, False):
        times = []
        answer = ""
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
                elapsed, answer = await one_round(Path(tmp), autostart, quiet)
            times.append(elapsed)
        label = "autostart on " if autostart else "autostart off"
        key = "on" if autostart else "off"
        figures[f"{key}_p50_s"] = statistics.median(times)
        figures[f"{key}_min_s"] = min(times)
        figures[f"{key}_max_s"] = max(times)
        print(
            f"{label}: launch -> first answer p50 {statistics.median(times):.2f} s, "
            f"min {min(times):.2f} s, max {max(times):.2f} s over {rounds} rounds ({answer})"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    command = f".venv/bin/python bench/autostart.py --rounds {rounds}"
    print(f"load average {load:.1f}; command: {command}")
    record("autostart", command, figures, ROWS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with open(os.devnull, "w") as quiet:  # the bridges' stderr
        asyncio.run(measure(args.rounds, quiet))


if __name__ == "__main__":
    main()
