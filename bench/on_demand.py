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

With ``--zoo DIR`` the RSS figures are of the nine real servers of the zoo
instead (bench/harness/zoo.py: everything, memory, filesystem,
sequential-thinking, playwright, time, fetch, git and a FastMCP server,
installed in DIR); the first-call figures stay on the project's servers.

Figures are printed, not asserted, and recorded (bench/results/on_demand.json,
on_demand-zoo.json with ``--zoo``). Run: .venv/bin/python bench/on_demand.py
(``--servers N --rounds R``, ``--zoo DIR``).
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

from bench.harness.records import Row, record
from bench.harness.zoo import zoo_entries
from core.base.states import ServerState
from core.settings.config import load_config
from core.settings.paths import default_paths
from core.supervision.supervisor import Supervisor

SERVERS = Path(__file__).resolve().parents[1] / "tests" / "servers"
#: (script, a tool, its arguments)
KINDS = [(SERVERS / "echo.py", "echo", {"text": "x"}), (SERVERS / "legacy_2024.py", "hello", {})]


def with_start(servers: dict[str, Any], start: str) -> dict[str, Any]:
    return {name: {**entry, "start": start} for name, entry in servers.items()}


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


async def main(count: int, rounds: int, zoo: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        scratch = home / "scratch"
        scratch.mkdir()
        fleet = zoo_entries(zoo, scratch) if zoo is not None else entries(count, "always")
        count = len(fleet)
        started = await supervisor(home / "a", with_start(fleet, "always"))
        await until(started, ServerState.READY)
        await asyncio.sleep(1)
        all_started = rss_mib()
        await started.aclose()

        learner = await supervisor(home / "b", with_start(fleet, "on-demand"))
        await until(learner, ServerState.READY)
        await learner.aclose()
        asleep = await supervisor(home / "b", with_start(fleet, "on-demand"))
        await until(asleep, ServerState.SLEEPING)
        await asyncio.sleep(1)
        all_asleep = rss_mib()
        await asleep.aclose()
        what = f"the zoo's {count} real servers" if zoo is not None else f"{count} servers"
        print(f"{what}, RSS of this process + children:")
        print(
            f"  all started: {all_started:.0f} MiB; all on-demand and asleep: {all_asleep:.0f} MiB"
        )

        cold: dict[str, list[float]] = {}
        warm: dict[str, list[float]] = {}
        # The first-call figures on the project's servers, in a home of their own: one
        # start to learn their catalogs, then each round wakes them from sleep.
        learner = await supervisor(home / "c", entries(len(KINDS), "on-demand"))
        await until(learner, ServerState.READY)
        await learner.aclose()
        for _ in range(rounds):
            sup = await supervisor(home / "c", entries(len(KINDS), "on-demand"))
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
    command = f".venv/bin/python bench/on_demand.py --rounds {rounds}" + (
        f" --zoo {zoo}" if zoo is not None else f" --servers {count}"
    )
    print(f"command: {command}")
    echo_cold, echo_warm = sorted(cold["echo.py"]), sorted(warm["echo.py"])
    figures = {
        "servers": count,
        "all_started_mib": all_started,
        "all_asleep_mib": all_asleep,
        "saved_mib": all_started - all_asleep,
        "first_call_asleep_p50_ms": echo_cold[len(echo_cold) // 2] * 1000,
        "warm_call_p50_ms": echo_warm[len(echo_warm) // 2] * 1000,
    }
    rows = [
        Row(
            f"RSS of mcp-tray and {what}, all started vs all on-demand and asleep",
            "asleep: no child",
            "{all_started_mib:.0f} MiB vs {all_asleep_mib:.0f} MiB",
        ),
        Row(
            "first call to a sleeping server (echo.py: wake, spawn, handshake, call) vs warm",
            "within the start timeout",
            "{first_call_asleep_p50_ms:.0f} ms vs {warm_call_p50_ms:.2f} ms p50",
        ),
    ]
    record("on_demand-zoo" if zoo is not None else "on_demand", command, figures, rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--zoo", type=Path, default=None, help="the folder the zoo is installed in (RSS of it)"
    )
    options = parser.parse_args()
    asyncio.run(main(options.servers, options.rounds, options.zoo))
