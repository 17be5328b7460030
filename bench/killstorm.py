"""Kill storm: one server's incidents must not block client sessions.

Everything is a real process. A headless tray (``mcp-tray run --headless``)
runs from a private MCP_TRAY_HOME with one server, ``echo``
(tests/servers/echo.py). Four client sessions are open on it at once, all
the SDK's ``ClientSession``:

* BRIDGES over ``stdio_client`` -> ``mcp-tray connect echo`` (each with a
  client session of its own, ``MCP_TRAY_CLIENT_SESSION``);
* HTTP over ``streamable_http_client`` (httpx2, the tray's token) ->
  the tray's ``/mcp/echo``.

Each session is initialized and lists the tools once, then the sessions
share CALLS calls of the read-only tool (default ``slow_read``, SECONDS
each, so a call is nearly always in flight when the child dies; ``--tool
echo`` for instant calls), each session one call at a time, taking the next
number until all are made. SECONDS defaults to 0.2 so that 1,000 calls last
about a minute, a dozen kills at one every 5 s (0.05 makes it ~20 s, 3
kills). Every call asks for an answer of its own
(``slow_read`` with SECONDS + number/1e6, ``echo`` with the number), so an
answer that belongs to another call is caught. Meanwhile a task kill -9s
the tray's echo.py child (found with psutil among the tray's descendants)
every KILL_EVERY seconds until the calls are done.

Every call is classified: answered (the answer it asked for), error (an
``MCPError`` or a tool result with ``isError``; the distinct messages are
printed), lost (another answer), hung (none within CALL_SECONDS,
``asyncio.wait_for``) or broken (any other exception: the client's
transport failed). The calls in flight at a kill are also counted apart.

Before the sessions close, ``mcp-tray status --json`` gives their breakers
(``sessions``: ``breaker`` tripped/closed, ``consecutive_failures``) and the
server's state, generation, restarts and breaker. Then the clients close,
the tray gets SIGTERM, and the bench looks for what is left of its
processes, runs ``sweep_leftovers()`` and looks again. The tray's output,
the bridges' stderr and the server log are scanned for tracebacks
(``--keep-logs DIR`` keeps a copy).

Targets (issue): >= 95 % of the calls answered, 0 lost, 0 hung, 0 sessions
tripped. Figures are reported, not asserted: the exit code is 0 unless the
bench itself breaks. Run: .venv/bin/python bench/killstorm.py
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, TextIO

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bench.harness.clients import result_text
from bench.harness.errors import BenchAborted
from bench.harness.files import ECHO_SCRIPT, ROOT
from bench.harness.leftovers import tell_leftovers
from bench.harness.logs import shape
from bench.harness.processes import bridge_pids, children_running, stop_tray
from bench.harness.records import Row, record
from bench.harness.stats import percentile
from bench.harness.tray import (
    KEYRING_BACKEND,
    echo_config,
    server_entry,
    spawn_tray,
    tray_cli_async,
    tray_env,
)
from core.base.errors import NotRunning
from core.settings.paths import Paths, default_paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token

SERVER: Final = "echo"
DEFAULT_CALLS: Final = 1000
DEFAULT_BRIDGES: Final = 2
DEFAULT_HTTP: Final = 2
DEFAULT_TOOL: Final = "slow_read"
DEFAULT_SECONDS: Final = 0.2
DEFAULT_KILL_EVERY: Final = 5.0
#: Bound on one call: past it the call counts as hung.
CALL_SECONDS: Final = 90.0
#: Bound on the tray's start-up (echo READY) and on its exit after SIGTERM.
READY_SECONDS: Final = 60.0
STOP_SECONDS: Final = 30.0
TARGET_ANSWERED: Final = 0.95


# Type-checked under every OS by `make lint`; it only runs where it measures.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"
# -------------------------------------------------------------------- the tray


class Tray:
    """One headless tray on a private home; its output goes to a file."""

    def __init__(self, home: Path, config: Path, log: IO[bytes]) -> None:
        self.home = home
        self.config = config
        self.paths: Paths = default_paths({"MCP_TRAY_HOME": str(home)})
        self.log = log
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        self.process = await spawn_tray(self.config, self.home, self.log)

    async def status(self) -> dict[str, Any] | None:
        """``mcp-tray status --json``; None when it fails."""
        code, out = await tray_cli_async(self.home, "status", "--json")
        if code != 0:
            return None
        with contextlib.suppress(ValueError):
            body = json.loads(out)
            return body if isinstance(body, dict) else None
        return None

    async def wait_ready(self) -> None:
        """Up (runtime file) and its echo server READY."""
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise BenchAborted(f"the tray exited with {self.process.returncode} at start-up")
            with contextlib.suppress(NotRunning):
                info = running_instance(self.paths)
                if info.pid == self.pid:
                    body = await self.status() or {}
                    if server_entry(body, SERVER).get("state") == "ready":
                        self.url = info.url
                        return
            await asyncio.sleep(0.2)
        raise BenchAborted(f"{SERVER} not ready within {READY_SECONDS:g} s")

    async def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL its group as a last resort (then None)."""
        return await stop_tray(self.process, STOP_SECONDS)


