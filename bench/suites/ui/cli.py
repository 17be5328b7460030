"""The GUI's own cost: CPU % of one core and peak RSS of the tray process.

The parent runs the real tray GUI in a subprocess (``--child``) under
``QT_QPA_PLATFORM=offscreen``, built exactly as app/main.py builds it
(TrayService on core's own thread and loop, CoreLink, MainWindow shown,
TrayActions and TrayController; offscreen has no system tray, so the icon is shown only when
one is available) from a private MCP_TRAY_HOME with 10 demo servers
(clock_server.py x4, notes_server.py x3, fragile_server.py x3). It measures
that one process from outside with psutil: CPU = (user + system) delta of
``cpu_times()`` over the wall time, x100 (% of one core); RSS sampled every
0.5 s (peak), USS every 5 s (peak). The demo servers are separate processes:
their summed RSS is reported for information only.

Phases, each after a 5 s settle, each ``--seconds`` long (start-up is
excluded: all 10 servers are READY per ``mcp-tray status --json`` first):

1. idle: 10 servers, window open on its first tab (Servers: state glyphs,
   sparklines, CPU/RSS sampled every 5 s, the details pane of the first
   server); then the same with the window hidden (the tray alone: no
   sampling, no tick), and the window shown again for what follows;
2. 1,000 synthetic worker rows in the tray's registry file (registered by
   this process, ages spread from fresh to 10 min, TTL 60 s; every 10th
   carries this process's pid), 100 of the first 500 renewed each second
   so ages keep changing and the tray's 1 Hz registry read sees changes;
   measured twice: (a) window still on the Servers tab, (b) the Workers
   tab current, so the 1,000 rows are on screen (the target applies to b,
   the worse case).

After each window the bench sends SIGUSR2 and times the child's answer (its
window's model row counts): that proves the rows reached the Workers model
and shows whether the GUI's event loop still responds. SIGUSR1 makes the
Workers tab current; SIGHUP hides the window, or shows it when hidden. The tray is stopped with SIGTERM (SIGKILL only after
30 s), and every demo server seen running is checked to be gone.

Targets (issue): < 0.5 % idle, < 150 MB peak RSS, < 5 % with 1,000 rows.
Figures are reported, not asserted: the exit code is 0 unless the bench
itself breaks (a tray that must be killed is reported on the ``stop:`` line). Run: .venv/bin/python bench/ui.py --seconds 60
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

from bench.harness.errors import BenchError
from bench.suites.ui.child import child_main
from bench.suites.ui.constants import SETTLE_SECONDS, STOP_SECONDS, WORKER_ROWS
from bench.suites.ui.measure import Renewer, measure, register_workers
from bench.suites.ui.report import report
from bench.suites.ui.tray import Stopped, Tray


def run(seconds: float, home: Path | None) -> None:
    with contextlib.ExitStack() as stack:
        if home is None:
            home = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="mcp-tray-bench-ui-"))
            )
        home.mkdir(parents=True, exist_ok=True)
        tray = Tray(home)
        tray.paths.ensure()
        names = tray.write_config()
        renewer: Renewer | None = None
        stopped: Stopped | None = None
        try:
            began = time.monotonic()
            tray.start()
            tray.wait_ready(names)
            startup = time.monotonic() - began
            print(f"bench: {len(names)} servers READY after {startup:.1f} s", file=sys.stderr)

            time.sleep(SETTLE_SECONDS)
            print(f"bench: idle, {seconds:g} s...", file=sys.stderr)
            idle = measure(tray, "1 idle, Servers tab", seconds)

            tray.toggle_window()
            time.sleep(SETTLE_SECONDS)
            before = tray.model()
            print(f"bench: idle, window hidden, {seconds:g} s...", file=sys.stderr)
            hidden = measure(tray, "1h idle, window hidden", seconds)
            hidden.before = before
            if hidden.reply is not None and hidden.reply.counts.get("visible") != 0:
                raise BenchError("the window did not hide on SIGHUP")
            tray.toggle_window()

            rows = register_workers(tray.paths.registry_file, names)
            renewer = Renewer(tray.paths.registry_file, rows)
            renewer.start()
            tray.wait_workers(WORKER_ROWS)
            time.sleep(SETTLE_SECONDS)
            print(f"bench: 1,000 rows, Servers tab, {seconds:g} s...", file=sys.stderr)
            rows_servers = measure(tray, "2a 1,000 worker rows, Servers tab", seconds)
            got = rows_servers.reply.counts.get("workers") if rows_servers.reply else None
            if got != WORKER_ROWS:
                raise BenchError(f"the window's Workers model holds {got} rows, not {WORKER_ROWS}")

            tray.show_workers_tab()
            time.sleep(SETTLE_SECONDS)
            print(f"bench: 1,000 rows, Workers tab, {seconds:g} s...", file=sys.stderr)
            rows_workers = measure(tray, "2b 1,000 worker rows, Workers tab", seconds)
            renewer.stop()
            report([idle, hidden, rows_servers, rows_workers], startup, renewer, seconds)
        finally:
            if renewer is not None and renewer.is_alive():
                renewer.halt.set()
                renewer.join(10)
            stopped = tray.stop()
            how = (
                f"did NOT stop within {STOP_SECONDS:g} s of SIGTERM: killed"
                if stopped.forced
                else f"stopped on SIGTERM in {stopped.seconds:.1f} s, exit code {stopped.code}"
            )
            left = (
                f"{len(stopped.leftovers)} demo server(s) outlived it and were killed by the bench"
                if stopped.leftovers
                else "no demo server left running"
            )
            print(f"stop: the tray {how}; {left}")
        print(f"reproduce: .venv/bin/python bench/ui.py --seconds {seconds:g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each window")
    parser.add_argument(
        "--home", type=Path, help="MCP_TRAY_HOME to use and keep (default: a temporary one)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    try:
        run(args.seconds, args.home)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    return 0
