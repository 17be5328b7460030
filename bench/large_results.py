"""Large tool results: wall time and the tray's memory, 1 KiB to 50 MiB, direct vs through mcp-tray.

Everything is a real process. A headless tray (``mcp-tray run --headless``)
runs from a private MCP_TRAY_HOME with one server, ``echo``
(tests/servers/echo.py), whose ``blob`` tool answers ``size`` characters of
text with quotes and newlines in it (so JSON escapes some of it, about 12 %
more bytes on the wire), once (no structured copy). Each path calls it in
turn, one call at a time, with hand-written clients (no SDK, so the figures
are the paths', not a client library's):

* direct:  one JSON-RPC line to its own echo.py child over stdio, the
  answer line read back (no tray at all);
* gateway: HTTP/1.1 (httpx) to the tray's ``/mcp/echo`` in a 2025-11-25
  session (initialize first);
* modern:  the same endpoint, statelessly: MCP 2026-07-28, the ``_meta``
  envelope and headers on the request, no session;
* bridge:  JSON-RPC lines to ``mcp-tray connect echo`` (which POSTs them to
  the gateway) over stdio;
* gateway-sse, bridge-sse: as gateway and bridge, but the call carries a
  progress token and ``blob`` reports progress once before it answers, so
  the tray's reply is an SSE stream and the result one (large) event.

A call's wall time runs from the request's first byte to the answer parsed
(``json.loads``) by the client; the text's length is checked after the
clock stops. The tray's memory is its resident set (RSS, psutil): its peak
during a call is the kernel's high-water mark (``VmHWM``), reset before each
call by writing 5 to ``/proc/PID/clear_refs`` (Linux); where that is not
possible it is sampled every millisecond. "Resting" is the RSS once it has
stopped moving after a call (three equal readings 100 ms apart, at most
3 s). The report prints, per size and path, the median wall time and the
worst peak, the peak's rise over the resting RSS before the call (the
target: at most 3x the result), and the resting RSS after; then the drift
of the resting RSS from before the first call to after the last (the
target: within 20 MiB; the default sizes go up to 50 MiB and down again, so
the end says whether what the large ones took came back), and the highest
peak over the resting RSS before the first call.

Usage:
    python bench/large_results.py [--sizes 1K,64K,1M,10M,50M,10M,1M] [--repeat 3]
        [--paths direct,gateway,modern,bridge,gateway-sse,bridge-sse]
"""

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

# Run as a script from a checkout: the checkout first on sys.path, for `bench` and `core`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psutil

from bench.harness.files import ECHO_SCRIPT as ECHO
from bench.harness.files import ROOT
from bench.harness.records import Row as TableRow
from bench.harness.records import record
from bench.harness.tray import spawn_tray, tray_env
from core.base.envvars import CLIENT_SESSION_ENV
from core.protocol.eras import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    METHOD_HEADER,
    NAME_HEADER,
    PROTOCOL_VERSION_META_KEY,
)
from core.protocol.headers import PROTOCOL_HEADER, SESSION_HEADER
from core.settings.paths import default_paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token

SERVER: Final = "echo"
PATHS: Final = ("direct", "gateway", "modern", "bridge", "gateway-sse", "bridge-sse")
DEFAULT_SIZES: Final = "1K,64K,1M,10M,50M,10M,1M"
DEFAULT_REPEAT: Final = 3
MIB: Final = 1024 * 1024
UNITS: Final = {"K": 1024, "M": MIB}
#: The answer line of a 50 MiB result is ~56 MiB; stdio readers need room for it.
LINE_LIMIT: Final = 256 * MIB
READY_SECONDS: Final = 60.0
CALL_SECONDS: Final = 300.0
SETTLE_POLL_SECONDS: Final = 0.1
SETTLE_MAX_SECONDS: Final = 3.0
SAMPLE_SECONDS: Final = 0.001
HANDSHAKE_VERSION: Final = "2025-11-25"
MODERN_VERSION: Final = "2026-07-28"
CLIENT_INFO: Final = {"name": "large-results-bench", "version": "1"}
ACCEPT: Final = "application/json, text/event-stream"


