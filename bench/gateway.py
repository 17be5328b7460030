"""Gateway latency: one echo ``tools/call`` direct vs through ``/mcp/<server>`` vs the bridge.

Everything is a real process. A headless tray (``mcp-tray run --headless``)
runs from a private MCP_TRAY_HOME with one server, ``echo``
(tests/servers/echo.py). The bench process holds three SDK client sessions
open at once and calls the trivial ``echo`` tool on each:

* direct:  ``stdio_client`` -> its own echo.py child (no tray at all);
* gateway: ``streamable_http_client`` (httpx2) -> the tray's ``/mcp/echo``
  -> the tray's echo.py child;
* bridge:  ``stdio_client`` -> ``mcp-tray connect echo`` (which relays each
  line over HTTP to ``/mcp/echo``) -> the tray's echo.py child.

After WARMUP calls per client, CALLS sequential calls per client are timed
with ``time.perf_counter`` around ``session.call_tool`` (the result is
checked after the clock stops). The calls are interleaved: blocks of BLOCK
calls per client, the starting client rotating every round, so the noise of
a small shared machine hits all three alike.

"Added" is the client's percentile minus the direct percentile. Around every
gateway and bridge block the tray's own ``/metrics`` histogram
(``mcp_tray_call_seconds``, fed by ``ManagedServer.request``) is read, so the
report also splits the mean into "inside the tray's call path" (call path,
SDK dispatcher, pipes, echo child) and "outside it" (client transport, HTTP,
streamable server, gateway, and for the bridge the relay process). The
CPU time (user + system) of every process in a call's chain is also taken
around each block (psutil): the chain is serial, so on a small busy machine
the mean wall time is close to the sum, and the split shows which process
the added time is spent in. The tray runs with the "fail" keyring backend,
so its token stays in the private home and the user's OS keyring is never
touched.

Target (issue): < 1 ms p50 added over direct, for the gateway and the
bridge. Figures are reported, not asserted: the exit code is 0 unless the
bench itself breaks. Run: .venv/bin/python bench/gateway.py --calls 2000
(``--tray-profile FILE`` runs the tray under cProfile and writes its stats).
"""

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
import psutil
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

ROOT: Final = Path(__file__).resolve().parents[1]
ECHO_SCRIPT: Final = ROOT / "tests" / "servers" / "echo.py"
SERVER: Final = "echo"
TOOL: Final = "echo"
ARGUMENTS: Final = {"text": "hi"}
DEFAULT_CALLS: Final = 2000
DEFAULT_WARMUP: Final = 50
DEFAULT_BLOCK: Final = 100
TARGET_ADDED_P50_MS: Final = 1.0
#: Bound on the tray's start-up (spawn, echo handshake, tools listed).
READY_SECONDS: Final = 60.0
#: How long the tray gets to stop its children and exit after SIGTERM.
STOP_SECONDS: Final = 20.0
CLIENTS: Final = ("direct", "gateway", "bridge")
#: The tray's call-path histogram for this server's tools/call.
_METRIC_RE: Final = re.compile(
    r'^mcp_tray_call_seconds_(sum|count)\{(?=[^}]*method="tools/call")(?=[^}]*server="echo")[^}]*\}'
    r"\s+(\S+)$",
    re.MULTILINE,
)


class BenchError(Exception):
    pass


# ------------------------------------------------------------------ the tray


