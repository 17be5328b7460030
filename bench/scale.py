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
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from gateway import ECHO_SCRIPT, BenchError, RawHttpClient, Tray, _sigterm_as_interrupt
from harness import percentile
from probe import call
from results import Row, record

from core.settings.paths import default_paths

DEFAULT_OPENS: Final = (100, 500, 1000)
DEFAULT_SESSIONS: Final = (1, 8, 32, 64)
OPEN_CONCURRENCY: Final = 16
PROBE_INTERVAL_SECONDS: Final = 0.005
BASELINE_SECONDS: Final = 2.0
SAMPLE_SECONDS: Final = 0.1
QUIET_SECONDS: Final = 1.0
#: Share of a core above the probe's own cost that still counts as quiet.
QUIET_MARGIN: Final = 0.02
#: Past this the tray is reported as never quiet.
SETTLE_MAX_SECONDS: Final = 120.0
#: Longer than the heartbeat interval of HTTP sessions' rows (TTL 60 s / 3).
DEFAULT_IDLE_SECONDS: Final = 25.0
#: Bound on waiting for closed sessions' rows to leave the registry.
CLOSE_WAIT_SECONDS: Final = 10.0
DEFAULT_CALL_SECONDS: Final = 6.0
BLOCK_SECONDS: Final = 2.0
WARMUP_CALLS: Final = 50
#: What a tray's interpreter runs before the CLI, per event loop.
LOOP_SETUP: Final = {
    "asyncio": "",
    "uvloop": "import asyncio, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy()); ",
}
RUN_CLI: Final = "import runpy; runpy.run_module('core.cli.main', run_name='__main__')"
#: A tray with the call journal off (``--journal off``): the same code, its journal never
#: opened, so no call is recorded (core.serving.call_journal opens no watch without a writer).
JOURNAL_OFF: Final = (
    "import core.serving.service as _service; "
    "_service.TrayService._open_journal = lambda self, loop: None; "
)
#: The label of a tray whose journal is off.
JOURNAL_OFF_SUFFIX: Final = "/journal-off"
#: Issue 26: the journal may cost at most this much more tray CPU per call.
TARGET_JOURNAL_COST: Final = 0.10
#: The echo server the tray serves, by name: the SDK's, or one written by hand
#: that costs so little that the tray is what is measured.
CHILDREN: Final = {
    "lean": Path(__file__).resolve().with_name("lean_echo.py"),
    "sdk": ECHO_SCRIPT,
}
TARGET_CPU_PER_OPEN_MS: Final = 2.0
TARGET_QUIET_SECONDS: Final = 1.0
TARGET_P99_RATIO: Final = 1.5
TARGET_IDLE_MIB_PER_1000: Final = 40.0
TARGET_UVLOOP_SAVING: Final = 0.15
MIB: Final = 1024 * 1024


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def registry_rows(home: Path) -> int:
    """Rows in the tray's worker registry, read without writing (a write would be news to it)."""
    path = default_paths({"MCP_TRAY_HOME": str(home)}).registry_file
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM workers").fetchone()[0])


#: The label of a tray running the ``--baseline`` checkout's code.
BASELINE_SUFFIX: Final = "@base"


def runner(
    loop: str, baseline: Path | None, profile: Path | None = None, journal: bool = True
) -> tuple[str, ...]:
    """The interpreter arguments of a tray on ``loop``; with ``baseline``, running that
    checkout's ``core`` (first on sys.path, ahead of this venv's editable install); with
    ``profile``, under cProfile timed by the main thread's CPU clock (the tray serves on its
    main thread; a wall clock would charge the profile with the time the tray was not
    scheduled), its stats written there at exit."""
    code = LOOP_SETUP[loop] + ("" if journal else JOURNAL_OFF)
    if baseline is not None:
        code = f"import sys; sys.path.insert(0, {str(baseline)!r}); " + code
    if profile is None:
        return ("-c", code + RUN_CLI)
    return (
        "-c",
        code
        + "import cProfile, time\n"
        + "profiler = cProfile.Profile(time.thread_time)\n"
        + "profiler.enable()\n"
        + f"try:\n    {RUN_CLI}\n"
        + f"finally:\n    profiler.disable(); profiler.dump_stats({str(profile)!r})\n",
    )