class BenchError(Exception):
    pass


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = UNITS.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in UNITS else text
    return int(float(number) * unit)


def human(size: float) -> str:
    for unit, factor in (("MiB", MIB), ("KiB", 1024)):
        if abs(size) >= factor:
            return f"{size / factor:.1f} {unit}".replace(".0 ", " ")
    return f"{size:.0f} B"


def call_message(
    request_id: int, size: int, meta: dict[str, Any] | None = None, *, progress: bool = False
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "blob", "arguments": {"size": size}}
    meta = dict(meta or {})
    if progress:
        params["arguments"]["progress"] = True
        meta["progressToken"] = f"p{request_id}"
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def initialize_message() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": CLIENT_INFO,
        },
    }


INITIALIZED: Final = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def text_length(answer: Any, request_id: int) -> int:
    """The length of the tool result's text (BenchError when the answer is not that)."""
    if not isinstance(answer, dict) or answer.get("id") != request_id or "result" not in answer:
        raise BenchError(f"not the answer to request {request_id}: {str(answer)[:300]}")
    return sum(len(block.get("text", "")) for block in answer["result"].get("content", []))


# ------------------------------------------------------------------ clients


class LineClient:
    """A stdio MCP server driven by hand: one JSON line out, lines back until the answer."""

    def __init__(self, process: asyncio.subprocess.Process, progress: bool) -> None:
        self.process = process
        self.progress = progress
        self._ids = 0

    @classmethod
    async def start(
        cls, argv: list[str], env: dict[str, str], log: Any, *, progress: bool = False
    ) -> "LineClient":
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=ROOT,
            limit=LINE_LIMIT,
        )
        client = cls(process, progress)
        await client.send(initialize_message())
        await client.answer(0)
        await client.send(INITIALIZED)
        return client

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def answer(self, request_id: int, *, streamed: bool = False) -> Any:
        assert self.process.stdout is not None
        progressed = False
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise BenchError("the stdio peer closed its stdout")
            message = json.loads(line)
            progressed |= message.get("method") == "notifications/progress"
            if isinstance(message, dict) and message.get("id") == request_id:
                if streamed and not progressed:
                    raise BenchError("no progress came before the answer: not an event stream")
                return message

    async def call(self, size: int) -> Any:
        self._ids += 1
        await self.send(call_message(self._ids, size, progress=self.progress))
        return self._ids, await self.answer(self._ids, streamed=self.progress)

    async def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()


class HttpClient:
    """The tray's ``/mcp/echo`` over HTTP/1.1: a 2025-11-25 session, or 2026-07-28 without one."""

    def __init__(self, url: str, token: str, *, modern: bool, progress: bool = False) -> None:
        self.url = url
        self.modern = modern
        self.progress = progress
        self.http = httpx.AsyncClient(
            headers={"authorization": f"Bearer {token}", "accept": ACCEPT},
            timeout=httpx.Timeout(CALL_SECONDS),
        )
        self.headers: dict[str, str] = {}
        self._ids = 0

    async def open(self) -> "HttpClient":
        if self.modern:
            self.headers = {
                PROTOCOL_HEADER: MODERN_VERSION,
                METHOD_HEADER: "tools/call",
                NAME_HEADER: "blob",
            }
            return self
        reply = await self.http.post(self.url, json=initialize_message())
        reply.raise_for_status()
        self.headers = {
            SESSION_HEADER: reply.headers[SESSION_HEADER],
            PROTOCOL_HEADER: HANDSHAKE_VERSION,
        }
        await self.http.post(self.url, json=INITIALIZED, headers=self.headers)
        return self

    async def call(self, size: int) -> Any:
        self._ids += 1
        meta = None
        if self.modern:
            meta = {
                PROTOCOL_VERSION_META_KEY: MODERN_VERSION,
                CLIENT_CAPABILITIES_META_KEY: {},
                CLIENT_INFO_META_KEY: CLIENT_INFO,
            }
        reply = await self.http.post(
            self.url,
            json=call_message(self._ids, size, meta, progress=self.progress),
            headers=self.headers,
        )
        body = reply.content
        streamed = reply.headers.get("content-type", "").startswith("text/event-stream")
        if self.progress and not streamed:
            raise BenchError("a call with progress was not answered with an event stream")
        if streamed:
            data = [line[5:] for line in body.splitlines() if line.startswith(b"data:")]
            events = [json.loads(d) for d in data if d.strip()]  # not the priming event
            return self._ids, next((e for e in events if e.get("id") == self._ids), None)
        return self._ids, json.loads(body)

    async def close(self) -> None:
        await self.http.aclose()