class Tray:
    """A headless tray in a subprocess, from a private home; always stopped by ``stop``."""

    def __init__(self, home: Path, profile: Path | None) -> None:
        self.home = home
        self.config = home / "bench-config.json"
        self.log = home / "tray-output.log"
        self.profile = profile
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.url = ""
        self.token = ""
        #: pid of the tray's own echo.py child, from ``status --json``.
        self.server_pid: int | None = None

    @property
    def env(self) -> dict[str, str]:
        # Nothing of a real tray leaks in (MCP_TRAY_*), and the token lives in
        # the private home's file, never in the user's OS keyring.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
        env["MCP_TRAY_HOME"] = str(self.home)
        env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
        env["PYTHONPATH"] = str(ROOT)
        return env

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "core.cli", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def start(self) -> None:
        config = {"mcpServers": {SERVER: {"command": sys.executable, "args": [str(ECHO_SCRIPT)]}}}
        self.config.write_text(json.dumps(config, indent=2))
        runner = ["-m", "core.cli"]
        if self.profile is not None:
            runner = ["-m", "cProfile", "-o", str(self.profile), *runner]
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, *runner, "run", "--headless", "--config", str(self.config)],
            env=self.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            # Its own process group: a last-resort kill reaches only what it started.
            start_new_session=True,
        )

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        last = "no status yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the tray exited with {self.process.returncode} during start-up:\n{self.output()}"
                )
            status = self.cli("status", "--json")
            if status.returncode == 0:
                body = json.loads(status.stdout)
                servers = {s.get("name"): s for s in body.get("servers", [])}
                last = f"servers { {name: s.get('state') for name, s in servers.items()} }"
                if servers.get(SERVER, {}).get("state") == "ready":
                    self.url = str(body["gateway"]["url"]).rstrip("/")
                    self.server_pid = servers[SERVER].get("pid")
                    break
            else:
                last = (status.stderr or status.stdout).strip()
            time.sleep(0.2)
        else:
            raise BenchError(
                f"{SERVER} not ready within {READY_SECONDS:g} s ({last}):\n{self.output()}"
            )
        token = self.cli("token")
        if token.returncode != 0 or not token.stdout.strip():
            raise BenchError(f"mcp-tray token failed: {token.stderr.strip()}")
        self.token = token.stdout.strip()

    def output(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no tray output)"

    def stop(self) -> int | None:
        """SIGTERM and wait (the tray stops its children); SIGKILL its group as a last resort."""
        process = self.process
        if process is None:
            return None
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    print(
                        f"bench: the tray did not stop within {STOP_SECONDS:g} s; killing its group",
                        file=sys.stderr,
                    )
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(5)
            return process.returncode
        finally:
            if self._log_file is not None:
                self._log_file.close()


# ------------------------------------------------------------- the clients


@dataclass
class Client:
    name: str
    session: ClientSession
    #: The processes one call of this client runs through, by role.
    processes: dict[str, psutil.Process]
    #: Seconds per timed call.
    samples: list[float] = field(default_factory=list)
    #: Seconds spent inside the tray's call path during this client's timed blocks.
    tray_seconds: float = 0.0
    tray_calls: int = 0
    #: CPU seconds (user + system) per role during this client's timed blocks.
    cpu: dict[str, float] = field(default_factory=dict)