@contextlib.contextmanager
def running_tray(
    home: Path,
    loop: str,
    child: str,
    baseline: Path | None = None,
    profile: Path | None = None,
    journal: bool = True,
) -> Iterator[Tray]:
    tray = Tray(home, None, runner(loop, baseline, profile, journal), CHILDREN[child])
    try:
        tray.start()
        tray.wait_ready()
        yield tray
    except BaseException:
        tray.stop()
        print(f"bench: tray output (tail):\n{tray.output()}", file=sys.stderr)
        raise
    finally:
        code = tray.stop()
        if code not in (0, None):
            print(f"  note: the {loop} tray exited with {code} on SIGTERM (expected 0)")


def tray_process(tray: Tray) -> psutil.Process:
    assert tray.process is not None
    return psutil.Process(tray.process.pid)


# ---------------------------------------------------------------- clients


class Pool:
    """Keep-alive connections that carry any session's requests, one at a time each."""

    def __init__(self, tray: Tray) -> None:
        self.url = f"{tray.url}/mcp/echo"
        self.token = tray.token
        self._free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.Queue()
        )
        self._writers: list[asyncio.StreamWriter] = []

    async def connect(self, size: int) -> None:
        for _ in range(size):
            self._free.put_nowait(await self._connection())

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        where = RawHttpClient(self.url, self.token)
        reader, writer = await asyncio.open_connection(where.host, where.port)
        self._writers.append(writer)
        return reader, writer

    @contextlib.asynccontextmanager
    async def lend(self, client: RawHttpClient) -> AsyncIterator[RawHttpClient]:
        connection = await self._free.get()
        if connection[0].at_eof():
            # Idle past the tray's keep-alive (75 s), e.g. through a long aftermath.
            connection = await self._connection()
        client.reader, client.writer = connection
        try:
            yield client
        finally:
            client.reader = client.writer = None
            self._free.put_nowait(connection)

    async def open_session(self) -> RawHttpClient:
        client = RawHttpClient(self.url, self.token)
        async with self.lend(client):
            await client.initialize()
        return client

    async def end_session(self, client: RawHttpClient) -> None:
        async with self.lend(client):
            await client.end()

    def close(self) -> None:
        for writer in self._writers:
            writer.close()


async def connected_session(tray: Tray) -> RawHttpClient:
    """A session with a connection of its own."""
    client = RawHttpClient(f"{tray.url}/mcp/echo", tray.token)
    await client.connect()
    await client.initialize()
    return client


