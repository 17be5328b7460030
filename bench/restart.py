"""Clients survive a tray restart: one SDK client through a real bridge, the tray restarted under it.

Everything is a real process. A headless tray (``mcp-tray run --headless``)
runs from a private MCP_TRAY_HOME with one server, ``echo``
(tests/servers/echo.py), on ``gateway.port`` 0 (a new free port at every
start). One client, the SDK's ``ClientSession`` over ``stdio_client``, talks
to a real bridge (``mcp-tray connect echo``, started by the SDK as a client
would, MCP_TRAY_* of the caller's environment dropped) for the whole run: it
is initialized once, lists the tools once (the bridge learns there that
``echo`` is read-only, so safe to send again) and is never restarted.

While the client calls ``echo`` with a new text each time, back to back
(``--interval`` adds a pause), the bench restarts the tray RESTARTS times,
alternating SIGTERM (an orderly stop, as an upgrade does) and SIGKILL (a
crash). After the signal it waits for the old tray's exit (a second tray
cannot start while the first holds the instance lock), starts a new one at
once on the same home and config, waits until its runtime file names it,
then until the client has had an answer to a call sent after the signal, and
lets the calls run BETWEEN seconds more before the next restart.

Every call is classified:

* answered: the result's text is the text sent;
* honest error: the call failed with an error the client can act on (an
  ``MCPError``, or a tool result with ``isError``); the distinct messages are
  printed, with whether each names mcp-tray;
* lost: an answer that is not the text sent (someone else's answer, or none);
* hung: no answer within CALL_SECONDS (``asyncio.wait_for``; the bridge
  gives up on an absent tray after MCP_TRAY_RECONNECT_SECONDS, default 60 s,
  passed on to the bridge when set in the bench's environment);
* broken: any other exception (the client's transport failed); three in a
  row end the run.

Gap of a restart: from just before the signal to the answer of the first
call sent at or after it (an answer to a call sent before the signal, which
a stopping tray may still give, does not end the gap). Also printed: signal
-> old tray exited, signal -> new tray's runtime file, per kind of stop.

After the run the client is closed, the tray gets SIGTERM, and the bench
looks for what is left of its processes (the trays, the bridge, and any
process tagged MCP_TRAY_OWNER by one of its trays), then runs
``sweep_leftovers()`` and looks again. The trays' output (stdout and stderr,
all of them, in one file), the bridge's stderr and the servers' logs are
scanned for tracebacks (``--keep-logs DIR`` keeps a copy).

Targets (issue): 0 lost, 0 hung. Figures are reported, not asserted: the
exit code is 0 unless the bench itself breaks (the tray does not come up, or
the client session breaks). Run: .venv/bin/python bench/restart.py
"""

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final, TextIO

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from bench.harness.clients import result_text
from bench.harness.errors import BenchAborted
from bench.harness.files import ROOT
from bench.harness.leftovers import tell_leftovers
from bench.harness.logs import shape
from bench.harness.processes import bridge_pids, stop_tray, tagged_by, wait_or_kill_group
from bench.harness.records import Row, record
from bench.harness.stats import percentile
from bench.harness.tray import echo_config, spawn_tray, tray_env
from core.base.envvars import RECONNECT_SECONDS_ENV
from core.base.errors import NotRunning
from core.settings.paths import Paths, default_paths
from core.settings.runtime import RuntimeInfo, running_instance

SERVER: Final = "echo"
TOOL: Final = "echo"
DEFAULT_RESTARTS: Final = 20
#: Seconds of calls after the client's first answer following a restart.
DEFAULT_BETWEEN: Final = 1.5
#: Bound on one call: past it the call counts as hung.
CALL_SECONDS: Final = 90.0
#: Bound on a tray's start-up (its runtime file written) and on its exit after SIGTERM.
READY_SECONDS: Final = 60.0
STOP_SECONDS: Final = 30.0
#: Broken calls in a row (the client's transport failed) that end the run.
BROKEN_IN_A_ROW: Final = 3
#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS: Final = (
    Row(
        "tray restarts under a client on the bridge",
        "0 lost, 0 hung",
        "{restarts} restarts, {calls:,} calls: {answered:,} answered, {lost} lost, {hung} hung; "
        "gap per restart p50 {gap_p50_ms:,.0f} ms, p95 {gap_p95_ms:,.0f} ms",
    ),
)


# Type-checked under every OS by `make lint`; it only runs where it measures.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"
# ------------------------------------------------------------------ the trays


