"""Scale: what opening, holding and closing many client sessions costs the tray,
and how many calls per second it serves to many sessions.

Everything is a real process: a headless tray (``mcp-tray run --headless``,
bench/gateway.py's ``Tray``) on a private MCP_TRAY_HOME with one server,
``echo``, and this process as the client. The client speaks the handshake
era by hand with bench/gateway.py's ``RawHttpClient`` (HTTP/1.1 keep-alive,
Content-Length bodies, json only, no SDK), and the echo child is written by
hand too (bench/lean_echo.py; ``--child sdk`` serves tests/servers/echo.py,
whose ~2 ms of CPU per call then caps the calls/s), so what is measured is
the tray, not a client or a server library. CPU and RSS are the tray
process's own (psutil); the calls section shows the child's CPU beside it.

Opens (``--opens 100,500,1000``), on a fresh tray for each count N:

1. a probe session calls ``echo`` every PROBE_INTERVAL_SECONDS (its
   latencies before, during and after the opens are compared); first
   BASELINE_SECONDS of nothing (the idle tray), then BASELINE_SECONDS of the
   probe alone;
2. N sessions are opened (``initialize`` + ``notifications/initialized``),
   at most OPEN_CONCURRENCY at a time over as many keep-alive connections (a
   session is not tied to a connection, and the gateway caps connections at
   512): as fast as they go, or ``--open-rate`` per second;
3. the probe stops at the last open; from then on, the tray's CPU is sampled
   every SAMPLE_SECONDS until it is quiet: a QUIET_SECONDS stretch costing no
   more than the idle tray did, plus QUIET_MARGIN of a core (at most
   SETTLE_MAX_SECONDS). "Quiet after" is the time from the last open to the
   start of that stretch; the CPU spent until then is the aftermath. Then the
   probe calls again for BASELINE_SECONDS ("once quiet again");
4. with the N sessions idle (nothing sent), the tray's CPU over
   ``--idle-seconds`` (longer than the 20 s heartbeat interval of the HTTP
   sessions' worker rows), then its RSS, open fds and registry rows;
5. every session is DELETEd; once its rows are gone (or CLOSE_WAIT_SECONDS
   passed), RSS, fds and rows again.

Calls (``--sessions 1,8,32,64``): S sessions, each on its own connection,
call ``echo`` back to back; calls/s, tray CPU per call, p50/p99, the child's
CPU and this process's (a client or child near one core would be the limit,
not the tray).
With ``--loops asyncio,uvloop`` there is one tray per loop, and their blocks
of BLOCK_SECONDS are interleaved, the first loop rotating, so the noise of
a small shared machine hits each alike. The uvloop tray runs the same CLI
with uvloop's loop policy set first (``asyncio.run`` then makes a uvloop
loop); uvloop must be installed in the venv (``pip install uvloop``).
``--baseline DIR`` adds, for each loop, a tray running the code of another
checkout (``git archive main | tar -x -C DIR``) on this venv, labelled
``LOOP@base``, interleaved the same way: a change's before and after in one
run (for opens, each count runs on this checkout's tray, then on the baseline's). ``--tray-profile FILE`` runs the first loop's tray under cProfile (its
figures then include cProfile's own cost; the others' do not).
``--journal on,off`` runs one tray per mode (the call journal written, or never
opened), interleaved the same way, and prints what the journal costs per call.

Targets (issue 20): <= 2 ms of tray CPU per session opened at 1,000
sessions; quiet within 1 s of the last open; probe p99 during a burst <=
1.5x before it; 1,000 idle sessions <= 40 MiB of RSS and no CPU; closing
returns fds and rows; uvloop only for >= 15 % less tray CPU per call.
Figures are reported, not asserted. Each section prints the command that
reproduces it. Run: .venv/bin/python bench/scale.py
"""

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from bench.harness.processes import sigterm_as_interrupt
from bench.harness.tray import Tray
from bench.suites.scale.calls import keep_calls, measure_calls, report_calls, report_journal
from bench.suites.scale.common import BASELINE_SUFFIX, JOURNAL_OFF_SUFFIX, running_tray
from bench.suites.scale.constants import (
    CHILDREN,
    DEFAULT_CALL_SECONDS,
    DEFAULT_IDLE_SECONDS,
    DEFAULT_OPENS,
    DEFAULT_SESSIONS,
    LOOP_SETUP,
)
from bench.suites.scale.opens import measure_opens, report_opens


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,8,32, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return counts


def _loops(text: str) -> tuple[str, ...]:
    loops = tuple(part for part in text.split(",") if part)
    unknown = [loop for loop in loops if loop not in LOOP_SETUP]
    if unknown or not loops:
        raise argparse.ArgumentTypeError(f"loops are {', '.join(LOOP_SETUP)}; got {text!r}")
    return loops


def _journal_modes(text: str) -> tuple[str, ...]:
    modes = tuple(part.strip() for part in text.split(","))
    if (
        not modes
        or any(mode not in ("on", "off") for mode in modes)
        or len(set(modes)) < len(modes)
    ):
        raise argparse.ArgumentTypeError(f"expected on, off or on,off; got {text!r}")
    return modes


def _command(*args: str) -> str:
    return " ".join([".venv/bin/python bench/scale.py", *args])


