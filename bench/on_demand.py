"""What on-demand servers save and cost: RSS all started vs all asleep, first call asleep vs warm.

One Supervisor in this process runs N servers of the project's own (the
echo test server, a Python SDK server, and the hand-written handshake-era
legacy server, alternating) from a temporary MCP_TRAY_HOME:

* RSS: this process plus every child, summed (psutil), once all N are
  started ("start": "always", every one ready) and once all N are asleep
  ("start": "on-demand": a first Supervisor learns each catalog, a second
  one on the same home restores them, so no child starts);
* first call: a ``tools/call`` to a sleeping server (wake, spawn, handshake,
  call), ROUNDS times, each from a fresh Supervisor whose servers sleep;
  then the same call on the warm server.

Figures are printed, not asserted. Run: .venv/bin/python bench/on_demand.py
(``--servers N --rounds R``).
"""

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.base.states import ServerState
from core.settings.config import load_config
from core.settings.paths import default_paths
from core.supervision.supervisor import Supervisor

SERVERS = Path(__file__).resolve().parents[1] / "tests" / "servers"
#: (script, a tool, its arguments)
KINDS = [(SERVERS / "echo.py", "echo", {"text": "x"}), (SERVERS / "legacy_2024.py", "hello", {})]


def entries(count: int, start: str) -> dict[str, Any]:
    return {
        f"s{i}": {
            "command": sys.executable,
            "args": [str(KINDS[i % len(KINDS)][0])],
            "start": start,
        }
        for i in range(count)
    }


async def supervisor(home: Path, servers: dict[str, Any]) -> Supervisor:
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    paths.config_file.write_text(json.dumps({"mcpServers": servers}))
    made = Supervisor(load_config(paths.config_file), paths)
    await made.start(sweep=False)
    return made


async def until(sup: Supervisor, state: ServerState, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not all(s.state is state for s in sup.servers.values()):
        if time.monotonic() > deadline:
            raise SystemExit(f"not all {state.value} after {timeout} s")
        await asyncio.sleep(0.05)


def rss_mib() -> float:
    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += child.memory_info().rss
    return total / 2**20


async def main(count: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        started = await supervisor(home / "a", entries(count, "always"))
        await until(started, ServerState.READY)
        await asyncio.sleep(1)
        all_started = rss_mib()
        await started.aclose()

        learner = await supervisor(home / "b", entries(count, "on-demand"))
        await until(learner, ServerState.READY)
        await learner.aclose()
        asleep = await supervisor(home / "b", entries(count, "on-demand"))
        await until(asleep, ServerState.SLEEPING)
        await asyncio.sleep(1)
        all_asleep = rss_mib()
        await asleep.aclose()
        print(f"{count} servers, RSS of this process + children:")
        print(
            f"  all started: {all_started:.0f} MiB; all on-demand and asleep: {all_asleep:.0f} MiB"
        )

        cold: dict[str, list[float]] = {}
        warm: dict[str, list[float]] = {}
        for _ in range(rounds):
            sup = await supervisor(home / "b", entries(len(KINDS), "on-demand"))
            await until(sup, ServerState.SLEEPING)
            for i, (script, tool, arguments) in enumerate(KINDS):
                began = time.perf_counter()
                await sup.call_tool(f"s{i}", tool, arguments)
                cold.setdefault(script.name, []).append(time.perf_counter() - began)
                began = time.perf_counter()
                await sup.call_tool(f"s{i}", tool, arguments)
                warm.setdefault(script.name, []).append(time.perf_counter() - began)
            await sup.aclose()
        for name in cold:
            c, w = sorted(cold[name]), sorted(warm[name])
            print(
                f"  first call, {name}: asleep p50 {c[len(c) // 2] * 1000:.0f} ms "
                f"(max {c[-1] * 1000:.0f}), warm p50 {w[len(w) // 2] * 1000:.2f} ms, "
                f"{rounds} rounds"
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cores {os.cpu_count()}, load {load:.1f}")
    print(f"command: .venv/bin/python bench/on_demand.py --servers {count} --rounds {rounds}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(main(options.servers, options.rounds))