def bridge_env(home: Path) -> dict[str, str]:
    """The tray's environment, plus the caller's MCP_TRAY_RECONNECT_SECONDS if set."""
    env = tray_env(home) | {"MCP_TRAY_CLIENT": "bench-restart"}
    if RECONNECT_SECONDS_ENV in os.environ:
        env[RECONNECT_SECONDS_ENV] = os.environ[RECONNECT_SECONDS_ENV]
    return env


class Trays:
    """Headless trays, one after another, on one private home; their output goes to one file."""

    def __init__(self, home: Path, config: Path, log: IO[bytes]) -> None:
        self.home = home
        self.config = config
        self.paths: Paths = default_paths({"MCP_TRAY_HOME": str(home)})
        self.log = log
        self.process: asyncio.subprocess.Process | None = None
        #: Every tray pid this bench started, in order.
        self.pids: list[int] = []

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        self.log.write(f"\n--- bench: tray #{len(self.pids) + 1} starting\n".encode())
        self.log.flush()
        self.process = await spawn_tray(self.config, self.home, self.log)
        self.pids.append(self.process.pid)

    async def wait_up(self) -> RuntimeInfo:
        """The runtime file of the tray just started (it holds the lock and has published)."""
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise BenchAborted(
                    f"tray pid {self.pid} exited with {self.process.returncode} during start-up"
                )
            with contextlib.suppress(NotRunning):
                info = running_instance(self.paths)
                if info.pid == self.pid:
                    return info
            await asyncio.sleep(0.02)
        raise BenchAborted(f"tray pid {self.pid} not up within {READY_SECONDS:g} s")

    async def wait_exit(self) -> int | None:
        """The tray's exit code; None if it had to be killed (group) after STOP_SECONDS."""
        assert self.process is not None
        return await wait_or_kill_group(self.process, STOP_SECONDS)

    async def stop(self) -> int | None:
        return await stop_tray(self.process, STOP_SECONDS)


# ------------------------------------------------------------------- the client


@dataclass
class Call:
    text: str
    sent: float
    done: float
    #: answered, error, lost, hung or broken.
    outcome: str
    detail: str = ""


@dataclass
class Restart:
    kind: str
    signalled: float
    exited: float
    up: float
    exit_code: int | None
    old_port: int
    new_port: int
    #: Processes tagged by an earlier tray still alive when the next restart began.
    orphans: int = 0


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    bridge_pids: list[int] = field(default_factory=list)
    aborted: str | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, call: Call) -> None:
        self.calls.append(call)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def first_answer_after(self, moment: float, timeout: float) -> bool:
        """Wait until a call sent at or after ``moment`` was answered; False on timeout."""
        deadline = time.perf_counter() + timeout
        while True:
            if any(c.outcome == "answered" and c.sent >= moment for c in self.calls[-50:]):
                return True
            if self.aborted is not None:
                return False
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)


def classify(text: str, result: object) -> tuple[str, str]:
    if not isinstance(result, CallToolResult):
        return "lost", f"not a tool result: {type(result).__name__}"
    got = result_text(result)
    if result.is_error:
        return "error", f"tool error: {got}"
    if got == text:
        return "answered", ""
    return "lost", f"sent {text!r}, got {got!r}"


async def call_loop(session: ClientSession, run: Run, stop: asyncio.Event, interval: float) -> None:
    number = 0
    broken = 0
    while not stop.is_set():
        number += 1
        text = str(number)
        sent = time.perf_counter()
        try:
            result = await asyncio.wait_for(session.call_tool(TOOL, {"text": text}), CALL_SECONDS)
        except TimeoutError:
            outcome, detail = "hung", f"no answer within {CALL_SECONDS:g} s"
        except MCPError as exc:
            outcome, detail = "error", str(exc)
        except Exception as exc:
            outcome, detail = "broken", f"{type(exc).__name__}: {exc}"
        else:
            outcome, detail = classify(text, result)
        run.add(Call(text, sent, time.perf_counter(), outcome, detail))
        broken = broken + 1 if outcome == "broken" else 0
        if broken >= BROKEN_IN_A_ROW:
            run.aborted = f"the client session broke ({BROKEN_IN_A_ROW} calls in a row): {detail}"
            stop.set()
            return
        if interval:
            await asyncio.sleep(interval)