async def run(args: argparse.Namespace, homes: Callable[[], Path]) -> None:
    loops: Sequence[str] = args.loops
    if args.only in (None, "opens"):
        # With --baseline, each count runs on this checkout's tray, then on the baseline's.
        codes: list[Path | None] = [None] if args.baseline is None else [None, args.baseline]
        for count in args.opens:
            for code in codes:
                home = homes()
                with running_tray(home, loops[0], args.child, code) as tray:
                    result = await measure_opens(
                        tray, home, count, args.idle_seconds, args.open_rate
                    )
                if args.baseline is not None:
                    print(f"\n{'baseline ' + str(code) if code else 'this checkout'}:", end="")
                report_opens(
                    result,
                    _command(
                        "--only opens",
                        f"--opens {count}",
                        f"--idle-seconds {args.idle_seconds:g}",
                        f"--open-rate {args.open_rate:g}",
                        f"--loops {loops[0]}",
                        f"--child {args.child}",
                        *([f"--baseline {args.baseline}"] if args.baseline else []),
                    ),
                    keep=code is None and not args.no_record,
                )
    if args.only in (None, "calls"):
        with contextlib.ExitStack() as stack:
            trays: dict[str, Tray] = {}
            for at, loop in enumerate(loops):
                for journal in args.journal:
                    label = loop if journal == "on" else f"{loop}{JOURNAL_OFF_SUFFIX}"
                    profile = args.tray_profile if at == 0 and not trays else None
                    trays[label] = stack.enter_context(
                        running_tray(
                            homes(), loop, args.child, profile=profile, journal=journal == "on"
                        )
                    )
            if args.baseline is not None:
                for loop in loops:
                    trays[f"{loop}{BASELINE_SUFFIX}"] = stack.enter_context(
                        running_tray(homes(), loop, args.child, args.baseline)
                    )
            results = {
                count: await measure_calls(trays, count, args.seconds, args.call_rate)
                for count in args.sessions
            }
        command = _command(
            "--only calls",
            f"--sessions {','.join(map(str, args.sessions))}",
            f"--seconds {args.seconds:g}",
            f"--loops {','.join(loops)}",
            f"--child {args.child}",
            f"--journal {','.join(args.journal)}",
            *([f"--call-rate {args.call_rate:g}"] if args.call_rate else []),
            *([f"--baseline {args.baseline}"] if args.baseline else []),
            *([f"--tray-profile {args.tray_profile}"] if args.tray_profile else []),
        )
        report_calls(results, command, args.call_rate)
        report_journal(results)
        if not args.no_record and args.tray_profile is None and not args.call_rate:
            keep_calls(results, command, loops[0])
        if args.tray_profile is not None:
            print(f"  tray profile ({loops[0]}): python -m pstats {args.tray_profile}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--opens", type=_counts, default=DEFAULT_OPENS, help="session counts")
    parser.add_argument("--sessions", type=_counts, default=DEFAULT_SESSIONS, help="for calls/s")
    parser.add_argument(
        "--seconds", type=float, default=DEFAULT_CALL_SECONDS, help="calls per count and loop"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=DEFAULT_IDLE_SECONDS, help="idle CPU window"
    )
    parser.add_argument(
        "--loops", type=_loops, default=("asyncio",), help="asyncio, uvloop or asyncio,uvloop"
    )
    parser.add_argument(
        "--open-rate",
        type=float,
        default=0.0,
        help="sessions opened per second (0: as fast as they go, 16 at a time)",
    )
    parser.add_argument(
        "--child",
        choices=tuple(CHILDREN),
        default="lean",
        help="the echo server behind the tray: lean (bench/lean_echo.py, by hand) or sdk "
        "(tests/servers/echo.py, ~2 ms of CPU per call: it, not the tray, is then the limit)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="calls: also run trays on another checkout's code (git archive main | tar -x -C "
        "DIR), interleaved with this one's, and compare",
    )
    parser.add_argument(
        "--tray-profile",
        type=Path,
        default=None,
        help="calls: run the first loop's tray under cProfile and write its stats here "
        "(cProfile's own cost inflates the figures of that tray)",
    )
    parser.add_argument(
        "--journal",
        type=_journal_modes,
        default=("on",),
        help="calls: on, off, or on,off (one tray each, their blocks interleaved): what the "
        "call journal costs per call",
    )
    parser.add_argument(
        "--call-rate",
        type=float,
        default=0.0,
        help="calls: calls per second across the sessions (0: back to back, the tray "
        "saturated). A fixed rate compares trays at the same load, where back to back "
        "each runs at its own",
    )
    parser.add_argument("--only", choices=("opens", "calls"), default=None)
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not keep this run's figures in bench/results/ (docs/measured.md's table)",
    )
    args = parser.parse_args(argv)
    if args.tray_profile is not None:
        args.tray_profile = args.tray_profile.resolve()
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not (args.baseline / "core" / "cli" / "main.py").is_file():
            parser.error(f"--baseline {args.baseline}: no core/cli/main.py there")
    if "uvloop" in args.loops:
        try:
            import uvloop  # noqa: F401
        except ImportError:
            parser.error("uvloop is not installed in this venv: .venv/bin/pip install uvloop")
    print(f"bench/scale.py on {psutil.cpu_count()} CPUs, python {sys.version.split()[0]}")
    with (
        sigterm_as_interrupt(),
        tempfile.TemporaryDirectory(prefix="mcp-tray-scale-") as root,
    ):
        made = iter(range(1_000_000))

        def homes() -> Path:
            home = Path(root) / f"home-{next(made)}"
            home.mkdir()
            return home

        try:
            asyncio.run(run(args, homes))
        except KeyboardInterrupt:
            print("\nbench: interrupted; stopping everything it started", file=sys.stderr)
            return 130
    return 0