def _cpu_seconds(processes: dict[str, psutil.Process]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for role, process in processes.items():
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            seconds[role] = times.user + times.system
    return seconds


def _check(result: object) -> None:
    if not isinstance(result, CallToolResult) or result.is_error:
        raise BenchError(f"echo call failed: {result!r}")
    content = result.content[0] if result.content else None
    if not isinstance(content, TextContent) or content.text != ARGUMENTS["text"]:
        raise BenchError(f"echo answered {result!r}")


async def _timed_block(client: Client, calls: int) -> None:
    session, samples = client.session, client.samples
    for _ in range(calls):
        started = time.perf_counter()
        result = await session.call_tool(TOOL, ARGUMENTS)
        samples.append(time.perf_counter() - started)
        _check(result)


async def _warm(client: Client, calls: int) -> None:
    for _ in range(calls):
        _check(await client.session.call_tool(TOOL, ARGUMENTS))


async def _tray_call_path(http: httpx2.AsyncClient, url: str) -> tuple[float, int]:
    """(sum seconds, count) of the tray's tools/call histogram for the echo server."""
    reply = await http.get(f"{url}/metrics")
    reply.raise_for_status()
    found = {kind: float(value) for kind, value in _METRIC_RE.findall(reply.text)}
    return found.get("sum", 0.0), int(found.get("count", 0.0))


async def _session(
    stack: contextlib.AsyncExitStack,
    streams: contextlib.AbstractAsyncContextManager[tuple[Any, Any]],
) -> tuple[ClientSession, psutil.Process | None]:
    """An initialized session, and the child process its transport spawned (if any)."""
    before = {child.pid for child in psutil.Process().children()}
    read, write = await stack.enter_async_context(streams)
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    spawned = [child for child in psutil.Process().children() if child.pid not in before]
    return session, spawned[0] if len(spawned) == 1 else None


def _roles(processes: dict[str, psutil.Process | None]) -> dict[str, psutil.Process]:
    return {role: process for role, process in processes.items() if process is not None}


async def measure(tray: Tray, calls: int, warmup: int, block: int) -> dict[str, Client]:
    logs = tray.home / "client-stderr.log"
    async with contextlib.AsyncExitStack() as stack:
        errlog = stack.enter_context(logs.open("w"))
        headers = {"Authorization": f"Bearer {tray.token}"}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60))
        )
        # A separate connection for /metrics, so scrapes never share the gateway's.
        scrape = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30))
        )
        direct, direct_echo = await _session(
            stack,
            stdio_client(
                StdioServerParameters(command=sys.executable, args=[str(ECHO_SCRIPT)]),
                errlog=errlog,
            ),
        )
        gateway, _ = await _session(
            stack, streamable_http_client(f"{tray.url}/mcp/{SERVER}", http_client=http)
        )
        bridge_env = {**tray.env, "MCP_TRAY_CLIENT": "bench"}
        bridge, bridge_process = await _session(
            stack,
            stdio_client(
                StdioServerParameters(
                    command=sys.executable,
                    args=["-m", "core.cli", "connect", SERVER],
                    env=bridge_env,
                    cwd=ROOT,
                ),
                errlog=errlog,
            ),
        )
        me = psutil.Process()
        assert tray.process is not None
        tray_process = psutil.Process(tray.process.pid)
        tray_echo = psutil.Process(tray.server_pid) if tray.server_pid else None
        # The processes one call runs through; "client" is this bench process (the SDK client).
        clients = {
            "direct": Client("direct", direct, _roles({"client": me, "echo.py": direct_echo})),
            "gateway": Client(
                "gateway",
                gateway,
                _roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
            ),
            "bridge": Client(
                "bridge",
                bridge,
                _roles(
                    {
                        "client": me,
                        "bridge": bridge_process,
                        "tray": tray_process,
                        "echo.py": tray_echo,
                    }
                ),
            ),
        }
        for client in clients.values():
            await _warm(client, warmup)
        await _tray_call_path(scrape, tray.url)

        order = list(clients.values())
        done = 0
        round_no = 0
        while done < calls:
            size = min(block, calls - done)
            shift = round_no % len(order)
            for client in order[shift:] + order[:shift]:
                through_tray = client.name != "direct"
                if through_tray:
                    before = await _tray_call_path(scrape, tray.url)
                cpu_before = _cpu_seconds(client.processes)
                await _timed_block(client, size)
                cpu_after = _cpu_seconds(client.processes)
                for role, seconds in cpu_after.items():
                    if role in cpu_before:
                        client.cpu[role] = client.cpu.get(role, 0.0) + seconds - cpu_before[role]
                if through_tray:
                    after = await _tray_call_path(scrape, tray.url)
                    client.tray_seconds += after[0] - before[0]
                    client.tray_calls += after[1] - before[1]
            done += size
            round_no += 1
        return clients


# ------------------------------------------------------------------ report


@dataclass(frozen=True)
class Stats:
    p50: float
    p95: float
    p99: float
    mean: float

    @classmethod
    def of(cls, seconds: list[float]) -> "Stats":
        ms = [s * 1000.0 for s in seconds]
        if len(ms) == 1:
            return cls(ms[0], ms[0], ms[0], ms[0])
        cuts = statistics.quantiles(ms, n=100, method="inclusive")
        return cls(cuts[49], cuts[94], cuts[98], statistics.fmean(ms))