# ----------------------------------------------------------------- the sessions


@dataclass
class Call:
    session: str
    sent: float
    done: float
    #: answered, error, lost, hung or broken.
    outcome: str
    detail: str = ""


@dataclass
class Kill:
    at: float
    pids: list[int]


@dataclass
class Storm:
    calls: list[Call] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    #: Kill rounds that found no echo child to kill (it was being respawned).
    missed: int = 0
    status: dict[str, Any] = field(default_factory=dict)
    bridge_pids: list[int] = field(default_factory=list)


def request(tool: str, seconds: float, number: int) -> tuple[dict[str, Any], str]:
    """The arguments of call ``number`` and the answer only it should get."""
    if tool == "echo":
        return {"text": str(number)}, str(number)
    value = round(seconds + number / 1e6, 6)
    return {"seconds": value}, f"read after {value}"


async def worker(
    name: str,
    session: ClientSession,
    numbers: "itertools.count[int]",
    total: int,
    tool: str,
    seconds: float,
    storm: Storm,
) -> None:
    while (number := next(numbers)) < total:
        arguments, expected = request(tool, seconds, number)
        sent = time.perf_counter()
        try:
            result = await asyncio.wait_for(session.call_tool(tool, arguments), CALL_SECONDS)
        except TimeoutError:
            outcome, detail = "hung", f"no answer within {CALL_SECONDS:g} s"
        except MCPError as exc:
            outcome, detail = "error", str(exc)
        except Exception as exc:
            outcome, detail = "broken", f"{type(exc).__name__}: {exc}"
        else:
            got = result_text(result)
            if result.is_error:
                outcome, detail = "error", f"tool error: {got}"
            elif got == expected:
                outcome, detail = "answered", ""
            else:
                outcome, detail = "lost", f"asked for {expected!r}, got {got!r}"
        storm.calls.append(Call(name, sent, time.perf_counter(), outcome, detail))


async def kill_loop(tray: Tray, every: float, done: asyncio.Event, storm: Storm) -> None:
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), every)
        if done.is_set():
            return
        pids = await asyncio.to_thread(children_running, tray.pid, ECHO_SCRIPT)
        if not pids:
            storm.missed += 1
            continue
        at = time.perf_counter()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        storm.kills.append(Kill(at, pids))


@contextlib.asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                yield session


@contextlib.asynccontextmanager
async def bridge_session(home: Path, number: int, errlog: TextIO) -> AsyncIterator[ClientSession]:
    env = tray_env(home) | {
        "MCP_TRAY_CLIENT": "bench-killstorm",
        # A client session of its own: two bridges of one client session would
        # claim one worker row, and the older bridge, fenced, would exit.
        "MCP_TRAY_CLIENT_SESSION": f"killstorm-{number}",
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", SERVER],
        env=env,
        cwd=str(ROOT),
    )
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            yield session


async def bench(tray: Tray, args: argparse.Namespace, storm: Storm, errlog: TextIO) -> None:
    await tray.start()
    try:
        await tray.wait_ready()
        token = read_token(tray.paths.token_file)
        if not token:
            raise BenchAborted(f"no API token in {tray.paths.token_file}")
        async with contextlib.AsyncExitStack() as stack:
            sessions: dict[str, ClientSession] = {}
            for number in range(1, args.bridges + 1):
                sessions[f"bridge-{number}"] = await stack.enter_async_context(
                    bridge_session(tray.home, number, errlog)
                )
            for number in range(1, args.http + 1):
                sessions[f"http-{number}"] = await stack.enter_async_context(
                    http_session(f"{tray.url}/mcp/{SERVER}", token)
                )
            for session in sessions.values():
                await asyncio.wait_for(session.initialize(), READY_SECONDS)
                # A bridge learns here which tools are safe to send again.
                await asyncio.wait_for(session.list_tools(), READY_SECONDS)
            storm.bridge_pids = await asyncio.to_thread(bridge_pids)
            numbers = itertools.count()
            done = asyncio.Event()
            killer = asyncio.create_task(kill_loop(tray, args.kill_every, done, storm))
            try:
                await asyncio.gather(
                    *(
                        worker(name, s, numbers, args.calls, args.tool, args.seconds, storm)
                        for name, s in sessions.items()
                    )
                )
            finally:
                done.set()
                await killer
            # The sessions' breakers, while they are open.
            storm.status = await tray.status() or {}
    finally:
        await tray.stop()