Client = LineClient | HttpClient


# ------------------------------------------------------------ the tray's RSS


class Memory:
    """The tray's resident set: now, at rest, and its peak since ``reset``."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self._clear_refs = Path(f"/proc/{pid}/clear_refs")
        self._status = Path(f"/proc/{pid}/status")
        self.method = "VmHWM" if self._can_reset_hwm() else "sampled every 1 ms"
        self._sampled = 0
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def _can_reset_hwm(self) -> bool:
        try:
            self._clear_refs.write_text("5")
        except OSError:
            return False
        return self._hwm() is not None

    def _hwm(self) -> int | None:
        with contextlib.suppress(OSError):
            for line in self._status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return None

    def rss(self) -> int:
        return int(self.process.memory_info().rss)

    async def resting(self) -> int:
        """The RSS once three readings 100 ms apart agree (or after SETTLE_MAX_SECONDS)."""
        readings = [self.rss()]
        deadline = time.monotonic() + SETTLE_MAX_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(SETTLE_POLL_SECONDS)
            readings.append(self.rss())
            if len(readings) >= 3 and len(set(readings[-3:])) == 1:
                break
        return readings[-1]

    def reset(self) -> None:
        if self.method == "VmHWM":
            self._clear_refs.write_text("5")
            return
        self._sampled = self.rss()
        self._stop.clear()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self._sampled = max(self._sampled, self.rss())
            time.sleep(SAMPLE_SECONDS)

    def peak(self) -> int:
        if self.method == "VmHWM":
            return self._hwm() or 0
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        return max(self._sampled, self.rss())


# ---------------------------------------------------------------- the bench


#: What this bench adds to docs/measured.md's table (bench/results.py).
TABLE_ROWS: Final = (
    TableRow(
        "a 50 MiB tool result",
        "peak ≤ resting + 3× the result; resting RSS back within 20 MiB",
        "peak +{peak_rise_mib:.1f} MiB over resting (at most {worst_rise_ratio:.1f}× a result); "
        "resting {resting_before_mib:.1f} MiB before the first call, {resting_after_mib:.1f} MiB "
        "after the last; {largest_mib:.0f} MiB through the gateway in {gateway_seconds:.1f} s vs "
        "{direct_seconds:.1f} s direct",
    ),
)


@dataclass
class Row:
    size: int
    path: str
    walls: list[float] = field(default_factory=list)
    peaks: list[int] = field(default_factory=list)
    rises: list[int] = field(default_factory=list)
    resting_after: int | None = None
    #: Why a call failed (the path is not called again after that).
    failure: str | None = None


async def _wait_ready(home: Path, tray: asyncio.subprocess.Process) -> tuple[str, str]:
    """The tray's URL and token once ``echo`` is ready."""
    paths = default_paths({"MCP_TRAY_HOME": str(home)})
    deadline = time.monotonic() + READY_SECONDS
    last = "not started"
    async with httpx.AsyncClient(timeout=5) as http:
        while time.monotonic() < deadline:
            if tray.returncode is not None:
                raise BenchError(f"the tray exited with {tray.returncode} during start-up")
            with contextlib.suppress(Exception):
                url = running_instance(paths).url
                token = read_token(paths.token_file)
                status = await http.get(
                    f"{url}/api/v1/status", headers={"authorization": f"Bearer {token}"}
                )
                servers = {s["name"]: s for s in status.json()["servers"]}
                last = str(servers.get(SERVER, {}).get("state"))
                if last == "ready" and token:
                    return url, token
            await asyncio.sleep(0.2)
    raise BenchError(f"{SERVER} not ready within {READY_SECONDS:g} s (last state: {last})")


