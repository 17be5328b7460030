"""Hostile input and local faults: fuzzed configs, a connection flood, fuzzed requests, invented methods.

Everything that is measured is a real process: a headless tray
(``mcp-tray run --headless``) from a private MCP_TRAY_HOME with one server,
``echo`` (tests/servers/echo.py), on ``gateway.port`` 0. Hostile input is
generated with the hypothesis strategies of tests/support/fuzz_config.py and
tests/support/fuzz_http.py (imported, not copied; a fixed ``--seed`` makes a
run repeatable). The four figures of the issue "Hostile input and local
faults":

1. Configs. CONFIGS generated documents (NUL, lone surrogates, NaN and
   Infinity, nesting thousands deep, '=' in env names, names with newlines,
   integers of thousands of digits, wrong types, cut-off files, bytes that
   are not UTF-8) and special files (a FIFO, /dev/zero and a symlink to it,
   a socket, a folder, a 2 MiB file, a symlink loop, ...). Each goes through
   ``core.settings.config.load_config`` in-process (on a thread, bounded by
   LOAD_SECONDS: past it, a hang); CLI of them (every special file, a few
   valid documents, the rest refused ones) also through the real
   ``python -m core.cli.main run --headless --config FILE``, CLI_JOBS at a
   time, each on a home of its own: a refused config must exit 2 within
   CLI_SECONDS; a valid one must come up (its runtime file names it) within
   CLI_SECONDS, and is then stopped with SIGTERM. Counted: exit codes,
   tracebacks (stderr containing "Traceback"), hangs, and whether the CLI
   agrees with load_config. Then hot reload: EDITS generated documents (and
   a FIFO, a /dev/zero symlink, a 2 MiB file and an empty file renamed or
   written over the config) are written onto the running tray's config.
   Before each edit a marker edit (a disabled server ``marker-N``) is applied
   and seen in ``/api/v1/status``, so every edit's reload is observed: a
   refused edit must show load_config's own error as ``config_error``, an
   accepted one must drop the marker. After each: the echo child's pid is
   unchanged, no traceback in the tray's output, status answers.
   Targets: 0 tracebacks, 0 hangs.

2. Flood. FLOOD raw connections WITHOUT the token (connect and send
   nothing; half a request head; a head trickled one byte a second; a head
   without the token and a body trickled one byte a second), opened in
   bursts, then kept up for HOLD seconds: each one the server closes is
   replaced (at most REOPEN_RATE a second: at the default, above the cap
   all along, so shedding closes them before the read deadline; below
   cap/10 a second, the deadline does). Meanwhile ``GET /api/v1/status``
   with the token, each on a new connection (the harder case: it is
   untrusted until its request is read), is timed every 0.25 s, and the real
   ``mcp-tray status --json`` every 2 s (its time includes the interpreter's
   start). Halfway through, the echo child is kill -9'd; the time until
   status shows it ready again at a higher generation is reported. Also:
   how many of the flood's connections the server closed and when (the tray
   sheds untrusted connections past its cap, 512 or the file limit minus
   256, and closes any that has not sent a whole request within 10 s), and
   the tray's open file count (psutil num_fds): before, peak, after.
   Target: every status answered within 1 s.

3. Requests. REQUESTS generated requests with the token (bodies and
   headers as tests/support/fuzz_http.py builds them: JSON-RPC-shaped
   messages, raw bytes, batches, nesting to 100,000, lone surrogates; POST
   and DELETE) on ``/mcp/echo`` (and ``/echo/mcp``, ``/mcp/nosuch``); half
   of the gateway ones instead carry the headers a real client sends in the
   bench's session (so their generated body reaches JSON-RPC rather than
   being turned away at the header check), and a CONTROL_SHARE of all are
   on ``/api/v1/servers/<name>/call``; CONCURRENCY at a time, each bounded
   by REQUEST_SECONDS (a stream still open then is counted apart from a
   request never answered). Tools that end or stall the child are never
   called. Counted: HTTP statuses, connection errors and resets, the rate,
   and whether the echo pid is unchanged at the end.
   Target: 0 HTTP 500, 0 connection errors.

4. /metrics. In one handshake-era session on ``/mcp/echo``, METHODS
   requests with invented method names (``x/invented-N``), then /metrics
   scraped SCRAPES times back to back (bytes, scrape time p50/max), each
   time with an ``echo`` tool call sent at the same moment (timed, against
   the same calls without scrapes). Method labels are bounded
   (core.serving.observe.metrics): /metrics must stay small and name no invented
   method.

``--burst N`` runs only this instead: a tray started under a file limit
of ``--burst-file-limit`` (1,024, a desktop's usual) gets N idle connections
at once (plain connects, nothing sent); ``GET /api/v1/status`` on a new
connection is timed right after (the first answer is the figure: it waits
behind the burst), then the real ``mcp-tray status --json``; and the tray's
output is searched for accept() failures (EMFILE). Target: status under
0.5 s, no accept failure.

The request generation (tens of seconds of CPU) runs in a worker process
during the hot-reload part, which mostly waits. Figures are reported, not
asserted: the exit code is 0 unless the bench itself breaks (the tray does
not come up, or dies). The default run takes about 2 minutes on 2 idle
CPUs (the request generation and the flood's HOLD dominate).
Run: .venv/bin/python bench/abuse.py (the burst: --burst 1100)
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import argparse
import asyncio
import contextlib
import math
import os
import platform
import resource
import shutil
import tempfile
import time
from pathlib import Path

import psutil
from hypothesis.configuration import set_hypothesis_home_dir

from bench.harness.errors import BenchAborted
from bench.harness.processes import tagged_by
from bench.harness.records import record
from bench.harness.stats import percentile
from bench.harness.tray import KEYRING_BACKEND
from bench.suites.abuse.common import LogTail
from bench.suites.abuse.constants import (
    DEFAULT_BURST_FILE_LIMIT,
    DEFAULT_CLI,
    DEFAULT_CLI_JOBS,
    DEFAULT_CONCURRENCY,
    DEFAULT_CONFIGS,
    DEFAULT_CONTROL_SHARE,
    DEFAULT_EDITS,
    DEFAULT_FLOOD,
    DEFAULT_HOLD,
    DEFAULT_METHODS,
    DEFAULT_REOPEN_RATE,
    DEFAULT_REQUESTS,
    DEFAULT_SCRAPES,
    DEFAULT_SEED,
    ROWS,
    TARGET_PROBE_SECONDS,
)
from bench.suites.abuse.report import report_configs, report_flood, report_metrics, report_requests
from bench.suites.abuse.run import Figures, bench, burst
from core.supervision.sweep import sweep_leftovers


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"hypothesis seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--configs",
        type=int,
        default=DEFAULT_CONFIGS,
        help=f"generated config documents (default {DEFAULT_CONFIGS})",
    )
    parser.add_argument(
        "--cli",
        type=int,
        default=DEFAULT_CLI,
        help=f"of the configs, how many go through the real CLI (default {DEFAULT_CLI})",
    )
    parser.add_argument(
        "--cli-jobs",
        type=int,
        default=DEFAULT_CLI_JOBS,
        help=f"CLI runs at once (default {DEFAULT_CLI_JOBS})",
    )
    parser.add_argument(
        "--edits",
        type=int,
        default=DEFAULT_EDITS,
        help=f"generated hot-reload edits, 4 special ones besides (default {DEFAULT_EDITS})",
    )
    parser.add_argument(
        "--flood",
        type=int,
        default=DEFAULT_FLOOD,
        help=f"connections without the token kept open at once (default {DEFAULT_FLOOD})",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=DEFAULT_HOLD,
        help=f"seconds the flood is kept up (default {DEFAULT_HOLD:g})",
    )
    parser.add_argument(
        "--reopen-rate",
        type=int,
        default=DEFAULT_REOPEN_RATE,
        help=f"most flood connections reopened a second (default {DEFAULT_REOPEN_RATE})",
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=DEFAULT_REQUESTS,
        help=f"fuzzed requests (default {DEFAULT_REQUESTS})",
    )
    parser.add_argument(
        "--control-share",
        type=float,
        default=DEFAULT_CONTROL_SHARE,
        help=f"share of them on the control API (default {DEFAULT_CONTROL_SHARE:g})",
    )
    parser.add_argument(
        "--methods",
        type=int,
        default=DEFAULT_METHODS,
        help=f"requests with invented method names (default {DEFAULT_METHODS})",
    )
    parser.add_argument(
        "--scrapes",
        type=int,
        default=DEFAULT_SCRAPES,
        help=f"scrapes of /metrics (default {DEFAULT_SCRAPES})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"requests in flight at once in parts 3 and 4 (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        help="copy the tray's output and the server log here",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=0,
        help="only this: N idle connections at once, status timed meanwhile (e.g. 1100)",
    )
    parser.add_argument(
        "--burst-file-limit",
        type=int,
        default=DEFAULT_BURST_FILE_LIMIT,
        help=f"the tray's file limit for --burst (default {DEFAULT_BURST_FILE_LIMIT})",
    )
    args = parser.parse_args()
    if args.burst > 0:
        os.environ["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND
        with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
            home = Path(tmp).resolve()
            with (home / "tray.log").open("ab") as log:
                asyncio.run(
                    burst(args.burst, args.burst_file_limit, home, log, LogTail(home / "tray.log"))
                )
        return 0
    if min(args.configs, args.cli, args.edits, args.requests, args.methods, args.scrapes) < 0:
        parser.error("counts must be >= 0")
    if args.cli_jobs < 1 or args.concurrency < 1 or args.flood < 1 or args.reopen_rate < 1:
        parser.error("--cli-jobs, --concurrency, --flood and --reopen-rate must be >= 1")
    if args.hold < 1 or not 0 <= args.control_share <= 1:
        parser.error("--hold must be >= 1 and --control-share from 0 to 1")
    # This process reads the tray's token too (read_token: keyring first, then the file).
    os.environ["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND
    # The flood needs a file descriptor per connection.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if args.flood + 512 > nofile:
        args.flood = max(1, nofile - 512)
        print(
            f"(the flood is cut to {args.flood} connections by this process's file limit {nofile})"
        )

    figures = Figures()
    figures.flood.bench_nofile = nofile
    failed: str | None = None
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        home = Path(tmp).resolve()
        set_hypothesis_home_dir(str(home / "bench" / "hypothesis"))
        tray_log = home / "tray.log"
        with tray_log.open("ab") as log:
            try:
                asyncio.run(bench(args, home, figures, log, LogTail(tray_log)))
            except BenchAborted as exc:
                failed = str(exc)
            except KeyboardInterrupt:
                failed = "interrupted"
        elapsed = time.perf_counter() - began

        left = tagged_by(figures.tray_pids) + [
            f"tray pid {pid}" for pid in figures.tray_pids if psutil.pid_exists(pid)
        ]
        swept = sweep_leftovers()
        print()
        print(
            "mcp-tray abuse: hostile configs, a connection flood without the token, fuzzed "
            "requests, invented methods; one headless tray, one echo server"
        )
        print(
            f"  python {platform.python_version()}, {os.cpu_count()} CPU(s), {platform.platform()}, "
            f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}; seed {args.seed}; "
            f"run took {elapsed:.1f} s; parts done: {', '.join(figures.done) or 'none'}"
        )
        tracebacks = hangs = fives = errors = unanswered = 0
        answered: list[float] = []
        metrics_ok = False
        if "configs" in figures.done:
            tracebacks, hangs = report_configs(figures.configs)
        if "flood" in figures.done:
            answered, unanswered = report_flood(figures.flood)
        if "requests" in figures.done:
            fives, errors = report_requests(figures.requests)
        if "metrics" in figures.done:
            metrics_ok = report_metrics(figures.metrics)
        tray_trouble = [line for lines in figures.tray_trouble.values() for line in lines]
        print(
            f"  the tray's output: tracebacks {len(tray_trouble)} "
            + "("
            + ", ".join(f"{part} {len(lines)}" for part, lines in figures.tray_trouble.items())
            + f"); exit code after SIGTERM {figures.stop_code}"
        )
        for line in tray_trouble[:10]:
            print(f"     !! {line}")
        print(
            f"  the servers' own logs (the echo child's stderr): tracebacks {len(figures.child_trouble)}"
        )
        for line in figures.child_trouble[:5]:
            print(f"     {line}")
        print(
            f"  left behind after the trays' SIGTERM: {len(left)}; sweep_leftovers() ended "
            f"{len(swept)}; tagged by this run's trays afterwards: {len(tagged_by(figures.tray_pids))}"
        )
        for line in left[:10]:
            print(f"     {line}")
        if args.keep_logs is not None:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for path in [tray_log, *sorted((home / "logs").glob("*.log"))]:
                with contextlib.suppress(OSError):
                    shutil.copy2(path, args.keep_logs / path.name)
            print(f"  logs kept in {args.keep_logs}")

    print("targets:")

    def verdict(ok: bool, done: str) -> str:
        return ("PASS" if ok else "MISS") if done in figures.done else "n/a (not run)"

    all_tracebacks = tracebacks + len(tray_trouble)
    print(f"  configs: 0 tracebacks: {all_tracebacks}  {verdict(all_tracebacks == 0, 'configs')}")
    print(f"  configs: 0 hangs: {hangs}  {verdict(hangs == 0, 'configs')}")
    over = sum(s > TARGET_PROBE_SECONDS for s in answered) + unanswered
    print(
        f"  flood: every status within {TARGET_PROBE_SECONDS:g} s: {over} over or unanswered, "
        f"max {max(answered, default=0) * 1e3:.0f} ms  {verdict(over == 0, 'flood')}"
    )
    respawned = figures.flood.ready_after is not None
    print(
        f"  flood: echo respawned after kill -9: {'yes' if respawned else 'no'}  {verdict(respawned, 'flood')}"
    )
    print(f"  requests: 0 HTTP 500: {fives}  {verdict(fives == 0, 'requests')}")
    print(
        f"  requests: 0 connection errors or resets: {errors}  {verdict(errors == 0, 'requests')}"
    )
    kept = figures.requests.pid_before == figures.requests.pid_after
    print(f"  requests: echo pid unchanged: {'yes' if kept else 'no'}  {verdict(kept, 'requests')}")
    print(
        f"  metrics: method labels bounded, no invented name: {'yes' if metrics_ok else 'no'}  {verdict(metrics_ok, 'metrics')}"
    )
    if failed:
        print(f"ABORTED: {failed}")
    command = ".venv/bin/python bench/abuse.py"
    for flag, value, default in (
        ("seed", args.seed, DEFAULT_SEED),
        ("configs", args.configs, DEFAULT_CONFIGS),
        ("cli", args.cli, DEFAULT_CLI),
        ("cli-jobs", args.cli_jobs, DEFAULT_CLI_JOBS),
        ("edits", args.edits, DEFAULT_EDITS),
        ("flood", args.flood, DEFAULT_FLOOD),
        ("hold", args.hold, DEFAULT_HOLD),
        ("reopen-rate", args.reopen_rate, DEFAULT_REOPEN_RATE),
        ("requests", args.requests, DEFAULT_REQUESTS),
        ("control-share", args.control_share, DEFAULT_CONTROL_SHARE),
        ("methods", args.methods, DEFAULT_METHODS),
        ("scrapes", args.scrapes, DEFAULT_SCRAPES),
        ("concurrency", args.concurrency, DEFAULT_CONCURRENCY),
    ):
        if value != default:
            command += f" --{flag} {value:g}" if isinstance(value, float) else f" --{flag} {value}"
    print(f"reproduce: {command}")
    if not failed and set(figures.done) >= {"configs", "flood", "requests", "metrics"}:
        sizes = [size for _, size in figures.metrics.scrapes]
        shown: dict[str, float | int] = {
            "configs": len(figures.configs.cases),
            "edits": len(figures.configs.edits),
            "connections": len(figures.flood.conns),
            "status_p95_ms": 1e3 * percentile(answered, 0.95) if answered else math.nan,
            "status_max_ms": 1e3 * max(answered, default=math.nan),
            "requests": len(figures.requests.sent),
            "tracebacks": all_tracebacks,
            "hangs": hangs,
            "http_500": fives,
            "metrics_kb": max(sizes, default=0) / 1000,
            "methods": figures.metrics.requests,
        }
        record("abuse", command, shown, ROWS)
    return 1 if failed else 0
