"""What the UI bench prints and records."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import platform

import psutil

from bench.harness.records import record
from bench.suites.ui.constants import (
    DEMO_SERVERS,
    MB,
    REPLY_SECONDS,
    ROWS,
    SETTLE_SECONDS,
    TARGET_IDLE_CPU_PERCENT,
    TARGET_ROWS_CPU_PERCENT,
    TARGET_RSS_MB,
)
from bench.suites.ui.measure import Renewer
from bench.suites.ui.tray import Window


def verdict(value: float, target: float) -> str:
    return "PASS" if value < target else "MISS"


def machine() -> list[str]:
    import PySide6
    from PySide6.QtCore import qVersion

    freq = psutil.cpu_freq()
    return [
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, "
        f"{psutil.cpu_count()} logical / {psutil.cpu_count(logical=False)} physical CPUs"
        + (f" @ {freq.max or freq.current:.0f} MHz" if freq else "")
        + f", {psutil.virtual_memory().total / 2**30:.1f} GiB RAM",
        f"python {platform.python_version()} ({sys.executable}), "
        f"PySide6 {PySide6.__version__}, Qt {qVersion()}, QT_QPA_PLATFORM=offscreen",
    ]


def _samples(window: Window) -> str:
    """How many CPU/RSS samples the window took during the span (0 when hidden)."""
    if window.reply is None or window.before is None:
        return "samples unknown"
    taken = window.reply.counts.get("samples", 0) - window.before.counts.get("samples", 0)
    return f"{taken} CPU/RSS sample{'' if taken == 1 else 's'} taken meanwhile"


def _answer(window: Window) -> str:
    if window.reply is None:
        return f"none in {REPLY_SECONDS:g} s"
    return f"{window.reply.latency:.2f} s"


def report(windows: list[Window], startup: float, renewer: Renewer, seconds: float) -> None:
    idle, hidden, rows_servers, rows_workers = windows
    peak_rss = max(w.peak_rss for w in windows)
    peak_uss = max(w.peak_uss for w in windows)
    print()
    for line in machine():
        print(line)
    print(
        f"tray: 10 demo servers ({', '.join(f'{s} x{n}' for s, n in DEMO_SERVERS)}); "
        f"start-up to all READY {startup:.1f} s (excluded); settle {SETTLE_SECONDS:g} s "
        f"before each {seconds:g} s window"
    )
    print()
    print(
        f"{'window':<36} {'CPU % core':>10} {'peak RSS':>10} {'peak USS':>10} "
        f"{'window answers in':>18}  Workers model rows"
    )
    for w in windows:
        rows = "?" if w.reply is None else str(w.reply.counts.get("workers"))
        print(
            f"{w.name:<36} {w.cpu_percent:>9.2f}% {w.peak_rss / MB:>8.1f}MB "
            f"{w.peak_uss / MB:>8.1f}MB {_answer(w):>18}  {rows}"
        )
    print()
    print("targets:")
    print(
        f"  idle CPU        {idle.cpu_percent:7.2f} %   target < {TARGET_IDLE_CPU_PERCENT:g} %    "
        f"{verdict(idle.cpu_percent, TARGET_IDLE_CPU_PERCENT)}   (window hidden: "
        f"{hidden.cpu_percent:.2f} %, {_samples(hidden)})"
    )
    print(
        f"  peak RSS        {peak_rss / MB:7.1f} MB  target < {TARGET_RSS_MB:g} MB  "
        f"{verdict(peak_rss / MB, TARGET_RSS_MB)}   (idle window alone {idle.peak_rss / MB:.1f} MB; "
        f"peak USS {peak_uss / MB:.1f} MB)"
    )
    print(
        f"  1,000 rows CPU  {rows_workers.cpu_percent:7.2f} %   target < {TARGET_ROWS_CPU_PERCENT:g} %      "
        f"{verdict(rows_workers.cpu_percent, TARGET_ROWS_CPU_PERCENT)}   (Workers tab current; "
        f"Servers tab current: {rows_servers.cpu_percent:.2f} %, "
        f"{verdict(rows_servers.cpu_percent, TARGET_ROWS_CPU_PERCENT)})"
    )
    print()
    print(
        f"for information: the {idle.children} demo-server processes' summed RSS peaked at "
        f"{max(w.peak_children_rss for w in windows) / MB:.1f} MB (not counted above); "
        f"the bench renewed {renewer.renewed} worker heartbeats ({renewer.refused} refused)"
    )
    figures = {
        "idle_cpu_percent": idle.cpu_percent,
        "hidden_cpu_percent": hidden.cpu_percent,
        "peak_rss_mb": peak_rss / MB,
        "rows_cpu_percent": rows_workers.cpu_percent,
    }
    record("ui", f".venv/bin/python bench/ui.py --seconds {seconds:g}", figures, ROWS)
