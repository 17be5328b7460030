"""Remote latency (issue 31): an echo ``tools/call`` to a loopback remote MCP server, direct
vs through mcp-tray's ``/mcp/NAME``.

The remote: tests/servers/remote_http.py (the SDK's streamable-HTTP server) on the loopback
port of tests/support/remote_server.py's ``Remote``. The tray: a
headless ``mcp-tray run`` in a process of its own (bench/harness/tray.py; real default
timing, private home, "fail" keyring), one entry ``far``: ``{"url": REMOTE_URL}``.

The same client code both ways: httpx2 over one kept-alive connection, the 2025-11-25
handshake once, then sequential ``tools/call`` POSTs (Accept: JSON and SSE, the session id
and protocol version from the handshake; the tray's bearer token on the gateway path), a
JSON or SSE answer read. After WARMUP untimed calls each, CALLS timed calls each
(``perf_counter`` from POST to body read) in ROUNDS rounds of one block per path, the first
path alternating. "Added" is gateway minus direct, of the percentiles and of the median of
the rounds' paired block medians. The tray's ``mcp_tray_call_seconds`` (server ``far``),
read around each gateway block, splits its mean into the tray's call path (the tray ->
remote leg included) and what is in front of it (HTTP server, auth, session, routing).

Target: <= 1 ms p50 added. Figures are printed, not asserted, not recorded.
Run: .venv/bin/python bench/remote_latency.py --calls 2000 --rounds 20
"""

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

# Run as a script from a checkout: the checkout first on sys.path, for `bench`, `core`, `tests`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
import psutil

from bench.harness.clients import ARGUMENTS, INITIALIZE, INITIALIZED, PROTOCOL_VERSION, TOOL
from bench.harness.errors import BenchError
from bench.harness.processes import sigterm_as_interrupt
from bench.harness.records import Row, record
from bench.harness.stats import Stats
from bench.harness.tray import Tray
from tests.support.remote_server import SERVER, Remote

ECHO: Final = SERVER.with_name("echo.py")

NAME: Final = "far"
LOCAL: Final = "echo"
TARGET_ADDED_P50_MS: Final = 1.0
SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
ACCEPT: Final = "application/json, text/event-stream"
CALL: Final = {"name": TOOL, "arguments": ARGUMENTS}
METRIC_RE: Final = re.compile(
    rf'^mcp_tray_call_seconds_(sum|count)\{{(?=[^}}]*method="tools/call")'
    rf'(?=[^}}]*server="{NAME}")[^}}]*\}}\s+(\S+)$',
    re.MULTILINE,
)
UPSTREAM_RE: Final = re.compile(
    rf'^mcp_tray_server_protocol\{{(?=[^}}]*server="{NAME}")[^}}]*version="([^"]+)"',
    re.MULTILINE,
)


def answer_of(content_type: str, body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC answer to ``request_id`` in a JSON body or an SSE stream's events."""
    if content_type.startswith("text/event-stream"):
        for line in body.decode().splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if isinstance(message, dict) and message.get("id") == request_id:
                    return message
        raise BenchError(f"no answer to {request_id} in the SSE stream {body[:300]!r}")
    answer: dict[str, Any] = json.loads(body)
    return answer


class Leg:
    """One path's client: a session over one kept-alive httpx2 connection."""

    def __init__(self, name: str, url: str, headers: dict[str, str]) -> None:
        self.name, self.url, self.next_id = name, url, 2
        self.headers = {**headers, "accept": ACCEPT, "content-type": "application/json"}
        limits = httpx2.Limits(max_connections=1)
        self.http = httpx2.AsyncClient(timeout=httpx2.Timeout(30), limits=limits)
        self.samples: list[float] = []

    async def open(self) -> None:
        reply = await self.http.post(self.url, content=json.dumps(INITIALIZE), headers=self.headers)
        answer = answer_of(reply.headers.get("content-type", ""), reply.content, 1)
        if reply.status_code != 200 or "result" not in answer:
            raise BenchError(f"{self.name} initialize: {reply.status_code} {reply.text[:300]}")
        if session := reply.headers.get(SESSION_HEADER):
            self.headers[SESSION_HEADER] = session
        self.headers[VERSION_HEADER] = answer["result"].get("protocolVersion", PROTOCOL_VERSION)
        reply = await self.http.post(
            self.url, content=json.dumps(INITIALIZED), headers=self.headers
        )
        if reply.status_code not in (200, 202):
            raise BenchError(f"{self.name} initialized: {reply.status_code} {reply.text[:300]}")

    async def call(self) -> float:
        """One echo call's seconds, from the POST sent to its body read (then checked)."""
        request_id, self.next_id = self.next_id, self.next_id + 1
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": CALL}
        )
        began = time.perf_counter()
        reply = await self.http.post(self.url, content=body, headers=self.headers)
        took = time.perf_counter() - began
        answer = answer_of(reply.headers.get("content-type", ""), reply.content, request_id)
        result = answer.get("result") or {}
        if reply.status_code != 200 or result.get("isError") or "content" not in result:
            raise BenchError(f"{self.name} call: {reply.status_code} {reply.text[:300]}")
        return took


