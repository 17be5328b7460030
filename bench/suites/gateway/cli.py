"""Gateway latency: one echo ``tools/call`` direct vs through ``/mcp/<server>`` vs the bridge.

Everything is a real process. A headless tray (``mcp-tray run --headless``)
runs from a private MCP_TRAY_HOME with one server, ``echo``
(tests/servers/echo.py). The tray probes each child with ``server/discover``
(like the SDK's auto mode); echo.py runs on the 2.x SDK and answers it, so the
tray drives its echo.py child in the 2026-07-28 era (stateless: no
initialize, the caller's ``_meta`` envelope on every request) whatever era
its client speaks. The era the tray settled on is read from its /metrics
(``mcp_tray_server_protocol``) and printed. The bench process holds its client
sessions open at once and calls the trivial ``echo`` tool on each, in two
client eras over the same three paths.

Handshake era (MCP 2025-11-25): the SDK's low-level ``ClientSession`` with
``initialize()``:

* direct:  ``stdio_client`` -> its own echo.py child (no tray at all; this
  echo.py serves the handshake era, as its client asks);
* gateway: ``streamable_http_client`` (httpx2) -> the tray's ``/mcp/echo``
  (a stateful streamable-HTTP session) -> the tray's echo.py child;
* bridge:  ``stdio_client`` -> ``mcp-tray connect echo`` (which relays each
  line over HTTP to ``/mcp/echo``) -> the tray's echo.py child.

2026-07-28 era (default on; ``--no-modern`` skips them): the SDK's high-level
``mcp.Client(..., mode=MODERN_MODE, cache=None)``. MODERN_MODE is "auto": it
probes ``server/discover`` once at connect (untimed), and the bench checks
that every one of the three negotiated 2026-07-28 (``client.protocol_version``)
or stops. ``cache=None`` turns off the SDK's response cache (which honours
``ttlMs`` on list results), so nothing is ever answered locally:

* modern-direct:  ``mcp.Client(stdio_client(StdioServerParameters(echo.py)))``
  -> its own echo.py child (2026-07-28, no tray);
* modern-gateway: ``mcp.Client(streamable_http_client(url, http_client=...))``
  (its own httpx2 client with the tray's token, header
  ``MCP-Protocol-Version: 2026-07-28``) -> the tray's ``/mcp/echo``, served
  statelessly -> the tray's echo.py child;
* modern-bridge:  ``mcp.Client(stdio_client(... connect echo, the bridge
  row's env))`` -> ``mcp-tray connect echo`` (relaying 2026-07-28 lines with
  their headers) -> the tray's echo.py child. Its env adds a client session of
  its own (``MCP_TRAY_CLIENT_SESSION``): a second bridge of the bridge row's
  client session would claim that bridge's worker row, and the bridge row's
  bridge, fenced on its next heartbeat, would exit.

(The stdio rows pass ``stdio_client(..., errlog=...)`` as the transport, the
same as ``mcp.Client(StdioServerParameters(...))`` builds, so children's
stderr goes to the bench's log, not the terminal.) The tray's two eras share
one echo.py child, so the handshake-era gateway and bridge rows include the
tray's translation to 2026-07-28 upstream; the modern rows pass through. (A
handshake-era client that declared sampling, elicitation or roots would get a
handshake-era child of its own; these clients declare none.)

After WARMUP calls per client, CALLS sequential calls per client are timed
with ``time.perf_counter`` around ``session.call_tool`` (handshake era) or
``client.call_tool`` (2026-07-28; the result is checked after the clock
stops). The calls are interleaved: blocks of BLOCK calls per client, the
starting client rotating every round, so the noise of a small shared machine
hits every client alike.

"Added" is the client's percentile minus its era's direct percentile (direct
for the handshake-era rows and the peers, modern-direct for the modern rows,
raw-direct for the floor rows). The report says, with a YES/NO line each,
whether a 2026-07-28 request costs more through the gateway (modern-gateway's
added p50 over gateway's) and through the bridge (modern-bridge over bridge),
and in how many interleaved rounds the same held for the blocks' medians.

Around every block that goes through the tray, the tray's own ``/metrics``
histogram (``mcp_tray_call_seconds``, fed by ``ManagedServer.request``, for
either era) is read, so the report also splits the mean into "inside the
tray's call path" (call path, SDK dispatcher, pipes, echo child) and "outside
it" (client transport, HTTP, streamable or stateless server, gateway, and for
a bridge the relay process). The
CPU time (user + system) of every process in a call's chain is also taken
around each block (psutil): the chain is serial, so on a small busy machine
the mean wall time is close to the sum, and the split shows which process
the added time is spent in. The tray runs with the "fail" keyring backend,
so its token stays in the private home and the user's OS keyring is never
touched.

The floor rows (default on; ``--no-floor`` skips them) show what any extra
process hop costs on this machine, with no SDK at all. They speak the
handshake era by hand (initialize, then ``tools/call`` lines), and are timed
in the same interleaved blocks as the clients above:

* raw-direct:  a hand-written asyncio client (one ``tools/call`` line out,
  one line back, json.dumps/json.loads only) -> its own echo.py child;
* raw-hop:     the same raw client -> loopback TCP -> a minimal relay process
  (``bench/gateway.py --relay-child PORTFILE``: an asyncio TCP server that
  copies lines between the socket and its own echo.py child, no parsing, no
  HTTP) -> echo.py. Its added time over raw-direct is the floor of one extra
  process hop in Python asyncio;
* raw-gateway: a hand-written HTTP/1.1 keep-alive client (asyncio streams,
  Content-Length bodies) -> the tray's ``/mcp/echo`` -> the tray's echo.py
  child. Its added time over raw-direct is the tray's own cost without the
  SDK's streamable-HTTP client.

The peer rows (default on; ``--no-peers`` skips them) put two other stdio ->
HTTP gateways in front of the same server, each with its own echo.py child
(``tests/servers/echo.py`` on this bench's interpreter, i.e. the project's
venv and its 2.x SDK), so mcp-tray's added p50 can be compared in one run:

* supergateway (npm ``supergateway``, pinned SUPERGATEWAY_VERSION):
  ``node .../supergateway/dist/index.js --stdio "PYTHON echo.py"
  --outputTransport streamableHttp --stateful --port 0 --logLevel none``.
  Stateful, because its stateless mode spawns a new echo.py for every POST;
  it replies to POSTs as SSE streams. It listens on every interface (it has
  no host option), so it and echo.py get a minimal environment
  (PEER_ENV_KEYS). It runs on the machine's Node if that is >= 20 (its
  engines), else on npm's ``node@^22`` installed next to it;
* mcp-proxy (PyPI ``mcp-proxy``, sparfenyuk's, pinned MCP_PROXY_VERSION): it
  needs the 1.x MCP SDK, so it has a venv of its own;
  ``mcp-proxy --port 0 --log-level WARNING -- PYTHON echo.py`` serves
  streamable HTTP (stateful, JSON replies) on 127.0.0.1 at ``/mcp``.

Both are called with the same client kind as the gateway row (the SDK's
``streamable_http_client`` over httpx2, without the tray's token; handshake
era, which is also what their echo.py children then serve), in the same
interleaved blocks with the same warm-up and call counts, and the
report says whether mcp-tray's added p50 (gateway and bridge) is below both
peers'. Their per-message logging is turned down (it is on by default in
both). Each binds port 0; the bench reads the port it listens on from the
OS (psutil). They are installed on first use into the gitignored cache
folder ``.bench-peers/`` (``node/``: ``npm install`` with its cache in
``npm-cache/``; ``mcp-proxy-venv/``: ``python -m venv`` + ``pip install``;
install logs next to them, peer logs in ``logs/``), never globally; a peer
that cannot be installed (npm or PyPI unreachable) or started is skipped
with a one-line note.

Every process the bench starts is stopped on exit, on Ctrl+C and on
SIGTERM: the tray, the relay and the peers each lead a process group of
their own; a peer's descendants are also waited for (and killed if they
linger), since supergateway puts echo.py in a group of its own.

Target (issue): < 1 ms p50 added over direct, for the gateway and the
bridge (and over modern-direct, for modern-gateway and modern-bridge).
Figures are reported, not asserted: the exit code is 0 unless the bench
itself breaks. Run: .venv/bin/python bench/gateway.py --calls 2000
(``--tray-profile FILE`` runs the tray under cProfile and writes its stats).
"""