class Probe:
    """One session calling echo at a steady pace, in a process of its own (bench/probe.py):
    its latencies by phase are the tray's, not this process's loop's."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self.latencies: dict[str, list[float]] = {}

    @classmethod
    async def started(cls, tray: Tray) -> "Probe":
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).with_name("probe.py")),
            f"{tray.url}/mcp/echo",
            tray.token,
            "--interval",
            str(PROBE_INTERVAL_SECONDS),
            "--warmup",
            str(WARMUP_CALLS),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        probe = cls(process)
        await probe._expect("ready")
        return probe

    async def _tell(self, command: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{command}\n".encode())
        await self._process.stdin.drain()

    async def _expect(self, answer: str) -> str:
        assert self._process.stdout is not None
        line = (await self._process.stdout.readline()).decode().strip()
        if not line.startswith(answer):
            raise BenchError(f"the probe said {line!r}, not {answer!r}")
        return line

    async def phase(self, name: str) -> None:
        await self._tell(f"phase {name}")

    async def start(self) -> None:
        await self._tell("run")

    async def stop(self) -> None:
        """After the call in flight."""
        await self._tell("pause")
        await self._expect("paused")

    async def close(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ConnectionError, BenchError):
                await self._tell("report")
                self.latencies = json.loads(await self._expect("{"))
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()
        await self._process.wait()


# ------------------------------------------------------------------ opens


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


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def _p(values: list[float], share: float) -> float:
    return percentile(values, share) if values else float("nan")


#: What the opens section adds to README's "Measured" table (bench/results.py), from a
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
        f"opens: p50 {_ms(_p(before, 0.5))} p99 {_ms(_p(before, 0.99))} ({len(before)})"
    )
    for phase, what in (("burst", "during the opens"), ("after", "once quiet again")):
        found = result.probe.get(phase, [])
        print(
            f"    {what}: p50 {_ms(_p(found, 0.5))} p99 {_ms(_p(found, 0.99))} ({len(found)}) "
            f"= {_p(found, 0.99) / _p(before, 0.99):.2f}x at p99 "
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
            "p50_before_ms": _p(before, 0.5) * 1000,
            "p50_during_ms": _p(during, 0.5) * 1000,
            "p99_before_ms": _p(before, 0.99) * 1000,
            "p99_during_ms": _p(during, 0.99) * 1000,
            "p99_ratio": _p(during, 0.99) / _p(before, 0.99),
            "open_rate": result.rate,
        }
        record("scale-opens", command, figures, [row.filled(pace=pace) for row in OPENS_ROWS])


# ------------------------------------------------------------------ calls


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


async def _block(clients: list[RawHttpClient], seconds: float, into: Calls) -> int:
    deadline = time.perf_counter() + seconds
    done = 0

    async def caller(client: RawHttpClient) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            into.latencies.append(await call(client))
            done += 1

    await asyncio.gather(*(caller(client) for client in clients))
    into.calls += done
    return done


async def measure_calls(trays: dict[str, Tray], count: int, seconds: float) -> dict[str, Calls]:
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
                await call(client)

        for sessions in clients.values():
            await asyncio.gather(*(warm(client) for client in sessions))
        order = list(trays)
        for block in range(max(1, round(seconds / BLOCK_SECONDS))):
            rotated = order[block % len(order) :] + order[: block % len(order)]
            for loop in rotated:
                into = found[loop]
                tray_before = cpu_seconds(processes[loop])
                child_before, me_before = cpu_seconds(children[loop]), cpu_seconds(me)
                began = time.perf_counter()
                done = await _block(clients[loop], BLOCK_SECONDS, into)
                into.seconds += time.perf_counter() - began
                tray_cpu = cpu_seconds(processes[loop]) - tray_before
                into.tray_cpu += tray_cpu
                into.blocks.append(tray_cpu / max(done, 1))
                into.child_cpu += cpu_seconds(children[loop]) - child_before
                into.bench_cpu += cpu_seconds(me) - me_before
    finally:
        for sessions in clients.values():
            for client in sessions:
                with contextlib.suppress(Exception):
                    await client.end()
                await client.aclose()
    return found


#: What the calls section adds to README's "Measured" table, from this checkout's first
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


def report_calls(results: dict[int, dict[str, Calls]], command: str) -> None:
    print(f"\ncalls: echo back to back, lean client  (reproduce: {command})")
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
                f"{_p(r.latencies, 0.5) * 1000:>6.3f}  {_p(r.latencies, 0.99) * 1000:>7.3f}"
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
                f"{_p(before.latencies, 0.5) * 1000:.3f} -> {_p(after.latencies, 0.5) * 1000:.3f} ms"
            )


def _saving(before: Calls, after: Calls) -> tuple[float, float]:
    """How much less tray CPU per call ``after`` spent: overall, and the median of its
    interleaved blocks' ratios (blocks paired in the order they ran)."""
    overall = 1 - (after.tray_cpu / after.calls) / (before.tray_cpu / before.calls)
    paired = statistics.median(
        1 - a / b for a, b in zip(after.blocks, before.blocks, strict=False) if b
    )
    return overall, paired


# ------------------------------------------------------------------- main


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
                count: await measure_calls(trays, count, args.seconds) for count in args.sessions
            }
        command = _command(
            "--only calls",
            f"--sessions {','.join(map(str, args.sessions))}",
            f"--seconds {args.seconds:g}",
            f"--loops {','.join(loops)}",
            f"--child {args.child}",
            f"--journal {','.join(args.journal)}",
            *([f"--baseline {args.baseline}"] if args.baseline else []),
            *([f"--tray-profile {args.tray_profile}"] if args.tray_profile else []),
        )
        report_calls(results, command)
        if not args.no_record and args.tray_profile is None:
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
    parser.add_argument("--only", choices=("opens", "calls"), default=None)
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not keep this run's figures in bench/results/ (README's table)",
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
        _sigterm_as_interrupt(),
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


if __name__ == "__main__":
    sys.exit(main())