async def _clients(
    names: list[str], url: str, token: str, home: Path, log: Any
) -> dict[str, Client]:
    clients: dict[str, Client] = {}
    for name in names:
        if name == "direct":
            clients[name] = await LineClient.start(
                [sys.executable, str(ECHO)], dict(os.environ), log
            )
        elif name.startswith("bridge"):
            argv = [sys.executable, "-m", "core.cli.main", "connect", SERVER]
            progress = name.endswith("-sse")
            # A client session of its own: a second bridge of one session takes
            # over the first one's worker row, and the first one exits.
            env = {**tray_env(home), CLIENT_SESSION_ENV: f"large-results-{name}"}
            clients[name] = await LineClient.start(argv, env, log, progress=progress)
        else:
            http = HttpClient(
                f"{url}/mcp/{SERVER}",
                token,
                modern=name == "modern",
                progress=name.endswith("-sse"),
            )
            clients[name] = await http.open()
    return clients


async def _timed(client: Client, size: int) -> float:
    started = time.perf_counter()
    request_id, answer = await asyncio.wait_for(client.call(size), CALL_SECONDS)
    wall = time.perf_counter() - started
    got = text_length(answer, request_id)
    if got != size:
        raise BenchError(f"a {size}-character result arrived with {got} characters")
    return wall


async def measure(
    sizes: list[int], names: list[str], repeat: int, home: Path, log: Any
) -> tuple[list[Row], dict[str, Any]]:
    config = home / "bench-config.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {SERVER: {"command": sys.executable, "args": [str(ECHO)]}},
                "gateway": {"port": 0},
            }
        )
    )
    tray = await spawn_tray(config, home, log)
    clients: dict[str, Client] = {}
    try:
        url, token = await _wait_ready(home, tray)
        memory = Memory(tray.pid)
        clients = await _clients(names, url, token, home, log)
        for client in clients.values():
            await _timed(client, 1024)  # warm: every path has served once
        start_resting = await memory.resting()
        rows: list[Row] = []
        failed: set[str] = set()
        for size in sizes:
            for name, client in clients.items():
                if name in failed:
                    continue
                row = Row(size, name)
                rows.append(row)
                try:
                    for _ in range(repeat):
                        before = await memory.resting()
                        memory.reset()
                        row.walls.append(await _timed(client, size))
                        peak = memory.peak()
                        row.peaks.append(peak)
                        row.rises.append(peak - before)
                except Exception as exc:  # reported in its row; the other paths go on
                    memory.peak()
                    row.failure = f"{type(exc).__name__}: {exc}"[:120]
                    failed.add(name)
                row.resting_after = await memory.resting()
        end_resting = await memory.resting()
        facts = {
            "start": start_resting,
            "end": end_resting,
            "method": memory.method,
            "tray_pid": tray.pid,
        }
        return rows, facts
    finally:
        for client in clients.values():
            with contextlib.suppress(Exception):
                await client.close()
        if tray.returncode is None:
            tray.terminate()
            try:
                await asyncio.wait_for(tray.wait(), 30)
            except TimeoutError:
                tray.kill()
                await tray.wait()


