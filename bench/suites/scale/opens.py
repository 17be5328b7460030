"""The opens section: a burst of sessions opened, the tray's CPU per open, how
soon it is quiet again, and calls timed by the probe meanwhile.
"""

import asyncio
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import psutil

from bench.harness.clients import RawHttpClient
from bench.harness.records import Row, record
from bench.harness.tray import Tray
from bench.suites.scale.clients import Pool, Probe
from bench.suites.scale.common import as_ms, cpu_seconds, p_or_nan, registry_rows, tray_process
from bench.suites.scale.constants import (
    BASELINE_SECONDS,
    CLOSE_WAIT_SECONDS,
    MIB,
    OPEN_CONCURRENCY,
    PROBE_INTERVAL_SECONDS,
    QUIET_MARGIN,
    QUIET_SECONDS,
    SAMPLE_SECONDS,
    SETTLE_MAX_SECONDS,
    TARGET_CPU_PER_OPEN_MS,
    TARGET_IDLE_MIB_PER_1000,
    TARGET_P99_RATIO,
    TARGET_QUIET_SECONDS,
)


@dataclass
class Opens:
    count: int
    idle_seconds: float
    #: Sessions opened per second asked for; 0: as fast as OPEN_CONCURRENCY lets them.
    rate: float
    open_seconds: float = 0.0
    cpu_open: float = 0.0
    cpu_after: float = 0.0
    quiet_after: float | None = None
    idle_rate_before: float = 0.0
    probe_rate: float = 0.0
    idle_rate: float = 0.0
    probe: dict[str, list[float]] = field(default_factory=dict)
    rss: dict[str, int] = field(default_factory=dict)
    fds: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    close_seconds: float = 0.0


def _open_fds(process: psutil.Process) -> int:
    if sys.platform == "win32":
        return process.num_handles()
    else:
        return process.num_fds()


def _look(result: Opens, process: psutil.Process, home: Path, when: str) -> None:
    result.rss[when] = process.memory_info().rss
    result.fds[when] = _open_fds(process)
    result.rows[when] = registry_rows(home)


async def _rate(process: psutil.Process, seconds: float) -> float:
    """The tray's CPU over ``seconds``, as a share of one core."""
    before, began = cpu_seconds(process), time.perf_counter()
    await asyncio.sleep(seconds)
    return (cpu_seconds(process) - before) / (time.perf_counter() - began)


async def until_quiet(process: psutil.Process, allowed: float) -> tuple[float | None, float]:
    """(seconds until a QUIET_SECONDS stretch cost <= ``allowed`` of a core, CPU spent until
    its start); (None, CPU spent) when none did within SETTLE_MAX_SECONDS."""
    began = time.perf_counter()
    samples = [(began, cpu_seconds(process))]
    while True:
        await asyncio.sleep(SAMPLE_SECONDS)
        now = time.perf_counter()
        samples.append((now, cpu_seconds(process)))
        if now - began >= QUIET_SECONDS:
            start, used = next((t, c) for t, c in samples if t >= now - QUIET_SECONDS - 1e-3)
            if (samples[-1][1] - used) / (now - start) <= allowed:
                return start - began, used - samples[0][1]
        if now - began > SETTLE_MAX_SECONDS:
            return None, samples[-1][1] - samples[0][1]


async def measure_opens(
    tray: Tray, home: Path, count: int, idle_seconds: float, rate: float
) -> Opens:
    process = tray_process(tray)
    result = Opens(count, idle_seconds, rate)
    pool = Pool(tray)
    await pool.connect(OPEN_CONCURRENCY)
    probe = await Probe.started(tray)
    try:
        result.idle_rate_before = await _rate(process, BASELINE_SECONDS)
        _look(result, process, home, "before")
        await probe.start()
        result.probe_rate = await _rate(process, BASELINE_SECONDS)

        await probe.phase("burst")
        sessions: list[RawHttpClient] = []
        began, cpu_began = time.perf_counter(), cpu_seconds(process)

        async def opener(share: int) -> None:
            for _ in range(share):
                sessions.append(await pool.open_session())

        if rate:
            openers = []
            for i in range(count):
                await asyncio.sleep(max(0.0, began + i / rate - time.perf_counter()))
                openers.append(asyncio.create_task(opener(1)))
            await asyncio.gather(*openers)
        else:
            shares = [
                count // OPEN_CONCURRENCY + (i < count % OPEN_CONCURRENCY)
                for i in range(OPEN_CONCURRENCY)
            ]
            await asyncio.gather(*(opener(share) for share in shares))
        result.open_seconds = time.perf_counter() - began
        result.cpu_open = cpu_seconds(process) - cpu_began

        # Quiet is judged with nothing sent: the probe's own calls cost more once
        # many sessions' objects are alive (the collector walks them), which is
        # not an aftermath of the opens.
        await probe.stop()
        result.quiet_after, result.cpu_after = await until_quiet(
            process, result.idle_rate_before + QUIET_MARGIN
        )
        await probe.phase("after")
        await probe.start()
        await asyncio.sleep(BASELINE_SECONDS)
        await probe.stop()

        result.idle_rate = await _rate(process, idle_seconds)
        _look(result, process, home, "idle")

        began = time.perf_counter()
        for client in sessions:
            await pool.end_session(client)
        result.close_seconds = time.perf_counter() - began
        for _ in range(round(CLOSE_WAIT_SECONDS / SAMPLE_SECONDS)):
            if registry_rows(home) <= result.rows["before"]:
                break
            await asyncio.sleep(SAMPLE_SECONDS)
        await asyncio.sleep(1.0)
        _look(result, process, home, "closed")
    finally:
        await probe.close()
        result.probe = probe.latencies
        pool.close()
    return result