import argparse
import asyncio
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.harness.errors import BenchError
from bench.harness.processes import sigterm_as_interrupt
from bench.harness.tray import Tray
from bench.suites.gateway.clients import innermost_error, one_line_error
from bench.suites.gateway.constants import (
    DEFAULT_BLOCK,
    DEFAULT_CALLS,
    DEFAULT_WARMUP,
    LIST_CALLS,
    LIST_SERVERS,
    LIST_TOOLS,
)
from bench.suites.gateway.lists import list_bench, list_report
from bench.suites.gateway.measure import measure
from bench.suites.gateway.peers import prepare_peers
from bench.suites.gateway.relay import run_relay
from bench.suites.gateway.report import report


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
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the floor rows (raw-direct, raw-hop, raw-gateway: raw clients, no SDK)",
    )
    parser.add_argument(
        "--no-modern",
        dest="modern",
        action="store_false",
        help="skip the 2026-07-28 rows (modern-direct, modern-gateway, modern-bridge: "
        "mcp.Client, no handshake)",
    )
    parser.add_argument(
        "--no-peers",
        dest="peers",
        action="store_false",
        help="skip the peer rows (supergateway, mcp-proxy: installed into .bench-peers/ on "
        "first use)",
    )
    parser.add_argument(
        "--no-lists",
        dest="lists",
        action="store_false",
        help=f"skip tools/list of {LIST_SERVERS} servers x {LIST_TOOLS} tools through /mcp",
    )
    parser.add_argument(
        "--lists-only", action="store_true", help="only the tools/list measure through /mcp"
    )
    # Internal: the floor's relay process (see run_relay).
    parser.add_argument("--relay-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.relay_child is not None:
        asyncio.run(run_relay(args.relay_child))
        return 0
    if args.lists_only:
        with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-lists-") as home:
            list_report(list_bench(Path(home), min(args.calls, LIST_CALLS)))
        print(f"  reproduce: .venv/bin/python bench/gateway.py --lists-only --calls {args.calls}")
        return 0
    if args.calls < 1 or args.block < 1 or args.warmup < 0:
        parser.error("--calls and --block must be >= 1, --warmup >= 0")
    profile = args.tray_profile.resolve() if args.tray_profile else None

    notes: list[str] = []
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as home:
        tray = Tray(Path(home), profile)
        started = time.perf_counter()
        try:
            # Installed (on first use) before anything runs, so installs are not timed.
            peers = prepare_peers(notes) if args.peers else []
            started = time.perf_counter()
            tray.start()
            tray.wait_ready()
            clients = asyncio.run(
                measure(
                    tray,
                    args.calls,
                    args.warmup,
                    args.block,
                    args.floor,
                    args.modern,
                    peers,
                    notes,
                )
            )
        except KeyboardInterrupt:
            print("\nbench: interrupted; stopping everything it started", file=sys.stderr)
            tray.stop()
            return 130
        except Exception as exc:
            cause: BaseException | None = innermost_error(exc)
            if isinstance(cause, BenchError):
                # A client's failure is named in a BenchError: the traceback of what it raised.
                cause = cause.__cause__
            if cause is not None and not isinstance(cause, BenchError):
                traceback.print_exception(cause)
            print(f"bench: FAILED: {one_line_error(exc)}", file=sys.stderr)
            tray.stop()
            print(f"bench: tray output (tail):\n{tray.output()}", file=sys.stderr)
            return 1
        finally:
            # Idempotent: on success this is the one stop; on error it was stopped above.
            code = tray.stop()
        elapsed = time.perf_counter() - started
    report(clients, args, elapsed, peers, notes, tray.server_protocol)
    if code not in (0, None):
        print(f"  note: the tray exited with {code} on SIGTERM (expected 0)")
    if args.lists:
        with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-lists-") as home:
            figures = list_bench(Path(home), min(args.calls, LIST_CALLS))
        print()
        list_report(figures)
    if profile is not None:
        print(f"  tray profile: {profile} (python -m pstats {profile})")
    return 0
