"""Do real servers list the same tools at every start? False holds across plain restarts.

docs/design.md §3.14 holds a tool whose fingerprint (name, description,
input schema, annotations) changed since it was approved. A server that
rewrote a tool's text at every start would be held at every restart: a
false hold. This runs each server through the real Supervisor ``--runs``
times (default 3) on one mcp-tray home (so one fingerprints file), each
run a plain start -> ready -> stop, and prints per server its tool count,
the tools held after each restart (should be none) and what changed.

The servers: the official npm ones (server-everything, server-memory,
server-filesystem, sequential-thinking: by default through ``npx -y``, or
the binaries in ``--bin DIR``, e.g. a folder's node_modules/.bin) and this
project's SDK ``MCPServer`` test server (tests/servers/echo.py); with
``--uvx PATH`` also mcp-server-time, mcp-server-fetch and mcp-server-git.
With ``--zoo DIR`` the nine real servers of the zoo installed there
(bench/harness/zoo.py: those, playwright, time, fetch, git and a FastMCP server).
Run: .venv/bin/python bench/tool_stability.py [--runs 3] [--bin DIR] [--uvx PATH] [--zoo DIR]
"""

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.zoo import NPM, PYPI, zoo_entries
from core.base.states import ServerState
from core.settings.config import load_config
from core.settings.paths import default_paths
from core.supervision.supervisor import Supervisor

ROOT = Path(__file__).resolve().parents[1]
#: PyPI servers run through ``uvx`` (with ``--uvx PATH``): name -> argv after uvx.
UVX = {name: [binary, *args] for name, (binary, args) in PYPI.items()}
#: A cold npx start (a download) can take this long.
READY_SECONDS = 180.0


def entries(bin_dir: Path | None, folder: Path, uvx: str | None) -> dict[str, dict[str, Any]]:
    servers: dict[str, dict[str, Any]] = {}
    for name, (package, binary, args) in NPM.items():
        argv = [a.replace("{dir}", str(folder)) for a in args]
        if bin_dir is not None:
            servers[name] = {"command": str(bin_dir / binary), "args": argv}
        else:
            servers[name] = {"command": "npx", "args": ["-y", package, *argv]}
    for name, argv in UVX.items() if uvx else ():
        servers[name] = {"command": uvx, "args": argv}
    servers["sdk-echo"] = {
        "command": sys.executable,
        "args": [str(ROOT / "tests" / "servers" / "echo.py")],
    }
    return servers


async def one_run(home: Path, config: Path) -> dict[str, Any]:
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    supervisor = Supervisor(load_config(config), paths)
    await supervisor.start(sweep=False)
    deadline = time.monotonic() + READY_SECONDS
    try:
        while time.monotonic() < deadline:
            states = {s.name: s.state for s in supervisor.servers.values()}
            if all(state in (ServerState.READY, ServerState.PARKED) for state in states.values()):
                break
            await asyncio.sleep(0.2)
        return {
            name: {
                "state": server.state.value,
                "tools": len(server.catalog.listed_tools),
                "held": [
                    (c.tool, c.reason) for c in supervisor.review.pending() if c.server == name
                ],
            }
            for name, server in supervisor.servers.items()
        }
    finally:
        await supervisor.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bin", type=Path, default=None, help="folder with the npm binaries")
    parser.add_argument("--uvx", default=None, help="uvx, to add time, fetch and git from PyPI")
    parser.add_argument("--zoo", type=Path, default=None, help="the zoo's folder: all nine")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        folder = Path(scratch) / "files"
        folder.mkdir()
        config = Path(scratch) / "config.json"
        servers = (
            zoo_entries(args.zoo, folder)
            if args.zoo is not None
            else entries(args.bin, folder, args.uvx)
        )
        config.write_text(json.dumps({"mcpServers": servers}))
        runs = [await one_run(home, config) for _ in range(args.runs)]
    print(f"{'server':22} {'tools':>5}  states over {args.runs} runs; held after a restart")
    for name in runs[0]:
        states = ",".join(run[name]["state"] for run in runs)
        held = [item for run in runs[1:] for item in run[name]["held"]]
        shown = "; ".join(f"{tool}: {why}" for tool, why in held) or "none"
        print(f"{name:22} {runs[0][name]['tools']:>5}  {states}; held: {shown}")
    print(
        f"\nreproduce: .venv/bin/python bench/tool_stability.py --runs {args.runs}"
        + (f" --bin {args.bin}" if args.bin else "")
        + (f" --uvx {args.uvx}" if args.uvx else "")
        + (f" --zoo {args.zoo}" if args.zoo else "")
    )


if __name__ == "__main__":
    asyncio.run(main())