async def restart_loop(
    trays: Trays, run: Run, stop: asyncio.Event, restarts: int, between: float
) -> None:
    try:
        for number in range(restarts):
            if stop.is_set():
                return
            orphans = await asyncio.to_thread(tagged_by, trays.pids, trays.pid)
            kind, sig = (
                ("SIGTERM", signal.SIGTERM) if number % 2 == 0 else ("SIGKILL", signal.SIGKILL)
            )
            old_port = running_instance(trays.paths).port
            assert trays.process is not None
            signalled = time.perf_counter()
            trays.process.send_signal(sig)
            code = await trays.wait_exit()
            exited = time.perf_counter()
            await trays.start()
            info = await trays.wait_up()
            up = time.perf_counter()
            run.restarts.append(
                Restart(kind, signalled, exited, up, code, old_port, info.port, len(orphans))
            )
            if not await run.first_answer_after(signalled, CALL_SECONDS + 30.0):
                if run.aborted is None:
                    run.aborted = (
                        f"restart {number + 1} ({kind}): no call sent after the signal was "
                        f"answered within {CALL_SECONDS + 30.0:g} s"
                    )
                return
            await asyncio.sleep(between)
    except BenchAborted as exc:
        run.aborted = str(exc)
    finally:
        stop.set()


async def bench(
    trays: Trays, run: Run, restarts: int, between: float, interval: float, errlog: TextIO
) -> None:
    await trays.start()
    await trays.wait_up()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", SERVER],
        env=bridge_env(trays.home),
        cwd=str(ROOT),
    )
    try:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), READY_SECONDS)
                run.bridge_pids = await asyncio.to_thread(bridge_pids)
                # The bridge learns here which tools are safe to send again.
                await asyncio.wait_for(session.list_tools(), READY_SECONDS)
                stop = asyncio.Event()
                await asyncio.gather(
                    call_loop(session, run, stop, interval),
                    restart_loop(trays, run, stop, restarts, between),
                )
    finally:
        await trays.stop()


# ------------------------------------------------------------------- the report


def row(label: str, values: list[float]) -> str:
    if not values:
        return f"  {label:<40} {0:>4}        -         -         -"
    return (
        f"  {label:<40} {len(values):>4} {percentile(values, 0.50):>9.1f} "
        f"{percentile(values, 0.95):>9.1f} {max(values):>9.1f}"
    )


def gap_ms(run: Run, restart: Restart) -> float | None:
    answers = [c.done for c in run.calls if c.outcome == "answered" and c.sent >= restart.signalled]
    return (min(answers) - restart.signalled) * 1000.0 if answers else None