#: What the opens section adds to docs/measured.md's table (bench/results.py), from a
#: run of this checkout at 1,000 sessions.
OPENS_ROWS: Final = (
    Row(
        "tray CPU per session opened, 1,000 sessions",
        "≤ 2 ms; quiet within 1 s",
        "{cpu_per_open_ms:.2f} ms ({opens_per_second:,.0f} opens/s, {pace}); quiet "
        "{quiet_seconds:.1f} s after the last; 1,000 idle sessions +{idle_mib:.1f} MiB",
    ),
    Row(
        "calls during a burst of 1,000 opens, p99 vs before",
        "≤ 1.5×",
        "{p99_ratio:.2f}× (p50 {p50_before_ms:.2f} → {p50_during_ms:.2f} ms, p99 "
        "{p99_before_ms:.2f} → {p99_during_ms:.2f} ms; a probe process every 5 ms)",
    ),
)


#: The session count the opens record is kept for.
RECORDED_OPENS: Final = 1000


def report_opens(result: Opens, command: str, *, keep: bool = False) -> None:
    """Print the section; with ``keep``, also keep it as bench/results/scale-opens.json."""
    n = result.count
    print(f"\nopens: {n} sessions  (reproduce: {command})")
    pace = f"paced at {result.rate:g}/s" if result.rate else "as fast as they go"
    print(
        f"  opened in {result.open_seconds:.2f} s = {n / result.open_seconds:,.0f} sessions/s "
        f"({pace}, at most {OPEN_CONCURRENCY} at a time)"
    )
    # The probe's own cost over the burst is not the opens' cost.
    own = max(0.0, result.cpu_open - result.probe_rate * result.open_seconds)
    print(
        f"  tray CPU during the opens: {result.cpu_open:.2f} s = {own / n * 1000:.2f} ms per open "
        f"(probe's own share taken out; target <= {TARGET_CPU_PER_OPEN_MS:g} ms)"
    )
    quiet = "never" if result.quiet_after is None else f"{result.quiet_after:.1f} s"
    print(
        f"  quiet after the last open: {quiet} (target <= {TARGET_QUIET_SECONDS:g} s); "
        f"CPU until then {result.cpu_after:.2f} s; with it, "
        f"{(own + result.cpu_after) / n * 1000:.2f} ms per open"
    )
    before = result.probe.get("before", [])
    print(
        f"  probe calls (one session, every {PROBE_INTERVAL_SECONDS * 1000:g} ms) before the "
        f"opens: p50 {as_ms(p_or_nan(before, 0.5))} p99 {as_ms(p_or_nan(before, 0.99))} ({len(before)})"
    )
    for phase, what in (("burst", "during the opens"), ("after", "once quiet again")):
        found = result.probe.get(phase, [])
        print(
            f"    {what}: p50 {as_ms(p_or_nan(found, 0.5))} p99 {as_ms(p_or_nan(found, 0.99))} ({len(found)}) "
            f"= {p_or_nan(found, 0.99) / p_or_nan(before, 0.99):.2f}x at p99 "
            f"(target <= {TARGET_P99_RATIO:g}x)"
        )
    rss, fds, rows = result.rss, result.fds, result.rows
    held = (rss["idle"] - rss["before"]) / MIB
    print(
        f"  {n} idle sessions: RSS {rss['before'] / MIB:.1f} -> {rss['idle'] / MIB:.1f} MiB "
        f"(+{held:.1f} MiB = {held * 1024 / n:.1f} KiB each; target <= "
        f"{TARGET_IDLE_MIB_PER_1000 * n / 1000:g} MiB), fds {fds['before']} -> {fds['idle']}, "
        f"rows {rows['before']} -> {rows['idle']}"
    )
    print(
        f"  idle CPU: {result.idle_rate * 100:.2f} % of a core over {result.idle_seconds:g} s "
        f"with {n} sessions ({result.idle_rate_before * 100:.2f} % before any)"
    )
    print(
        f"  closed in {result.close_seconds:.2f} s: RSS {rss['closed'] / MIB:.1f} MiB "
        f"({(rss['closed'] - rss['before']) / MIB:+.1f} MiB over before), fds {fds['closed']} "
        f"({fds['closed'] - fds['before']:+d}), rows {rows['closed']} "
        f"({rows['closed'] - rows['before']:+d})"
    )
    if keep and n == RECORDED_OPENS and result.quiet_after is not None:
        during = result.probe.get("burst", [])
        figures = {
            "cpu_per_open_ms": own / n * 1000,
            "opens_per_second": n / result.open_seconds,
            "quiet_seconds": result.quiet_after,
            "idle_mib": held,
            "p50_before_ms": p_or_nan(before, 0.5) * 1000,
            "p50_during_ms": p_or_nan(during, 0.5) * 1000,
            "p99_before_ms": p_or_nan(before, 0.99) * 1000,
            "p99_during_ms": p_or_nan(during, 0.99) * 1000,
            "p99_ratio": p_or_nan(during, 0.99) / p_or_nan(before, 0.99),
            "open_rate": result.rate,
        }
        record("scale-opens", command, figures, [row.filled(pace=pace) for row in OPENS_ROWS])