def report(clients: dict[str, Client], args: argparse.Namespace, seconds: float) -> None:
    stats = {name: Stats.of(client.samples) for name, client in clients.items()}
    base = stats["direct"]
    print("mcp-tray gateway latency: tools/call of a trivial echo tool (tests/servers/echo.py)")
    print(
        f"  {args.calls} timed calls per client after {args.warmup} warm-up calls each; "
        f"interleaved in blocks of {args.block} calls per client, the first client rotating "
        "every round (direct, gateway, bridge, then gateway, bridge, direct, ...)"
    )
    print(
        f"  python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPU(s), {platform.system()} {platform.release()} {platform.machine()}"
    )
    print(f"  run took {seconds:.1f} s")
    print()
    print(
        f"  {'client':<8} {'calls':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'mean ms':>8}"
        f"   {'+p50 ms':>8} {'+p95 ms':>8}"
    )
    for name in CLIENTS:
        s = stats[name]
        added = (
            f"   {s.p50 - base.p50:>+8.3f} {s.p95 - base.p95:>+8.3f}" if name != "direct" else ""
        )
        print(
            f"  {name:<8} {len(clients[name].samples):>6} {s.p50:>8.3f} {s.p95:>8.3f} "
            f"{s.p99:>8.3f} {s.mean:>8.3f}{added}"
        )
    print()
    print(
        "  CPU per call, ms (user+sys of each process in the chain, from the OS; the chain is "
        "serial, so on a busy small machine the mean wall time is close to the sum):"
    )
    for name in CLIENTS:
        client = clients[name]
        count = len(client.samples)
        parts = "  ".join(
            f"{role} {seconds / count * 1000:.3f}" for role, seconds in client.cpu.items()
        )
        total = sum(client.cpu.values()) / count * 1000
        print(f"    {name:<8} {parts}  | sum {total:.3f} (mean wall {stats[name].mean:.3f})")
    print()
    print("  where the mean goes (tray /metrics: time inside ManagedServer.request per call):")
    for name in ("gateway", "bridge"):
        client = clients[name]
        if client.tray_calls != len(client.samples) or not client.tray_calls:
            print(
                f"    {name:<8} n/a (the tray counted {client.tray_calls} calls, "
                f"the bench made {len(client.samples)})"
            )
            continue
        inside = client.tray_seconds / client.tray_calls * 1000.0
        outside = stats[name].mean - inside
        print(
            f"    {name:<8} call path {inside:.3f} ms (direct round trip {base.mean:.3f} ms), "
            f"everything else {outside:.3f} ms"
        )
    print()
    print(f"  target: added p50 < {TARGET_ADDED_P50_MS:g} ms over direct")
    for name in ("gateway", "bridge"):
        added_p50 = stats[name].p50 - base.p50
        verdict = "PASS" if added_p50 < TARGET_ADDED_P50_MS else "MISS"
        print(f"    {verdict}  {name} added p50 {added_p50:+.3f} ms")
    print()
    extra = "".join(
        f" --{flag} {value}"
        for flag, value, default in (
            ("warmup", args.warmup, DEFAULT_WARMUP),
            ("block", args.block, DEFAULT_BLOCK),
        )
        if value != default
    )
    print(f"  reproduce: .venv/bin/python bench/gateway.py --calls {args.calls}{extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=DEFAULT_CALLS, help="timed calls per client")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="warm-up calls each")
    parser.add_argument(
        "--block", type=int, default=DEFAULT_BLOCK, help="calls per client per interleaved block"
    )
    parser.add_argument(
        "--tray-profile",
        type=Path,
        default=None,
        help="run the tray under cProfile and write its stats to this file (wall-clock "
        "timer: time the tray is descheduled after waking a peer shows up in write/send)",
    )
    args = parser.parse_args(argv)
    if args.calls < 1 or args.block < 1 or args.warmup < 0:
        parser.error("--calls and --block must be >= 1, --warmup >= 0")
    profile = args.tray_profile.resolve() if args.tray_profile else None

    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as home:
        tray = Tray(Path(home), profile)
        started = time.perf_counter()
        try:
            tray.start()
            tray.wait_ready()
            clients = asyncio.run(measure(tray, args.calls, args.warmup, args.block))
        except Exception as exc:
            if not isinstance(exc, BenchError):
                traceback.print_exc()
            print(f"bench: FAILED: {exc}", file=sys.stderr)
            tray.stop()
            print(f"bench: tray output (tail):\n{tray.output()}", file=sys.stderr)
            return 1
        finally:
            # Idempotent: on success this is the one stop; on error it was stopped above.
            code = tray.stop()
        elapsed = time.perf_counter() - started
    report(clients, args, elapsed)
    if code not in (0, None):
        print(f"  note: the tray exited with {code} on SIGTERM (expected 0)")
    if profile is not None:
        print(f"  tray profile: {profile} (python -m pstats {profile})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