def report(run: Run, args: argparse.Namespace, seconds: float) -> None:
    counts = Counter(c.outcome for c in run.calls)
    errors = [c for c in run.calls if c.outcome == "error"]
    print(
        "mcp-tray restart: one SDK client through one bridge (mcp-tray connect echo), "
        "the tray restarted under it"
    )
    print(
        f"  python {platform.python_version()}, {os.cpu_count()} CPU(s), {platform.platform()}, "
        f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    kinds = Counter(r.kind for r in run.restarts)
    print(
        f"  restarts: {len(run.restarts)} of {args.restarts} "
        f"({kinds['SIGTERM']} SIGTERM, {kinds['SIGKILL']} SIGKILL), "
        f"{args.between:g} s of calls between them; bridge wait for an absent tray "
        f"{os.environ.get(RECONNECT_SECONDS_ENV, '60 (default)')} s; run took {seconds:.1f} s"
    )
    ports = sorted({r.new_port for r in run.restarts})
    print(f"  ports: a new one at every start ({len(ports)} distinct over the restarts)")
    print(f"  calls: {len(run.calls)} ({TOOL!r}, one at a time, interval {args.interval:g} s)")
    print(f"    answered       {counts['answered']}")
    print(f"    honest errors  {counts['error']}")
    for message, number in Counter(shape(c.detail) for c in errors).most_common():
        sample = next(c.detail for c in errors if shape(c.detail) == message)
        names = "names mcp-tray" if "mcp-tray" in sample else "does NOT name mcp-tray"
        print(f"      {number:>4} x ({names}) {sample[:300]}")
    print(f"    lost           {counts['lost']}")
    for call in [c for c in run.calls if c.outcome == "lost"][:5]:
        print(f"      {call.detail[:200]}")
    print(f"    hung           {counts['hung']}")
    print(f"    broken         {counts['broken']}")
    for call in [c for c in run.calls if c.outcome == "broken"][:3]:
        print(f"      {call.detail[:200]}")
    print()
    print(f"  {'figure (ms)':<40} {'n':>4} {'p50':>9} {'p95':>9} {'max':>9}")
    for kind in ("all", "SIGTERM", "SIGKILL"):
        chosen = [r for r in run.restarts if kind in ("all", r.kind)]
        gaps = [g for r in chosen if (g := gap_ms(run, r)) is not None]
        label = "gap: signal -> first call answered" if kind == "all" else f"  {kind}"
        print(row(label, gaps))
    for kind in ("SIGTERM", "SIGKILL"):
        chosen = [r for r in run.restarts if r.kind == kind]
        print(
            row(
                f"{kind}: signal -> old tray exited",
                [(r.exited - r.signalled) * 1e3 for r in chosen],
            )
        )
        print(row(f"{kind}: signal -> new tray up", [(r.up - r.signalled) * 1e3 for r in chosen]))
    answered = [(c.done - c.sent) * 1e3 for c in run.calls if c.outcome == "answered"]
    print(row("call answered (send -> answer)", answered))
    codes = Counter(r.exit_code for r in run.restarts if r.kind == "SIGTERM")
    print(
        "  exit codes of the trays stopped with SIGTERM: "
        + ", ".join(f"{code} x{n}" for code, n in codes.items())
    )
    orphaned = [r for r in run.restarts if r.orphans]
    print(
        "  processes of an earlier tray still alive at the next restart: "
        + (", ".join(f"{r.orphans} (before restart after a {r.kind})" for r in orphaned) or "none")
    )


def figures(run: Run) -> dict[str, float | int]:
    """The figures docs/measured.md's table shows (bench/results.py)."""
    counts = Counter(c.outcome for c in run.calls)
    gaps = [g for r in run.restarts if (g := gap_ms(run, r)) is not None]
    return {
        "restarts": len(run.restarts),
        "calls": len(run.calls),
        "answered": counts["answered"],
        "lost": counts["lost"],
        "hung": counts["hung"],
        "gap_p50_ms": percentile(gaps, 0.50) if gaps else float("nan"),
        "gap_p95_ms": percentile(gaps, 0.95) if gaps else float("nan"),
    }


def targets(run: Run) -> None:
    counts = Counter(c.outcome for c in run.calls)
    print("targets:")
    for name, value in (("lost", counts["lost"]), ("hung", counts["hung"])):
        print(f"  0 {name}: {value}  {'PASS' if value == 0 else 'MISS'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--restarts",
        type=int,
        default=DEFAULT_RESTARTS,
        help=f"tray restarts, SIGTERM and SIGKILL alternately (default {DEFAULT_RESTARTS})",
    )
    parser.add_argument(
        "--between",
        type=float,
        default=DEFAULT_BETWEEN,
        help="seconds of calls after the first answer following a restart "
        f"(default {DEFAULT_BETWEEN:g})",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="pause between two calls, seconds (default 0: back to back)",
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        help="copy the trays' output, the bridge's stderr and the servers' logs here",
    )
    args = parser.parse_args()
    if args.restarts < 1 or args.between < 0 or args.interval < 0:
        parser.error("--restarts must be >= 1, --between and --interval >= 0")

    run = Run()
    began = time.perf_counter()
    failed: str | None = None
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        home = Path(tmp)
        paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
        config = paths.config_file
        config.write_text(json.dumps(echo_config(), indent=2))
        tray_log, bridge_log = home / "trays.log", home / "bridge-stderr.log"
        with tray_log.open("ab") as log, bridge_log.open("w") as errlog:
            trays = Trays(home, config, log)
            try:
                asyncio.run(bench(trays, run, args.restarts, args.between, args.interval, errlog))
            except BenchAborted as exc:
                failed = str(exc)
            except KeyboardInterrupt:
                failed = "interrupted"
        elapsed = time.perf_counter() - began

        report(run, args, elapsed)
        tell_leftovers(
            trays.pids,
            run.bridge_pids,
            [tray_log, bridge_log, *sorted(paths.log_dir.glob("*.log"))],
            args.keep_logs,
            after="the client closed and the last tray's SIGTERM",
            trays="trays",
            logs_named="the trays' output, the bridge's stderr, the server logs",
        )
    targets(run)
    if run.aborted:
        print(f"ABORTED: {run.aborted}")
    if failed:
        print(f"ABORTED: {failed}")
    command = ".venv/bin/python bench/restart.py"
    if RECONNECT_SECONDS_ENV in os.environ:
        command = f"{RECONNECT_SECONDS_ENV}={os.environ[RECONNECT_SECONDS_ENV]} {command}"
    command += f" --restarts {args.restarts}"
    if args.between != DEFAULT_BETWEEN:
        command += f" --between {args.between:g}"
    if args.interval:
        command += f" --interval {args.interval:g}"
    print(f"reproduce: {command}")
    if not (failed or run.aborted):
        record("restart", command, figures(run), ROWS)
    return 1 if failed or run.aborted else 0


if __name__ == "__main__":
    sys.exit(main())
