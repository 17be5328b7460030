"""The abuse bench's run: its four parts in order against one tray, and ``--burst``."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx2
import psutil

from bench.harness.logs import trouble_in
from bench.harness.stats import percentile
from bench.harness.tray import SERVER
from bench.suites.abuse.common import LogTail, generate
from bench.suites.abuse.configs import ConfigFigures, check_configs, hot_reload, pick
from bench.suites.abuse.constants import BURST_PROBE_EVERY, BURST_PROBES, PROBE_SECONDS
from bench.suites.abuse.flood import FloodFigures, cli_status, flood
from bench.suites.abuse.metrics import MetricsFigures, metrics_phase
from bench.suites.abuse.requests import RequestFigures, fuzz_requests_phase, generate_requests
from bench.suites.abuse.tray import Tray
from core.base.errors import ConfigError
from core.settings.config import load_config
from core.settings.paths import default_paths
from tests.support.fuzz_config import ECHO_ENTRY, documents


@dataclass
class Figures:
    configs: ConfigFigures = field(default_factory=ConfigFigures)
    flood: FloodFigures = field(default_factory=FloodFigures)
    requests: RequestFigures = field(default_factory=RequestFigures)
    metrics: MetricsFigures = field(default_factory=MetricsFigures)
    tray_pids: list[int] = field(default_factory=list)
    tray_trouble: dict[str, list[str]] = field(default_factory=dict)
    child_trouble: list[str] = field(default_factory=list)
    stop_code: int | None = None
    done: list[str] = field(default_factory=list)


async def bench(
    args: argparse.Namespace, home: Path, figures: Figures, log: IO[bytes], tail: LogTail
) -> None:
    loop = asyncio.get_running_loop()
    scratch = home / "bench"
    docs = generate(documents(), args.configs, args.seed)
    await check_configs(docs, scratch / "configs", args, figures.configs, figures.tray_pids)
    figures.done.append("configs")

    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    config = paths.config_file.resolve()
    config.write_text(
        json.dumps({"gateway": {"port": 0}, "mcpServers": {SERVER: ECHO_ENTRY}}, indent=2)
    )
    tray = Tray(home, config, log)
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    )
    try:
        await tray.start()
        figures.tray_pids.append(tray.pid)
        figures.tray_trouble["start-up"] = trouble_in(tail.new(), "tray output at start-up")

        # The requests of part 3 are generated meanwhile (the reloads mostly wait).
        generation_began = time.perf_counter()
        requests = loop.run_in_executor(
            pool,
            generate_requests,
            args.requests,
            args.control_share,
            args.seed,
            str(scratch / "hypothesis"),
        )
        edit_docs = generate(documents(), args.edits * 4, args.seed + 2)
        loaded = []
        for data in edit_docs:
            probe = scratch / "edit-probe.json"
            probe.write_bytes(data)
            try:
                load_config(probe)
                loaded.append(data)
            except ConfigError:
                pass
        refused = [d for d in edit_docs if d not in loaded]
        n_valid = min(len(loaded), args.edits // 3)
        chosen = pick(loaded, n_valid) + pick(refused, args.edits - n_valid)
        # Interleave accepted and refused edits.
        chosen.sort(key=lambda data: edit_docs.index(data))
        await hot_reload(tray, chosen, scratch, figures.configs, tail)
        figures.tray_trouble["hot reload"] = [
            line for edit in figures.configs.edits for line in edit.trouble
        ]
        figures.done.append("hot reload")

        generated = await requests
        figures.requests.generated = len(generated)
        figures.requests.generation_seconds = time.perf_counter() - generation_began
        tray.alive()

        await flood(tray, args, figures.flood)
        tray.alive()
        figures.tray_trouble["flood"] = trouble_in(tail.new(), "tray output during the flood")
        figures.done.append("flood")

        await fuzz_requests_phase(tray, generated, args, figures.requests)
        del generated
        figures.tray_trouble["fuzzed requests"] = trouble_in(
            tail.new(), "tray output during the fuzzed requests"
        )
        figures.done.append("requests")

        await metrics_phase(tray, args, figures.metrics)
        tray.alive()
        figures.tray_trouble["invented methods"] = trouble_in(
            tail.new(), "tray output during the invented methods"
        )
        figures.done.append("metrics")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        figures.stop_code = await tray.stop()
        figures.tray_trouble["stop"] = trouble_in(tail.new(), "tray output at stop")
        for path in sorted(paths.log_dir.glob("*.log")):
            with contextlib.suppress(OSError):
                figures.child_trouble += trouble_in(path.read_text(errors="replace"), path.name)


async def burst(count: int, file_limit: int, home: Path, log: IO[bytes], tail: LogTail) -> None:
    """``count`` idle connections opened at once on a tray under ``file_limit`` descriptors:
    how long ``status`` takes meanwhile, and whether accept() hit the limit."""
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    config = paths.config_file.resolve()
    config.write_text(json.dumps({"gateway": {"port": 0}, "mcpServers": {SERVER: ECHO_ENTRY}}))
    tray = Tray(home, config, log, file_limit=file_limit)
    await tray.start()
    process = psutil.Process(tray.pid)
    tail.new()
    held: list[socket.socket] = []
    probes: list[float] = []
    failures: list[str] = []
    peak_fds = process.num_fds()
    try:
        began = time.perf_counter()
        for _ in range(count):
            # Plain connects: the kernel completes each into the listen backlog at once.
            conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            conn.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                conn.connect(("127.0.0.1", tray.port))
            held.append(conn)
        opened = time.perf_counter() - began
        async with httpx2.AsyncClient(
            base_url=tray.url,
            headers={"Authorization": f"Bearer {tray.token}"},
            timeout=httpx2.Timeout(PROBE_SECONDS),
            limits=httpx2.Limits(max_keepalive_connections=0),
        ) as fresh:
            for _ in range(BURST_PROBES):
                sent = time.perf_counter()
                try:
                    reply = await fresh.get("/api/v1/status")
                    reply.raise_for_status()
                    probes.append(time.perf_counter() - sent)
                except (httpx2.HTTPError, TimeoutError) as exc:
                    failures.append(f"{type(exc).__name__} {exc}"[:100])
                with contextlib.suppress(psutil.Error):
                    peak_fds = max(peak_fds, process.num_fds())
                await asyncio.sleep(BURST_PROBE_EVERY)
        cli_sent = time.perf_counter()
        cli_code = await cli_status(home)
        cli_seconds = time.perf_counter() - cli_sent
    finally:
        for conn in held:
            conn.close()
        await tray.stop()
    said = tail.new()
    accept_errors = said.count("cannot accept connections")
    print(
        f"mcp-tray burst: {count} idle connections opened at once ({opened * 1e3:.0f} ms) on a "
        f"headless tray whose file limit is {file_limit}; load avg "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"  GET /api/v1/status on a new connection, {len(probes)} of {BURST_PROBES} answered "
        f"right after the burst: first {probes[0] * 1e3 if probes else float('nan'):.0f} ms, "
        f"p50 {percentile(probes, 0.5) * 1e3:.0f} ms, max {max(probes, default=0) * 1e3:.0f} ms"
    )
    for line in failures[:5]:
        print(f"     !! {line}")
    print(
        f"  mcp-tray status --json (a new interpreter): {cli_seconds:.2f} s, exit code {cli_code}"
    )
    print(
        f"  the tray's descriptors: peak {peak_fds} of {file_limit}; accept() failures logged: "
        f"{accept_errors}"
    )
    print(
        f"reproduce: .venv/bin/python bench/abuse.py --burst {count} --burst-file-limit {file_limit}"
    )
