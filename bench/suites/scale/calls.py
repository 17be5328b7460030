"""The calls section: sessions calling ``echo`` back to back; calls/s and the
tray's CPU per call, by loop, in interleaved blocks.
"""

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Final

import psutil

from bench.harness.clients import RawHttpClient, timed_call
from bench.harness.records import Row, record
from bench.harness.tray import Tray
from bench.suites.scale.clients import connected_session
from bench.suites.scale.common import (
    BASELINE_SUFFIX,
    JOURNAL_OFF_SUFFIX,
    cpu_seconds,
    p_or_nan,
    tray_process,
)
from bench.suites.scale.constants import (
    BLOCK_SECONDS,
    TARGET_JOURNAL_COST,
    TARGET_UVLOOP_SAVING,
    WARMUP_CALLS,
)


@dataclass
class Calls:
    calls: int = 0
    seconds: float = 0.0
    tray_cpu: float = 0.0
    child_cpu: float = 0.0
    bench_cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)
    #: Tray CPU per call in each block, in the order they ran.
    blocks: list[float] = field(default_factory=list)
    #: The tray's CPU seconds by thread name, in its blocks (Linux: names from /proc).
    threads: dict[str, float] = field(default_factory=dict)


def thread_seconds(process: psutil.Process) -> dict[str, float]:
    """CPU seconds of each of ``process``'s threads, by name (summed over threads of one
    name; {} where the OS does not name them in /proc)."""
    found: dict[str, float] = {}
    with contextlib.suppress(psutil.Error):
        for thread in process.threads():
            try:
                with open(f"/proc/{process.pid}/task/{thread.id}/comm") as comm:
                    name = comm.read().strip()
            except OSError:
                return {}
            name = "main" if thread.id == process.pid else name
            found[name] = found.get(name, 0.0) + thread.user_time + thread.system_time
    return found


async def _block(clients: list[RawHttpClient], seconds: float, into: Calls, rate: float) -> int:
    """Calls for ``seconds``: back to back, or ``rate`` a second across the sessions
    (each session its share, on a schedule: a late call does not move the next)."""
    deadline = time.perf_counter() + seconds
    done = 0
    interval = len(clients) / rate if rate > 0 else 0.0

    async def caller(client: RawHttpClient, offset: float) -> None:
        nonlocal done
        due = time.perf_counter() + offset
        while (now := time.perf_counter()) < deadline:
            if interval:
                if due > now:
                    await asyncio.sleep(due - now)
                due += interval
            into.latencies.append(await timed_call(client))
            done += 1

    # Paced sessions start spread over one interval, not all at once.
    spread = interval / max(len(clients), 1)
    await asyncio.gather(*(caller(client, at * spread) for at, client in enumerate(clients)))
    into.calls += done
    return done


