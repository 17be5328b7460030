"""A slow-starting 2026-07-28 server: how long until it is ready, and on which try.

One Supervisor (the tray's default timing: a 5 s probe window, a 60 s start
timeout) runs tests/servers/slow_modern.py, an SDK 2.3 server that sleeps
``--delay`` seconds (default 10, as one started through ``uvx`` or a cold
Python on a busy machine) before it reads its stdin. Printed: spawn -> ready,
the generation it was ready in (1 means the first try), the era it speaks,
and mcp-tray's own log lines about the start. Figures are reported, not
asserted. Run: .venv/bin/python bench/slow_start.py [--delay 10]
"""

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.records import Row, record
from core.base.states import ServerState
from core.settings.config import load_config
from core.settings.paths import default_paths
from core.supervision.supervisor import Supervisor

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "servers" / "slow_modern.py"
#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS = (
    Row(
        "a 2026-07-28 server that starts late → ready",
        "ready on its first try, never parked",
        "{ready_s:.2f} s after spawn for a {delay_s:g} s delay; generation {generation:d} "
        "({state}, era {era})",
    ),
)


async def measure(home: Path, delay: float) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    entry = {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"SLOW_START_SECONDS": str(delay)},
    }
    paths.config_file.write_text(json.dumps({"mcpServers": {"slow": entry}}))
    supervisor = Supervisor(load_config(paths.config_file), paths)
    started = time.perf_counter()
    await supervisor.start(sweep=False)
    server = supervisor.server("slow")
    try:
        while server.state not in (ServerState.READY, ServerState.PARKED):
            await asyncio.sleep(0.01)
            if time.perf_counter() - started > 400:
                raise SystemExit("not ready or parked within 400 s")
        elapsed = time.perf_counter() - started
        state, generation, era = server.state.value, server.generation, server.catalog.version
    finally:
        await supervisor.aclose()
    print(
        f"server start delay: {delay:g} s; probe window {server.timing.probe_timeout:g} s; start timeout {server.timing.start_timeout:g} s"
    )
    print(f"state: {state}; generation: {generation} (1: the first try); era: {era}")
    if server.parked_reason:
        print(f"parked: {server.parked_reason}")
    print(f"spawn -> {state}: {elapsed:.2f} s")
    print("mcp-tray's log of the start:")
    for line in server.log_path.read_text().splitlines():
        if "[mcp-tray]" in line:
            print(f"  {line.split('[mcp-tray] ', 1)[1]}")
    command = f".venv/bin/python bench/slow_start.py --delay {delay:g}"
    print(f"command: {command}")
    rows = [row.filled(state=state, era=str(era)) for row in ROWS]
    record(
        "slow_start",
        command,
        {"ready_s": elapsed, "generation": generation, "delay_s": delay},
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=10.0, help="the server's start delay (s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        asyncio.run(measure(Path(tmp), args.delay))


if __name__ == "__main__":
    main()