async def tray_metrics(http: httpx2.AsyncClient, tray: Tray) -> tuple[float, int, str | None]:
    """The tray's tools/call histogram for ``far`` (sum seconds, count), and its upstream era."""
    reply = await http.get(f"{tray.url}/metrics")
    reply.raise_for_status()
    found = {kind: float(value) for kind, value in METRIC_RE.findall(reply.text)}
    era = UPSTREAM_RE.search(reply.text)
    return found.get("sum", 0.0), int(found.get("count", 0.0)), era.group(1) if era else None


async def measure(
    remote: Remote, tray: Tray, args: argparse.Namespace
) -> tuple[Leg, Leg, Leg, list[float], float, float, str | None]:
    """Both paths' samples, the rounds' paired added medians (ms), the tray's call-path
    mean (ms), the tray process's CPU time per gateway call (ms, every thread) and the era
    it speaks to the remote."""
    bearer = {"authorization": f"Bearer {tray.token}"}
    direct = Leg("direct", remote.url, {})
    gateway = Leg("gateway", f"{tray.url}/mcp/{NAME}", bearer)
    # The same call to a local stdio server: what the gateway costs where no HTTP is behind it.
    local = Leg("local", f"{tray.url}/mcp/{LOCAL}", bearer)
    scrape = httpx2.AsyncClient(headers=bearer, timeout=httpx2.Timeout(30))
    try:
        for path in (direct, gateway, local):
            await path.open()
            for _ in range(args.warmup):
                await path.call()
        inside, inside_calls = 0.0, 0
        assert tray.process is not None
        cpu = psutil.Process(tray.process.pid)
        tray_cpu = 0.0
        paired: list[float] = []
        for round_no in range(args.rounds):
            size = args.calls // args.rounds + (round_no < args.calls % args.rounds)
            medians: dict[str, float] = {}
            for path in (direct, gateway) if round_no % 2 == 0 else (gateway, direct):
                if path is gateway:
                    before = await tray_metrics(scrape, tray)
                    spent = sum(cpu.cpu_times()[:2])
                taken = [await path.call() for _ in range(size)]
                if path is gateway:
                    tray_cpu += sum(cpu.cpu_times()[:2]) - spent
                    after = await tray_metrics(scrape, tray)
                    inside += after[0] - before[0]
                    inside_calls += after[1] - before[1]
                path.samples += taken
                medians[path.name] = statistics.median(taken) * 1000.0
            paired.append(medians["gateway"] - medians["direct"])
            local.samples += [await local.call() for _ in range(max(1, size // 4))]
        era = (await tray_metrics(scrape, tray))[2]
        inside_ms = inside / max(inside_calls, 1) * 1000.0
        cpu_ms = tray_cpu / len(gateway.samples) * 1000.0
        return direct, gateway, local, paired, inside_ms, cpu_ms, era
    finally:
        for http in (direct.http, gateway.http, local.http, scrape):
            await http.aclose()


def report(
    direct: Leg,
    gateway: Leg,
    local: Leg,
    paired: list[float],
    inside_ms: float,
    cpu_ms: float,
    era: str | None,
) -> dict[str, float]:
    base, via = Stats.of(direct.samples), Stats.of(gateway.samples)
    floor = Stats.of(local.samples)
    print(f"remote latency, ms: echo tools/call to a loopback remote ({PROTOCOL_VERSION})")
    print(f"  {'path':<9} {'calls':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'mean':>8}")
    for name, path, s in (("direct", direct, base), ("gateway", gateway, via)):
        print(
            f"  {name:<9} {len(path.samples):>6} {s.p50:>8.3f} {s.p95:>8.3f} {s.p99:>8.3f} "
            f"{s.mean:>8.3f}"
        )
    added = via.p50 - base.p50
    print(
        f"  added: p50 {added:+.3f}  p95 {via.p95 - base.p95:+.3f}  p99 {via.p99 - base.p99:+.3f}"
        f"  mean {via.mean - base.mean:+.3f}"
    )
    print(
        f"  added p50, median of {len(paired)} paired rounds: {statistics.median(paired):+.3f} "
        f"(min {min(paired):+.3f}, max {max(paired):+.3f}; gateway slower in "
        f"{sum(1 for d in paired if d > 0)} of {len(paired)})"
    )
    print(
        f"  gateway mean split: tray call path (incl. tray -> remote) {inside_ms:.3f}, in front "
        f"of it (HTTP, auth, session, routing) {via.mean - inside_ms:.3f}; the call path is "
        f"{inside_ms - base.mean:+.3f} over the direct mean; the tray speaks {era or '?'} to far"
    )
    print(f"  the tray's CPU time per gateway call (all its threads): {cpu_ms:.3f} ms")
    print(
        f"  for scale: the same call through the gateway to a local stdio echo: p50 "
        f"{floor.p50:.3f}, p95 {floor.p95:.3f} ({len(local.samples)} calls)"
    )
    verdict = "MET" if added <= TARGET_ADDED_P50_MS else "NOT MET"
    print(f"  target <= {TARGET_ADDED_P50_MS:g} ms p50 added: {verdict} ({added:+.3f} ms)")
    return {
        "direct_p50_ms": base.p50,
        "gateway_p50_ms": via.p50,
        "added_p50_ms": added,
        "paired_added_ms": statistics.median(paired),
        "local_p50_ms": floor.p50,
        "tray_cpu_per_call_ms": cpu_ms,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per path")
    parser.add_argument("--rounds", type=int, default=20, help="alternating rounds")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per path first")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1 or args.warmup < 0 or args.rounds > args.calls:
        parser.error("--calls >= --rounds >= 1 and --warmup >= 0")
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as home:
        remote = Remote()
        servers = {
            NAME: {"url": remote.url},
            LOCAL: {"command": sys.executable, "args": [str(ECHO)]},
        }
        document = {"gateway": {"port": 0}, "mcpServers": servers}
        tray = Tray(Path(home), None, document=document)
        started = time.perf_counter()
        try:
            remote.start()
            tray.start()
            tray.wait_ready(names=(NAME, LOCAL))
            figures = asyncio.run(measure(remote, tray, args))
        except KeyboardInterrupt:
            print("\nbench: interrupted; stopping everything it started", file=sys.stderr)
            return 130
        except (BenchError, httpx2.HTTPError) as exc:
            print(f"bench: FAILED: {exc}\ntray output (tail):\n{tray.output()}", file=sys.stderr)
            return 1
        finally:
            code = tray.stop()
            remote.stop()
        elapsed = time.perf_counter() - started
    found = report(*figures)
    if code not in (0, None):
        print(f"  note: the tray exited with {code} on SIGTERM (expected 0)")
    command = (
        f".venv/bin/python bench/remote_latency.py --calls {args.calls} --rounds {args.rounds} "
        f"--warmup {args.warmup}"
    )
    print(f"  ran {elapsed:.1f} s; reproduce: {command}")
    row = Row(
        "a remote's call through /mcp/NAME, added over calling it directly (loopback), p50",
        f"<= {TARGET_ADDED_P50_MS:g} ms",
        "{added_p50_ms:+.2f} ms ({gateway_p50_ms:.2f} vs {direct_p50_ms:.2f} ms; paired rounds "
        "{paired_added_ms:+.2f}); a local stdio echo through the gateway: {local_p50_ms:.2f} ms",
    )
    record("remote_latency", command, found, [row])
    return 0


if __name__ == "__main__":
    sys.exit(main())