def report(rows: list[Row], facts: dict[str, Any], argv: list[str], elapsed: float) -> None:
    print("Large tool results: direct vs through mcp-tray (one call at a time)")
    print(f"  tray peak RSS: {facts['method']}; resting: RSS once it stops moving")
    header = (
        f"  {'size':>9} {'path':<11} {'wall p50':>9} {'wall max':>9} "
        f"{'tray peak':>10} {'rise':>9} {'rise/size':>9} {'rest after':>10}"
    )
    print(header)
    worst_ratio = 0.0
    highest = max((peak for row in rows for peak in row.peaks), default=0)
    for row in rows:
        if row.failure is not None:
            print(f"  {human(row.size):>9} {row.path:<11} FAILED ({row.failure})")
            continue
        wall = f"{statistics.median(row.walls):8.3f}s {max(row.walls):8.3f}s"
        if row.path == "direct":
            memory = f"{'-':>10} {'-':>9} {'-':>9} {'-':>10}"
        else:
            ratio = max(row.rises) / row.size
            if row.size >= MIB:
                worst_ratio = max(worst_ratio, ratio)
            memory = (
                f"{human(max(row.peaks)):>10} {human(max(row.rises)):>9} {ratio:>9.1f} "
                f"{human(row.resting_after or 0):>10}"
            )
        print(f"  {human(row.size):>9} {row.path:<11} {wall} {memory}")
    drift = facts["end"] - facts["start"]
    print(
        f"  tray resting RSS: {human(facts['start'])} before the first call, "
        f"{human(facts['end'])} after the last ({'+' if drift >= 0 else ''}{human(drift)})"
    )
    if highest:
        print(
            f"  tray peak RSS: {human(highest)}, {human(highest - facts['start'])} over the "
            "resting RSS before the first call"
        )
    if worst_ratio:
        print(
            f"  peak within resting + 3x the result (results >= 1 MiB): "
            f"{'YES' if worst_ratio <= 3 else 'NO'} (worst rise {worst_ratio:.1f}x the result)"
        )
    print(f"  resting RSS back within 20 MiB after: {'YES' if drift <= 20 * MIB else 'NO'}")
    print(f"  {len(rows)} rows in {elapsed:.0f} s on {os.cpu_count()} CPUs")
    command = f".venv/bin/python bench/large_results.py {' '.join(argv)}".rstrip()
    print(f"  reproduce: {command}")
    largest = max((row.size for row in rows), default=0)
    walls = {
        row.path: statistics.median(row.walls)
        for row in rows
        if row.size == largest and row.walls and row.failure is None
    }
    if highest and worst_ratio and {"direct", "gateway"} <= set(walls):
        figures = {
            "largest_mib": largest / MIB,
            "peak_rise_mib": (highest - facts["start"]) / MIB,
            "worst_rise_ratio": worst_ratio,
            "resting_before_mib": facts["start"] / MIB,
            "resting_after_mib": facts["end"] / MIB,
            "gateway_seconds": walls["gateway"],
            "direct_seconds": walls["direct"],
        }
        record("large_results", command, figures, TABLE_ROWS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="result sizes (1K, 10M, ...)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="calls per size/path")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"some of {', '.join(PATHS)}")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    names = [p.strip() for p in args.paths.split(",") if p.strip()]
    if unknown := set(names) - set(PATHS):
        parser.error(f"unknown paths: {', '.join(sorted(unknown))}")
    if args.repeat < 1 or not sizes or min(sizes) < 1:
        parser.error("--repeat and every size must be >= 1")
    shown = ["--sizes", args.sizes, "--repeat", str(args.repeat), "--paths", ",".join(names)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-tray-large-") as folder:
        home = Path(folder)
        log_path = home / "bench-output.log"
        with log_path.open("wb") as log:
            try:
                rows, facts = asyncio.run(measure(sizes, names, args.repeat, home, log))
            except BenchError as exc:
                print(f"bench: FAILED: {exc}", file=sys.stderr)
                print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
                return 1
        if any(row.failure for row in rows):
            print("bench: the tray's and clients' output (tail):", file=sys.stderr)
            print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
    report(rows, facts, shown, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