# ------------------------------------------------------------------- the report


def row(label: str, values: list[float]) -> str:
    if not values:
        return f"  {label:<40} {0:>5}         -         -         -"
    return (
        f"  {label:<40} {len(values):>5} {percentile(values, 0.50):>9.1f} "
        f"{percentile(values, 0.95):>9.1f} {max(values):>9.1f}"
    )


def report(storm: Storm, args: argparse.Namespace, seconds: float) -> dict[str, int]:
    counts = Counter(c.outcome for c in storm.calls)
    errors = [c for c in storm.calls if c.outcome == "error"]
    total = args.calls
    print(
        f"mcp-tray kill storm: {args.bridges} bridge + {args.http} streamable-HTTP SDK sessions "
        f"on one echo server, its child kill -9'd every {args.kill_every:g} s"
    )
    print(
        f"  python {platform.python_version()}, {os.cpu_count()} CPU(s), {platform.platform()}, "
        f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    what = f"{args.tool}(seconds={args.seconds:g}+n/1e6)" if args.tool != "echo" else "echo(n)"
    print(f"  calls: {total} of {what}, one at a time per session; run took {seconds:.1f} s")
    answered = counts["answered"]
    print(f"    answered       {answered} ({answered / total:.1%})")
    print(f"    errors         {counts['error']}")
    for message, number in Counter(shape(c.detail) for c in errors).most_common():
        sample = next(c.detail for c in errors if shape(c.detail) == message)
        print(f"      {number:>4} x {sample[:300]}")
    print(f"    lost           {counts['lost']}")
    for call in [c for c in storm.calls if c.outcome == "lost"][:5]:
        print(f"      {call.session}: {call.detail[:200]}")
    print(f"    hung           {counts['hung']}")
    print(f"    broken         {counts['broken']}")
    for call in [c for c in storm.calls if c.outcome == "broken"][:3]:
        print(f"      {call.session}: {call.detail[:200]}")
    if len(storm.calls) != total:
        print(f"    (made {len(storm.calls)} of {total})")
    per_session = Counter((c.session, c.outcome) for c in storm.calls)
    names = sorted({c.session for c in storm.calls})
    print(
        "  per session (answered/made): "
        + ", ".join(
            f"{name} {per_session[(name, 'answered')]}/"
            f"{sum(n for (s, _), n in per_session.items() if s == name)}"
            for name in names
        )
    )
    print(
        f"  kills: {len(storm.kills)} (pids killed: {sum(len(k.pids) for k in storm.kills)}; "
        f"rounds that found no echo child: {storm.missed})"
    )
    cut = [c for c in storm.calls if any(c.sent <= k.at <= c.done for k in storm.kills)]
    cut_counts = Counter(c.outcome for c in cut)
    print(
        f"  calls in flight at a kill: {len(cut)} ("
        + ", ".join(f"{outcome} {n}" for outcome, n in cut_counts.items())
        + ")"
    )
    print()
    print(f"  {'figure (ms)':<40} {'n':>5} {'p50':>9} {'p95':>9} {'max':>9}")
    print(
        row(
            "call answered (send -> answer)",
            [(c.done - c.sent) * 1e3 for c in storm.calls if c.outcome == "answered"],
        )
    )
    print(
        row(
            "  of them in flight at a kill",
            [(c.done - c.sent) * 1e3 for c in cut if c.outcome == "answered"],
        )
    )
    after = []
    for kill in storm.kills:
        answers = [c.done for c in storm.calls if c.outcome == "answered" and c.sent >= kill.at]
        if answers:
            after.append((min(answers) - kill.at) * 1e3)
    print(row("kill -> first later-sent call answered", after))
    print()
    status = storm.status
    sessions = status.get("sessions") or []
    tripped = [s for s in sessions if s.get("breaker") == "tripped"]
    if not status:
        print("  status --json: no answer at the end of the calls")
    else:
        print(f"  sessions at the end (status --json): {len(sessions)}, tripped {len(tripped)}")
        for s in sessions:
            print(
                f"    {s.get('kind', '?'):<6} {s.get('client_name', '?'):<18} requests "
                f"{s.get('requests')!s:<5} consecutive_failures {s.get('consecutive_failures')} "
                f"breaker {s.get('breaker')}"
                + (f"  last error: {str(s['last_error'])[:160]}" if s.get("last_error") else "")
            )
        server = server_entry(status, SERVER)
        print(
            f"  server {SERVER} at the end: state {server.get('state')}, generation "
            f"{server.get('generation')} (1 + one respawn per kill would be "
            f"{1 + len(storm.kills)}), restarts {server.get('restarts')}, breaker "
            f"{server.get('breaker')}"
            + (f", last error: {server.get('last_error')}" if server.get("last_error") else "")
        )
    return {
        "answered": answered,
        "lost": counts["lost"],
        "hung": counts["hung"],
        "tripped": len(tripped) if status else -1,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--calls", type=int, default=DEFAULT_CALLS, help=f"calls in all (default {DEFAULT_CALLS})"
    )
    parser.add_argument(
        "--bridges",
        type=int,
        default=DEFAULT_BRIDGES,
        help=f"sessions through a bridge (default {DEFAULT_BRIDGES})",
    )
    parser.add_argument(
        "--http",
        type=int,
        default=DEFAULT_HTTP,
        help=f"streamable-HTTP sessions (default {DEFAULT_HTTP})",
    )
    parser.add_argument(
        "--tool",
        choices=("slow_read", "echo"),
        default=DEFAULT_TOOL,
        help=f"the read-only tool called (default {DEFAULT_TOOL})",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"how long a slow_read takes (default {DEFAULT_SECONDS:g})",
    )
    parser.add_argument(
        "--kill-every",
        type=float,
        default=DEFAULT_KILL_EVERY,
        help=f"seconds between two kill -9 of the echo child (default {DEFAULT_KILL_EVERY:g})",
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        help="copy the tray's output, the bridges' stderr and the server log here",
    )
    args = parser.parse_args()
    if args.calls < 1 or args.bridges < 0 or args.http < 0 or args.bridges + args.http < 1:
        parser.error("--calls must be >= 1, and there must be at least one session")
    if args.seconds < 0 or args.kill_every <= 0:
        parser.error("--seconds must be >= 0 and --kill-every > 0")
    # This process reads the tray's token too (read_token: keyring first, then the file).
    os.environ["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND

    storm = Storm()
    failed: str | None = None
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        home = Path(tmp)
        paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
        config = paths.config_file
        config.write_text(json.dumps(echo_config(), indent=2))
        tray_log, bridge_log = home / "tray.log", home / "bridges-stderr.log"
        with tray_log.open("ab") as log, bridge_log.open("w") as errlog:
            tray = Tray(home, config, log)
            try:
                asyncio.run(bench(tray, args, storm, errlog))
            except BenchAborted as exc:
                failed = str(exc)
            except KeyboardInterrupt:
                failed = "interrupted"
        elapsed = time.perf_counter() - began

        figures = report(storm, args, elapsed)
        tray_pid = tray.process.pid if tray.process is not None else -1
        tell_leftovers(
            [tray_pid],
            storm.bridge_pids,
            [tray_log, bridge_log, *sorted(paths.log_dir.glob("*.log"))],
            args.keep_logs,
            after="the clients closed and the tray's SIGTERM",
            trays="tray",
            logs_named="the tray's output, the bridges' stderr, the server log",
        )

    share = figures["answered"] / args.calls
    print("targets:")
    print(
        f"  answered >= {TARGET_ANSWERED:.0%}: {share:.1%}  "
        f"{'PASS' if share >= TARGET_ANSWERED else 'MISS'}"
    )
    for name in ("lost", "hung"):
        print(f"  0 {name}: {figures[name]}  {'PASS' if figures[name] == 0 else 'MISS'}")
    tripped = figures["tripped"]
    verdict = "PASS" if tripped == 0 else "MISS" if tripped > 0 else "n/a (no status)"
    print(f"  0 sessions tripped: {tripped if tripped >= 0 else '?'}  {verdict}")
    if failed:
        print(f"ABORTED: {failed}")
    command = ".venv/bin/python bench/killstorm.py"
    command += f" --calls {args.calls}"
    for flag, value, default in (
        ("bridges", args.bridges, DEFAULT_BRIDGES),
        ("http", args.http, DEFAULT_HTTP),
        ("tool", args.tool, DEFAULT_TOOL),
        ("seconds", args.seconds, DEFAULT_SECONDS),
        ("kill-every", args.kill_every, DEFAULT_KILL_EVERY),
    ):
        if value != default:
            command += f" --{flag} {value:g}" if isinstance(value, float) else f" --{flag} {value}"
    print(f"reproduce: {command}")
    if not failed:
        shown = figures | {"calls": args.calls, "answered_percent": 100 * share}
        sessions = args.bridges + args.http
        row = Row(
            f"kill -9 every {args.kill_every:g} s, {sessions} sessions, read-only calls",
            f"≥ {TARGET_ANSWERED:.0%} answered, 0 lost, 0 tripped",
            "{calls:,} calls: {answered_percent:.1f} % answered, {lost} lost, {hung} hung, "
            "{tripped} tripped",
        )
        record("killstorm", command, shown, [row])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