async def measure_calls(
    trays: dict[str, Tray], count: int, seconds: float, rate: float = 0.0
) -> dict[str, Calls]:
    clients = {
        loop: [await connected_session(tray) for _ in range(count)] for loop, tray in trays.items()
    }
    processes = {loop: tray_process(tray) for loop, tray in trays.items()}
    # The echo.py child each tray serves the calls from.
    children = {loop: process.children()[0] for loop, process in processes.items()}
    me = psutil.Process()
    found = {loop: Calls() for loop in trays}
    try:

        async def warm(client: RawHttpClient) -> None:
            for _ in range(WARMUP_CALLS // 10):
                await timed_call(client)

        for sessions in clients.values():
            await asyncio.gather(*(warm(client) for client in sessions))
        order = list(trays)
        for block in range(max(1, round(seconds / BLOCK_SECONDS))):
            rotated = order[block % len(order) :] + order[: block % len(order)]
            for loop in rotated:
                into = found[loop]
                tray_before = cpu_seconds(processes[loop])
                threads_before = thread_seconds(processes[loop])
                child_before, me_before = cpu_seconds(children[loop]), cpu_seconds(me)
                began = time.perf_counter()
                done = await _block(clients[loop], BLOCK_SECONDS, into, rate)
                into.seconds += time.perf_counter() - began
                tray_cpu = cpu_seconds(processes[loop]) - tray_before
                into.tray_cpu += tray_cpu
                into.blocks.append(tray_cpu / max(done, 1))
                for name, spent in thread_seconds(processes[loop]).items():
                    into.threads[name] = (
                        into.threads.get(name, 0.0) + spent - threads_before.get(name, 0.0)
                    )
                into.child_cpu += cpu_seconds(children[loop]) - child_before
                into.bench_cpu += cpu_seconds(me) - me_before
    finally:
        for sessions in clients.values():
            for client in sessions:
                with contextlib.suppress(Exception):
                    await client.end()
                await client.aclose()
    return found


#: What the calls section adds to docs/measured.md's table, from this checkout's first
#: loop at 32 sessions (with ``--baseline``: the same run's baseline beside it).
CALLS_ROWS: Final = (
    Row(
        "tray CPU per call, 32 sessions, lean client",
        "≤ 0.15 ms; ≥ 6,000 calls/s",
        "{cpu_per_call_ms:.3f} ms, {calls_per_second:,.0f} calls/s{against}",
    ),
)


RECORDED_SESSIONS: Final = 32


def keep_calls(results: dict[int, dict[str, Calls]], command: str, loop: str) -> None:
    """bench/results/scale-calls.json from the 32-session row, when the run had one."""
    by_label = results.get(RECORDED_SESSIONS)
    if by_label is None or loop not in by_label:
        return
    after = by_label[loop]
    figures = {
        "cpu_per_call_ms": after.tray_cpu / after.calls * 1000,
        "calls_per_second": after.calls / after.seconds,
    }
    against = ""
    before = by_label.get(f"{loop}{BASELINE_SUFFIX}")
    if before is not None:
        figures["base_cpu_per_call_ms"] = before.tray_cpu / before.calls * 1000
        figures["base_calls_per_second"] = before.calls / before.seconds
        against = (
            " (the --baseline code in the same run: {base_cpu_per_call_ms:.3f} ms, "
            "{base_calls_per_second:,.0f} calls/s)"
        )
    record("scale-calls", command, figures, [row.filled(against=against) for row in CALLS_ROWS])


def report_calls(results: dict[int, dict[str, Calls]], command: str, rate: float = 0.0) -> None:
    pace = f"{rate:,.0f} calls/s across the sessions" if rate else "back to back"
    print(f"\ncalls: echo {pace}, lean client  (reproduce: {command})")
    print(
        "  sessions  loop          calls/s  tray CPU/call  tray CPU  child CPU  bench CPU  "
        "p50 ms   p99 ms"
    )
    for count, by_loop in results.items():
        for loop, r in by_loop.items():
            print(
                f"  {count:>8}  {loop:<12} {r.calls / r.seconds:>8,.0f}  "
                f"{r.tray_cpu / r.calls * 1000:>10.3f} ms  {r.tray_cpu / r.seconds * 100:>6.0f} %  "
                f"{r.child_cpu / r.seconds * 100:>7.0f} %  {r.bench_cpu / r.seconds * 100:>7.0f} %  "
                f"{p_or_nan(r.latencies, 0.5) * 1000:>6.3f}  {p_or_nan(r.latencies, 0.99) * 1000:>7.3f}"
            )
    labels = next(iter(results.values()), {})
    if {"asyncio", "uvloop"} <= set(labels):
        print(
            "  uvloop vs asyncio, tray CPU per call (overall; and the median of the "
            "interleaved blocks' ratios, blocks paired in the order they ran):"
        )
        for count, by_label in results.items():
            saving, paired = _saving(by_label["asyncio"], by_label["uvloop"])
            verdict = "YES" if min(saving, paired) >= TARGET_UVLOOP_SAVING else "no"
            print(
                f"    {count:>3} sessions: {saving * 100:+.1f} % less; paired median "
                f"{paired * 100:+.1f} % (>= {TARGET_UVLOOP_SAVING * 100:g} %: {verdict})"
            )
    for label in labels:
        base = f"{label}{BASELINE_SUFFIX}"
        if base not in labels:
            continue
        print(f"  this checkout vs --baseline, {label} (tray CPU per call as above; calls/s):")
        for count, by_label in results.items():
            before, after = by_label[base], by_label[label]
            saving, paired = _saving(before, after)
            rate = (after.calls / after.seconds) / (before.calls / before.seconds)
            print(
                f"    {count:>3} sessions: {saving * 100:+.1f} % less CPU per call; paired "
                f"median {paired * 100:+.1f} %; calls/s x{rate:.2f}; p50 "
                f"{p_or_nan(before.latencies, 0.5) * 1000:.3f} -> {p_or_nan(after.latencies, 0.5) * 1000:.3f} ms"
            )


def report_journal(results: "dict[int, dict[str, Calls]]") -> None:
    """What the call journal costs per call, where a tray ran with it off beside one with it on."""
    labels = next(iter(results.values()), {})
    for label in labels:
        off = f"{label}{JOURNAL_OFF_SUFFIX}"
        if off not in labels:
            continue
        print(
            f"  journal on vs off, {label} (tray CPU per call; target <= +{TARGET_JOURNAL_COST:.0%}):"
        )
        for count, by_label in results.items():
            saving, paired = _saving(by_label[off], by_label[label])
            verdict = "met" if max(-saving, -paired) <= TARGET_JOURNAL_COST else "NOT met"
            print(
                f"    {count:>3} sessions: {-saving * 100:+.1f} % CPU per call with the journal; "
                f"paired median {-paired * 100:+.1f} % ({verdict})"
            )
            for name, calls in ((label, by_label[label]), (off, by_label[off])):
                spent = sorted(calls.threads.items(), key=lambda item: -item[1])
                per_call = ", ".join(
                    f"{thread} {seconds / max(calls.calls, 1) * 1e6:.1f}"
                    for thread, seconds in spent
                    if seconds / max(calls.calls, 1) >= 0.5e-6
                )
                if per_call:
                    print(f"      {name}: us of CPU per call by thread: {per_call}")


def _saving(before: Calls, after: Calls) -> tuple[float, float]:
    """How much less tray CPU per call ``after`` spent: overall, and the median of its
    interleaved blocks' ratios (blocks paired in the order they ran)."""
    overall = 1 - (after.tray_cpu / after.calls) / (before.tray_cpu / before.calls)
    paired = statistics.median(
        1 - a / b for a, b in zip(after.blocks, before.blocks, strict=False) if b
    )
    return overall, paired
