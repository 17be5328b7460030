"""Worker registry throughput: heartbeats per second with 1 and 4 writers.

Each writer is its own process (multiprocessing, spawn), opens one shared
registry file, registers one worker and, once every writer is ready,
renews it BEATS times as fast as it can. Reported per run: total beats/s
over the span from the first writer's start to the last one's end, p50 and
p99 latency of one ``heartbeat`` call, retried "database is locked" errors,
and whether the file's per-row beat counters add up (0 lost).

Target (docs/design.md §4): >= 2,000 beats/s with 4 writers, 0 lost, 0 unhandled
"database is locked". Run: .venv/bin/python bench/registry.py
"""

import argparse
import multiprocessing
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.records import Row, record
from core.base.clock import utc_now
from core.registry.identity import worker_identity
from core.registry.store import WorkerRegistry

TARGET_BEATS_PER_SECOND = 2000
#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS = (
    Row(
        "registry, 4 writer processes",
        "≥ 2,000 beats/s, 0 lost",
        "{beats_per_second:,.0f} beats/s, {lost} lost",
    ),
)


@dataclass(frozen=True)
class WriterResult:
    worker_identity: str
    started_ns: int
    ended_ns: int
    latencies_ns: list[int]
    retried_locked: int


def writer(db: str, session: str, beats: int, barrier: Barrier) -> WriterResult:
    with WorkerRegistry(db) as registry:
        registration = registry.register(
            worker_identity=worker_identity("bench", session, utc_now()),
            client_name="bench",
            session_id=session,
            role="bridge",
        )
        barrier.wait()
        latencies: list[int] = []
        retried = 0
        started = time.monotonic_ns()
        for _ in range(beats):
            while True:
                before = time.perf_counter_ns()
                try:
                    outcome = registry.heartbeat(
                        registration.worker_identity, registration.fencing_epoch
                    )
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc):
                        raise
                    retried += 1
                    continue
                latencies.append(time.perf_counter_ns() - before)
                if not outcome.renewed:
                    raise RuntimeError(str(outcome))
                break
        return WriterResult(
            registration.worker_identity, started, time.monotonic_ns(), latencies, retried
        )


def child(
    db: str,
    session: str,
    beats: int,
    barrier: Barrier,
    queue: "multiprocessing.Queue[WriterResult | str]",
) -> None:
    try:
        queue.put(writer(db, session, beats, barrier))
    except BaseException:
        # Reported, not swallowed: the parent raises it. Break the barrier so
        # the other writers do not wait for this one forever.
        barrier.abort()
        queue.put(traceback.format_exc())


def percentile(sorted_values: list[int], share: float) -> float:
    index = min(len(sorted_values) - 1, int(share * len(sorted_values)))
    return sorted_values[index] / 1e6


def run(writers: int, beats: int, folder: Path) -> dict[str, float | int]:
    db = folder / f"registry-{writers}w.sqlite"
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(writers)
    queue: multiprocessing.Queue[WriterResult | str] = context.Queue()
    procs = [
        context.Process(target=child, args=(str(db), f"sess-{n}", beats, barrier, queue))
        for n in range(writers)
    ]
    for proc in procs:
        proc.start()
    received = [queue.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(30)
    errors = [r for r in received if isinstance(r, str)]
    if errors:
        raise RuntimeError("a writer failed:\n" + "\n".join(errors))
    results = [r for r in received if isinstance(r, WriterResult)]
    with WorkerRegistry(db) as registry:
        counted = {w.worker_identity: w.beats for w in registry.list_workers()}
    lost = sum(beats - counted.get(r.worker_identity, 0) for r in results)
    span = (max(r.ended_ns for r in results) - min(r.started_ns for r in results)) / 1e9
    latencies = sorted(x for r in results for x in r.latencies_ns)
    return {
        "writers": writers,
        "beats": writers * beats,
        "seconds": span,
        "beats_per_second": writers * beats / span,
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "mean_ms": statistics.fmean(latencies) / 1e6,
        "retried_locked": sum(r.retried_locked for r in results),
        "lost": lost,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beats", type=int, default=2000, help="beats per writer")
    parser.add_argument("--writers", default="1,4", help="comma-separated writer counts")
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]

    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"{multiprocessing.cpu_count()} CPUs, {platform.platform()}"
    )
    header = (
        f"{'writers':>7} {'beats':>7} {'seconds':>8} {'beats/s':>9} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'retried':>7} {'lost':>5}"
    )
    print(header)
    failed = False
    four: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        for count in counts:
            r = run(count, args.beats, Path(tmp))
            four = r if count == 4 else four
            print(
                f"{r['writers']:>7} {r['beats']:>7} {r['seconds']:>8.3f} "
                f"{r['beats_per_second']:>9.0f} {r['p50_ms']:>7.3f} {r['p99_ms']:>7.3f} "
                f"{r['retried_locked']:>7} {r['lost']:>5}"
            )
            failed |= r["lost"] != 0
            if count == 4 and r["beats_per_second"] < TARGET_BEATS_PER_SECOND:
                failed = True
    print(f"target: >= {TARGET_BEATS_PER_SECOND} beats/s with 4 writers, 0 lost")
    command = ".venv/bin/python bench/registry.py"
    if args.beats != 2000 or args.writers != "1,4":
        command += f" --beats {args.beats} --writers {args.writers}"
    print(f"reproduce: {command}")
    if four is not None:
        figures = {"beats_per_second": four["beats_per_second"], "lost": four["lost"]}
        record("registry", command, figures, ROWS)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
