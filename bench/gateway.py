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
import contextlib
import functools
import itertools
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from pathlib import Path
from types import FrameType
from typing import IO, Any, Final, TextIO
from urllib.parse import urlsplit

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
import psutil
from mcp import Client as ModernClient
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from results import Row, record

ROOT: Final = Path(__file__).resolve().parents[1]
ECHO_SCRIPT: Final = ROOT / "tests" / "servers" / "echo.py"
SERVER: Final = "echo"
TOOL: Final = "echo"
ARGUMENTS: Final = {"text": "hi"}
DEFAULT_CALLS: Final = 2000
DEFAULT_WARMUP: Final = 50
DEFAULT_BLOCK: Final = 100
TARGET_ADDED_P50_MS: Final = 1.0
#: What this bench adds to docs/measured.md's table (bench/results.py); the
#: floor rows (a plain HTTP client) are needed for the first figure.
ROWS: Final = (
    Row(
        "gateway overhead per call, p50",
        "< 1 ms",
        "+{raw_gateway_added_p50_ms:.2f} ms with a plain HTTP client; "
        "+{gateway_added_p50_ms:.1f} ms with the MCP SDK's HTTP client (the client itself "
        "costs +{sdk_client_added_p50_ms:.1f} ms); +{bridge_added_p50_ms:.1f} ms through the "
        "stdio bridge",
    ),
)
#: Bound on the tray's start-up (spawn, echo handshake, tools listed).
READY_SECONDS: Final = 60.0
#: How long the tray gets to stop its children and exit after SIGTERM.
STOP_SECONDS: Final = 20.0
CLIENTS: Final = ("direct", "gateway", "bridge")
#: The aggregate rows: the same echo call through ``/mcp`` and a profile's endpoint.
PROFILE: Final = "bench"
AGGREGATE_CLIENTS: Final = ("aggregate", "profile")
AGGREGATE_PATHS: Final = {"aggregate": "/mcp", "profile": f"/mcp/@{PROFILE}"}
#: The tool as an aggregate endpoint names it (SERVER__TOOL).
AGGREGATE_TOOL: Final = f"{SERVER}__{TOOL}"
RAW_AGGREGATE_CLIENTS: Final = ("raw-aggregate", "raw-profile")
#: Target (issue 19): what an aggregate endpoint's routing may add over ``/mcp/<server>``.
TARGET_ROUTING_P50_MS: Final = 0.1
#: The tools/list measure: this many servers of this many tools each, through ``/mcp``.
LIST_SERVERS: Final = 10
LIST_TOOLS: Final = 50
LIST_CALLS: Final = 200
MANY_TOOLS_SCRIPT: Final = ROOT / "tests" / "servers" / "many_tools.py"
#: The floor rows: raw clients, no SDK (see the module docstring).
FLOOR_CLIENTS: Final = ("raw-direct", "raw-hop", "raw-gateway")
FLOOR_LABELS: Final = {
    "raw-hop": "floor: one extra process hop",
    "raw-gateway": "tray gateway, raw client",
    "raw-aggregate": "/mcp, raw client",
    "raw-profile": f"/mcp/@{PROFILE}, raw client",
}
#: The 2026-07-28 rows (see the module docstring): ``mcp.Client``, no handshake.
MODERN_CLIENTS: Final = ("modern-direct", "modern-gateway", "modern-bridge")
#: The revision the modern rows must speak (checked on each client after it connects).
MODERN_VERSION: Final = "2026-07-28"
#: ``mcp.Client(mode=...)``: "auto" probes ``server/discover`` once, at connect (not
#: timed), and negotiates MODERN_VERSION against all three targets (checked).
MODERN_MODE: Final = "auto"
#: What the raw clients speak, by hand (handshake era).
PROTOCOL_VERSION: Final = "2025-11-25"
SESSION_HEADER: Final = "mcp-session-id"
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "floor", "version": "1"},
    },
}
INITIALIZED: Final = {"jsonrpc": "2.0", "method": "notifications/initialized"}
#: Bound on the relay child's start-up (it writes its port file when listening).
RELAY_READY_SECONDS: Final = 30.0
#: How long an echo.py child gets to exit after its stdin closes.
CHILD_STOP_SECONDS: Final = 5.0
#: The peer rows (see the module docstring): other stdio -> HTTP gateways, same echo.py.
PEER_CLIENTS: Final = ("supergateway", "mcp-proxy")
#: Where the peers are installed on first use (gitignored); nothing is installed globally.
PEERS_CACHE: Final = ROOT / ".bench-peers"
SUPERGATEWAY_VERSION: Final = "4.0.0"
MCP_PROXY_VERSION: Final = "0.13.0"
#: supergateway's package.json: engines.node >= 20. Below that npm's node@22 comes with it.
NODE_MIN_MAJOR: Final = 20
NODE_PACKAGE: Final = "node@^22"
#: Bound on one install step (npm install, python -m venv, pip install).
INSTALL_SECONDS: Final = 600.0
#: Bound on a peer's start-up (listening on its port).
PEER_READY_SECONDS: Final = 60.0
#: The only variables a peer process inherits. supergateway listens on every
#: interface (it has no host option) and hands its environment to echo.py, whose
#: getenv tool would answer anyone who can reach the port: nothing of the user's
#: environment goes there.
PEER_ENV_KEYS: Final = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
#: The telling line of a failed install: npm's first error line that is more than a
#: bare code, pip's first ERROR line.
_INSTALL_ERROR_RE: Final = re.compile(r"^npm error (?!(code|syscall|errno) \S+$)\S|^ERROR: ")
#: The tray's call-path histogram for this server's tools/call.
_METRIC_RE: Final = re.compile(
    r'^mcp_tray_call_seconds_(sum|count)\{(?=[^}]*method="tools/call")(?=[^}]*server="echo")[^}]*\}'
    r"\s+(\S+)$",
    re.MULTILINE,
)
#: The revision the tray speaks to its echo.py child (a gauge set to 1 per server).
_UPSTREAM_RE: Final = re.compile(
    r'^mcp_tray_server_protocol\{(?=[^}]*server="echo")[^}]*version="([^"]+)"[^}]*\}\s+1(?:\.0)?$',
    re.MULTILINE,
)


# Imported by bench/scale.py too; type-checked under every OS by `make lint`,
# it measures POSIX machines only (process groups).
if sys.platform != "win32":

    def _kill_group(pgid: int, *, hard: bool) -> None:
        os.killpg(pgid, signal.SIGKILL if hard else signal.SIGTERM)

else:

    def _kill_group(pgid: int, *, hard: bool) -> None:
        raise OSError("bench/gateway.py measures POSIX machines (process groups)")


class BenchError(Exception):
    pass


class PeerUnavailable(Exception):
    """A peer cannot be installed or started: its row is skipped with a one-line note."""


# ------------------------------------------------------------------ the tray


class Tray:
    """A headless tray in a subprocess, from a private home; always stopped by ``stop``."""

    def __init__(
        self,
        home: Path,
        profile: Path | None,
        runner: tuple[str, ...] = ("-m", "core.cli.main"),
        server: Path = ECHO_SCRIPT,
        document: dict[str, Any] | None = None,
    ) -> None:
        self.home = home
        #: The config to run (default: ``echo`` and the ``bench`` profile over it).
        self.document = document
        #: The script of the one server, ``echo`` (bench/scale.py may serve a leaner one).
        self.server = server
        self.config = home / "bench-config.json"
        self.log = home / "tray-output.log"
        self.profile = profile
        #: The interpreter arguments that run the CLI (bench/scale.py passes one that
        #: picks another event loop first).
        self.runner = runner
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.url = ""
        self.token = ""
        #: pid of the tray's own echo.py child, from ``status --json``.
        self.server_pid: int | None = None
        #: The revision the tray speaks to that child (its probe's verdict), from /metrics.
        self.server_protocol: str | None = None

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
            [sys.executable, "-m", "core.cli.main", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def start(self) -> None:
        config = self.document or {
            "mcpServers": {SERVER: {"command": sys.executable, "args": [str(self.server)]}},
            "profiles": {PROFILE: {"servers": [SERVER], "tools": [AGGREGATE_TOOL]}},
        }
        self.config.write_text(json.dumps(config, indent=2))
        runner = list(self.runner)
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

    def wait_ready(self, seconds: float = READY_SECONDS, names: tuple[str, ...] = ()) -> None:
        """Until every server (or those of ``names``) is ready; its URL and token read."""
        assert self.process is not None
        deadline = time.monotonic() + seconds
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
                waited = [servers.get(name, {}) for name in names] or list(servers.values())
                if waited and all(s.get("state") == "ready" for s in waited):
                    self.url = str(body["gateway"]["url"]).rstrip("/")
                    self.server_pid = servers.get(SERVER, {}).get("pid")
                    break
            else:
                last = (status.stderr or status.stdout).strip()
            time.sleep(0.2)
        else:
            raise BenchError(f"servers not ready within {seconds:g} s ({last}):\n{self.output()}")
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
                        _kill_group(process.pid, hard=True)
                    process.wait(5)
            return process.returncode
        finally:
            if self._log_file is not None:
                self._log_file.close()


# ------------------------------------------------- the floor: raw clients, relay


async def _stop_child(process: asyncio.subprocess.Process) -> None:
    """Close a stdio server's stdin (it exits on EOF); kill it if it lingers."""
    if process.returncode is not None:
        return
    if process.stdin is not None:
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), CHILD_STOP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def _close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def _spawn_echo(stderr: IO[str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(ECHO_SCRIPT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )


async def _relay(portfile: Path) -> None:
    """``--relay-child``: the floor of one extra process hop.

    An asyncio TCP server on loopback; each connection gets its own echo.py
    child, and every line is copied as is, socket -> child stdin and child
    stdout -> socket: no parsing, no HTTP. The port is written to PORTFILE
    once it listens; SIGTERM stops the children and exits.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    children: set[asyncio.subprocess.Process] = set()

    async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while line := await source.readline():
            sink.write(line)
            await sink.drain()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        child = await _spawn_echo()
        children.add(child)
        try:
            assert child.stdin is not None and child.stdout is not None
            copies = [
                asyncio.create_task(copy(reader, child.stdin)),
                asyncio.create_task(copy(child.stdout, writer)),
            ]
            try:
                await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in copies:
                    task.cancel()
                await asyncio.gather(*copies, return_exceptions=True)
        finally:
            await _stop_child(child)
            children.discard(child)
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        partial = portfile.with_name(portfile.name + ".partial")
        partial.write_text(f"{port}\n")
        partial.replace(portfile)
        await stop.wait()
    finally:
        server.close()
        for child in list(children):
            await _stop_child(child)


class Relay:
    """The ``--relay-child`` process; always stopped by ``stop``."""

    def __init__(self, home: Path, stderr: IO[str]) -> None:
        self.portfile = home / "relay.port"
        self.stderr = stderr
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--relay-child", str(self.portfile)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            # Its own process group: a last-resort kill reaches it and its echo.py only.
            start_new_session=True,
        )

    async def wait_port(self) -> int:
        assert self.process is not None
        deadline = time.monotonic() + RELAY_READY_SECONDS
        while time.monotonic() < deadline:
            if self.portfile.exists():
                return int(self.portfile.read_text())
            if self.process.poll() is not None:
                raise BenchError(
                    f"the relay exited with {self.process.returncode} during start-up "
                    "(its stderr is in the bench's client-stderr.log)"
                )
            await asyncio.sleep(0.05)
        raise BenchError(f"the relay did not listen within {RELAY_READY_SECONDS:g} s")

    def stop(self) -> None:
        """SIGTERM and wait (the relay stops its echo.py); SIGKILL its group as a last resort."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            print(
                f"bench: the relay did not stop within {STOP_SECONDS:g} s; killing its group",
                file=sys.stderr,
            )
            with contextlib.suppress(ProcessLookupError):
                _kill_group(process.pid, hard=True)
            process.wait(5)


class RawLineClient:
    """Newline-delimited JSON-RPC by hand: one line out, json.loads of the line back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._ids = itertools.count(2)

    async def _send(self, message: dict[str, Any]) -> None:
        self.writer.write(json.dumps(message).encode() + b"\n")
        await self.writer.drain()

    async def _answer(self, request_id: int) -> Any:
        while True:
            line = await self.reader.readline()
            if not line:
                raise BenchError("a raw client's peer closed the stream")
            message = json.loads(line)
            # One line per call in practice; a stray notification would be skipped.
            if message.get("id") == request_id:
                return message

    async def initialize(self) -> None:
        await self._send(INITIALIZE)
        answer = await self._answer(1)
        if "result" not in answer:
            raise BenchError(f"raw initialize answered {answer!r}")
        await self._send(INITIALIZED)

    async def call(self) -> Any:
        request_id = next(self._ids)
        await self._send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": TOOL, "arguments": ARGUMENTS},
            }
        )
        return await self._answer(request_id)


class RawHttpClient:
    """Streamable HTTP by hand: HTTP/1.1 keep-alive POSTs with Content-Length bodies."""

    def __init__(self, url: str, token: str, tool: str = TOOL) -> None:
        self.tool = tool
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise BenchError(f"cannot use the gateway URL {url!r}")
        self.host, self.port = parts.hostname, parts.port
        self._head = (
            f"POST {parts.path} HTTP/1.1\r\n"
            f"host: {parts.netloc}\r\n"
            f"authorization: Bearer {token}\r\n"
            "accept: application/json, text/event-stream\r\n"
            "content-type: application/json\r\n"
            f"mcp-protocol-version: {PROTOCOL_VERSION}\r\n"
        ).encode("latin-1")
        self._ids = itertools.count(2)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def aclose(self) -> None:
        if self.writer is not None:
            await _close_writer(self.writer)

    async def _post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        return await self._send(self._head, json.dumps(message).encode())

    async def _send(self, head: bytes, body: bytes) -> tuple[int, dict[str, str], bytes]:
        reader, writer = self.reader, self.writer
        assert reader is not None and writer is not None
        writer.write(head + b"content-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        status_line = await reader.readline()
        if not status_line:
            raise BenchError("the tray closed the raw-gateway connection")
        status = int(status_line.split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length")
        if length is None:
            raise BenchError(
                f"raw-gateway: a {status} reply without content-length "
                f"(content-type {headers.get('content-type')!r}, "
                f"transfer-encoding {headers.get('transfer-encoding')!r})"
            )
        return status, headers, await reader.readexactly(int(length))

    async def initialize(self) -> None:
        status, headers, body = await self._post(INITIALIZE)
        session_id = headers.get(SESSION_HEADER)
        if status != 200 or not session_id:
            raise BenchError(f"raw-gateway initialize: {status} {headers!r} {body[:300]!r}")
        self._head += f"{SESSION_HEADER}: {session_id}\r\n".encode("latin-1")
        status, _, body = await self._post(INITIALIZED)
        if status != 202:
            raise BenchError(f"raw-gateway initialized notification: {status} {body[:300]!r}")

    async def call(self) -> Any:
        params = {"name": self.tool, "arguments": ARGUMENTS}
        return json.loads(await self.request("tools/call", params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        """One request; its answer's body as it came."""
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": params or {},
        }
        status, _, body = await self._post(message)
        if status != 200:
            raise BenchError(f"raw-gateway {method}: {status} {body[:300]!r}")
        return body

    async def end(self) -> None:
        """DELETE the session, as a client done with it does."""
        status, _, body = await self._send(b"DELETE" + self._head.removeprefix(b"POST"), b"")
        if status != 200:
            raise BenchError(f"raw-gateway DELETE: {status} {body[:300]!r}")


# ------------------------------------------------------ the peers: install, processes


@dataclass(frozen=True)
class PeerSpec:
    """How to run one peer gateway in front of echo.py (installed, not yet started)."""

    name: str
    #: Versions, for the report, e.g. "supergateway 4.0.0 (Node v20.20.2, ...)".
    describe: str
    #: Its transport as the bench's client sees it.
    transport: str
    command: tuple[str, ...]
    #: The MCP endpoint's path on the port the peer listens on.
    path: str


def _peer_env() -> dict[str, str]:
    return {key: os.environ[key] for key in PEER_ENV_KEYS if key in os.environ}


def _log_line(path: Path, prefer: re.Pattern[str] | None = None) -> str:
    """The most telling line of a log: the first matching ``prefer``, else the last."""
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        if prefer is not None:
            for line in lines:
                if prefer.search(line):
                    return line
        if lines:
            return lines[-1]
    return "(no output)"


def _install(command: list[str], cwd: Path, env: dict[str, str], log: Path, what: str) -> None:
    """One install step in its own process group, bounded; on Ctrl+C or a timeout its whole
    group is stopped. Raises PeerUnavailable (one line) when it fails."""
    with log.open("wb") as out:
        try:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise PeerUnavailable(f"{what}: {exc}") from None
        try:
            code: int | None = process.wait(INSTALL_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if process.poll() is None:
                _stop_group(process, 5.0, group_term=True)
    if code != 0:
        outcome = f"exit {code}" if code is not None else f"no end within {INSTALL_SECONDS:g} s"
        detail = _log_line(log, prefer=_INSTALL_ERROR_RE)
        raise PeerUnavailable(f"{what} failed ({outcome}): {detail} [log: {log}]")


def _stop_group(process: subprocess.Popen[Any], grace: float, *, group_term: bool) -> None:
    """SIGTERM the leader of a process group this bench started (or the whole group, with
    ``group_term``); SIGKILL the group if the leader lingers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group_term:
            _kill_group(process.pid, hard=False)
        else:
            process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            _kill_group(process.pid, hard=True)
        process.wait(5)


def _node_version(node: str) -> tuple[int, str] | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        probe = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        text = probe.stdout.strip()
        major = text.lstrip("v").split(".")[0]
        if probe.returncode == 0 and major.isdigit():
            return int(major), text
    return None


def _npm_version(folder: Path, package: str) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError):
        manifest = folder / "node_modules" / package / "package.json"
        return str(json.loads(manifest.read_text())["version"])
    return "?"


def ensure_supergateway() -> PeerSpec:
    """supergateway, installed into .bench-peers/node once (with a Node 22 if the
    machine's Node is older than supergateway's engines)."""
    folder = PEERS_CACHE / "node"
    entry = folder / "node_modules" / "supergateway" / "dist" / "index.js"
    bundled_node = folder / "node_modules" / "node" / "bin" / "node"
    system_node = shutil.which("node")
    system = _node_version(system_node) if system_node else None
    need_node = system is None or system[0] < NODE_MIN_MAJOR
    packages = [f"supergateway@{SUPERGATEWAY_VERSION}", *([NODE_PACKAGE] if need_node else [])]
    stamp = folder / ".installed"
    wanted = " ".join(packages)
    installed = stamp.exists() and stamp.read_text().strip() == wanted
    if not (installed and entry.exists() and (bundled_node.exists() or not need_node)):
        npm = shutil.which("npm")
        if npm is None:
            raise PeerUnavailable("npm is not on PATH (install Node.js and npm)")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(
            json.dumps(
                {
                    "name": "mcp-tray-bench-peers",
                    "private": True,
                    "description": "Peer gateways for bench/gateway.py",
                },
                indent=2,
            )
            + "\n"
        )
        env = dict(os.environ)
        env.update(
            npm_config_cache=str(PEERS_CACHE / "npm-cache"),
            npm_config_update_notifier="false",
            npm_config_fund="false",
            npm_config_audit="false",
            npm_config_loglevel="warn",
            # An unreachable registry fails in seconds, not minutes.
            npm_config_fetch_retries="1",
        )
        # The node@22 package's bin comes first, so its install script runs on Node 22 too.
        env["PATH"] = f"{folder / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
        print(f"bench: installing {wanted} into {folder} (first use)", file=sys.stderr)
        _install(
            [npm, "install", "--save-exact", *packages],
            folder,
            env,
            PEERS_CACHE / "npm-install.log",
            f"npm install {wanted}",
        )
        if not entry.exists() or (need_node and not bundled_node.exists()):
            raise PeerUnavailable(f"npm install {wanted} left no {entry.name} or node behind")
        stamp.write_text(wanted + "\n")
    node = str(bundled_node) if need_node else str(system_node)
    found = _node_version(node)
    if found is None or found[0] < NODE_MIN_MAJOR:
        raise PeerUnavailable(f"{node} is not Node >= {NODE_MIN_MAJOR}")
    sdk = _npm_version(folder, "@modelcontextprotocol/sdk")
    return PeerSpec(
        "supergateway",
        f"supergateway {_npm_version(folder, 'supergateway')} (Node {found[1]}, "
        f"@modelcontextprotocol/sdk {sdk})",
        # Stateless mode spawns a new echo.py for every POST; stateful keeps one per session.
        "streamable HTTP, --stateful, replies as SSE",
        (
            node,
            str(entry),
            "--stdio",
            shlex.join([sys.executable, str(ECHO_SCRIPT)]),
            "--outputTransport",
            "streamableHttp",
            "--stateful",
            "--port",
            "0",
            # Its default (info) logs every message both ways.
            "--logLevel",
            "none",
        ),
        "/mcp",
    )


def ensure_mcp_proxy() -> PeerSpec:
    """mcp-proxy (sparfenyuk), in its own venv .bench-peers/mcp-proxy-venv (it needs the 1.x
    MCP SDK); echo.py itself still runs on this bench's interpreter (the 2.x SDK)."""
    venv = PEERS_CACHE / "mcp-proxy-venv"
    python = venv / "bin" / "python"
    exe = venv / "bin" / "mcp-proxy"
    stamp = venv / ".installed"
    wanted = f"mcp-proxy=={MCP_PROXY_VERSION}"
    installed = stamp.exists() and stamp.read_text().strip() == wanted
    if not (installed and exe.exists()):
        PEERS_CACHE.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        if not python.exists():
            print(f"bench: creating {venv} (first use)", file=sys.stderr)
            _install(
                [sys.executable, "-m", "venv", str(venv)],
                ROOT,
                env,
                PEERS_CACHE / "venv-create.log",
                f"python -m venv {venv}",
            )
        print(f"bench: installing {wanted} into {venv} (first use)", file=sys.stderr)
        _install(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--retries",
                "1",
                wanted,
            ],
            ROOT,
            env,
            PEERS_CACHE / "pip-install.log",
            f"pip install {wanted}",
        )
        if not exe.exists():
            raise PeerUnavailable(f"pip install {wanted} left no {exe} behind")
        stamp.write_text(wanted + "\n")
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, sys; "
            "print(m.version('mcp-proxy'), m.version('mcp'), sys.version.split()[0])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_peer_env(),
    )
    parts = probe.stdout.split()
    if probe.returncode != 0 or len(parts) != 3:
        raise PeerUnavailable(f"{python} cannot import mcp-proxy: {probe.stderr.strip()[-200:]}")
    return PeerSpec(
        "mcp-proxy",
        f"mcp-proxy {parts[0]} (mcp SDK {parts[1]}, Python {parts[2]}, own venv)",
        # One stdio session upstream, the SDK 1.x StreamableHTTPSessionManager (stateful,
        # JSON responses) in front.
        "streamable HTTP, stateful, JSON replies",
        (
            str(exe),
            "--port",
            "0",
            # Its default (INFO) also has uvicorn log every request.
            "--log-level",
            "WARNING",
            "--",
            sys.executable,
            str(ECHO_SCRIPT),
        ),
        "/mcp",
    )


def prepare_peers(notes: list[str]) -> list[PeerSpec]:
    """Every peer that is installed (or installs now); a one-line note for each that is not."""
    specs: list[PeerSpec] = []
    for name, ensure in (("supergateway", ensure_supergateway), ("mcp-proxy", ensure_mcp_proxy)):
        try:
            specs.append(ensure())
        except PeerUnavailable as exc:
            notes.append(f"{name} skipped: {exc}")
    return specs


class Peer:
    """A peer gateway process, in its own process group; always stopped by ``stop``."""

    def __init__(self, spec: PeerSpec) -> None:
        self.spec = spec
        self.log = PEERS_CACHE / "logs" / f"{spec.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            self.spec.command,
            cwd=ROOT,
            env=_peer_env(),
            # A pipe nobody writes to: supergateway stops when it closes, so even a
            # SIGKILLed bench does not leave it running.
            stdin=subprocess.PIPE,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    async def wait_url(self) -> str:
        """The peer's MCP URL, once its process listens (``--port 0``: the port it picked)."""
        assert self.process is not None
        leader = psutil.Process(self.process.pid)
        deadline = time.monotonic() + PEER_READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PeerUnavailable(
                    f"it exited with {self.process.returncode} during start-up "
                    f"({_log_line(self.log)}) [log: {self.log}]"
                )
            with contextlib.suppress(psutil.Error):
                for conn in leader.net_connections(kind="tcp"):
                    if conn.status == psutil.CONN_LISTEN and conn.laddr:
                        return f"http://127.0.0.1:{conn.laddr.port}{self.spec.path}"
            await asyncio.sleep(0.05)
        raise PeerUnavailable(
            f"it did not listen within {PEER_READY_SECONDS:g} s [log: {self.log}]"
        )

    def echo_process(self) -> psutil.Process | None:
        """Its echo.py child (the innermost process running echo.py), if there is one."""
        assert self.process is not None
        with contextlib.suppress(psutil.Error):
            found = []
            for child in psutil.Process(self.process.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if str(ECHO_SCRIPT) in child.cmdline():
                        found.append(child)
            if len(found) == 1:
                return found[0]
        return None

    def stop(self) -> None:
        """SIGTERM (it stops its echo.py), SIGKILL its group if it lingers, and then any of
        its descendants still alive (supergateway puts echo.py in a group of its own)."""
        process = self.process
        if process is None:
            return
        try:
            descendants: list[psutil.Process] = []
            with contextlib.suppress(psutil.Error):
                descendants = psutil.Process(process.pid).children(recursive=True)
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            if process.poll() is None:
                _stop_group(process, STOP_SECONDS, group_term=False)
            _, alive = psutil.wait_procs(descendants, timeout=CHILD_STOP_SECONDS)
            for leftover in alive:
                print(
                    f"bench: {self.spec.name} left pid {leftover.pid} behind; killing it",
                    file=sys.stderr,
                )
                with contextlib.suppress(psutil.Error):
                    leftover.kill()
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None


# ------------------------------------------------------------- the clients


@dataclass
class Client:
    name: str
    #: One timed call; its result goes to ``check`` after the clock stops.
    call: Callable[[], Awaitable[Any]]
    check: Callable[[Any], None]
    #: The processes one call of this client runs through, by role.
    processes: dict[str, psutil.Process]
    #: Whether its calls go through the tray (its /metrics is read around each block).
    through_tray: bool = False
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


def _check_raw(answer: Any) -> None:
    try:
        result = answer["result"]
        ok = not result.get("isError") and result["content"][0]["text"] == ARGUMENTS["text"]
    except (KeyError, IndexError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise BenchError(f"raw echo call answered {answer!r}")


def _sdk_call(session: ClientSession, tool: str = TOOL) -> Callable[[], Awaitable[Any]]:
    return functools.partial(session.call_tool, tool, ARGUMENTS)


def _modern_call(client: ModernClient) -> Callable[[], Awaitable[Any]]:
    return functools.partial(client.call_tool, TOOL, ARGUMENTS)


async def _timed_block(client: Client, calls: int) -> None:
    call, check, samples = client.call, client.check, client.samples
    try:
        for _ in range(calls):
            started = time.perf_counter()
            result = await call()
            samples.append(time.perf_counter() - started)
            check(result)
    except Exception as exc:
        # Named, so a failure says which client broke (the stack's task groups wrap it).
        raise BenchError(
            f"{client.name}: timed call {len(samples) + 1} failed: {_one_line(exc)}"
        ) from exc


async def _warm(client: Client, calls: int) -> None:
    try:
        for _ in range(calls):
            client.check(await client.call())
    except Exception as exc:
        raise BenchError(f"{client.name}: a warm-up call failed: {_one_line(exc)}") from exc


async def _tray_upstream(http: httpx2.AsyncClient, url: str) -> str | None:
    """The revision the tray speaks to its echo.py child, from its /metrics."""
    reply = await http.get(f"{url}/metrics")
    reply.raise_for_status()
    found = _UPSTREAM_RE.search(reply.text)
    return found.group(1) if found else None


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


async def _modern_session(
    stack: contextlib.AsyncExitStack,
    transport: contextlib.AbstractAsyncContextManager[tuple[Any, Any]],
) -> tuple[ModernClient, psutil.Process | None]:
    """A connected 2026-07-28 ``mcp.Client`` (checked), and the child process its transport
    spawned (if any). No response cache: every call reaches the server."""
    before = {child.pid for child in psutil.Process().children()}
    client = await stack.enter_async_context(ModernClient(transport, mode=MODERN_MODE, cache=None))
    if client.protocol_version != MODERN_VERSION:
        raise BenchError(
            f"mcp.Client(mode={MODERN_MODE!r}) negotiated {client.protocol_version!r}, "
            f"not {MODERN_VERSION}"
        )
    spawned = [child for child in psutil.Process().children() if child.pid not in before]
    return client, spawned[0] if len(spawned) == 1 else None


def _roles(processes: dict[str, psutil.Process | None]) -> dict[str, psutil.Process]:
    return {role: process for role, process in processes.items() if process is not None}


async def _modern_clients(
    stack: contextlib.AsyncExitStack,
    tray: Tray,
    errlog: TextIO,
    bridge_env: dict[str, str],
    me: psutil.Process,
    tray_process: psutil.Process,
    tray_echo: psutil.Process | None,
) -> dict[str, Client]:
    """modern-direct, modern-gateway and modern-bridge: the same three paths as direct,
    gateway and bridge, with ``mcp.Client`` in the 2026-07-28 era; every process they
    start is stopped when ``stack`` closes."""
    direct, direct_echo = await _modern_session(
        stack,
        stdio_client(
            StdioServerParameters(command=sys.executable, args=[str(ECHO_SCRIPT)]),
            errlog=errlog,
        ),
    )
    # Its own connection pool: no keep-alive connection shared with the handshake-era row.
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tray.token}"},
            timeout=httpx2.Timeout(30, read=60),
        )
    )
    gateway, _ = await _modern_session(
        stack, streamable_http_client(f"{tray.url}/mcp/{SERVER}", http_client=http)
    )
    # A client session of its own: a second bridge of the bridge row's client session
    # would claim its worker row, and the bridge row's bridge, fenced, would exit.
    modern_env = {**bridge_env, "MCP_TRAY_CLIENT_SESSION": f"bench-modern-{os.getpid()}"}
    bridge, bridge_process = await _modern_session(
        stack,
        stdio_client(
            StdioServerParameters(
                command=sys.executable,
                args=["-m", "core.cli.main", "connect", SERVER],
                env=modern_env,
                cwd=ROOT,
            ),
            errlog=errlog,
        ),
    )
    return {
        "modern-direct": Client(
            "modern-direct",
            _modern_call(direct),
            _check,
            _roles({"client": me, "echo.py": direct_echo}),
        ),
        "modern-gateway": Client(
            "modern-gateway",
            _modern_call(gateway),
            _check,
            _roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
            through_tray=True,
        ),
        "modern-bridge": Client(
            "modern-bridge",
            _modern_call(bridge),
            _check,
            _roles(
                {
                    "client": me,
                    "bridge": bridge_process,
                    "tray": tray_process,
                    "echo.py": tray_echo,
                }
            ),
            through_tray=True,
        ),
    }


async def _floor_clients(
    stack: contextlib.AsyncExitStack,
    tray: Tray,
    errlog: IO[str],
    me: psutil.Process,
    tray_process: psutil.Process,
    tray_echo: psutil.Process | None,
) -> dict[str, Client]:
    """raw-direct, raw-hop and raw-gateway, initialized; every process they start is
    stopped when ``stack`` closes."""
    echo = await _spawn_echo(errlog)
    stack.push_async_callback(_stop_child, echo)
    assert echo.stdin is not None and echo.stdout is not None
    raw_direct = RawLineClient(echo.stdout, echo.stdin)
    await raw_direct.initialize()

    relay = Relay(tray.home, errlog)
    stack.callback(relay.stop)
    relay.start()
    assert relay.process is not None
    port = await relay.wait_port()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # Closed before the relay is stopped (the stack unwinds last in, first out).
    stack.push_async_callback(_close_writer, writer)
    raw_hop = RawLineClient(reader, writer)
    await raw_hop.initialize()
    relay_process = psutil.Process(relay.process.pid)
    relay_children = relay_process.children()
    hop_echo = relay_children[0] if len(relay_children) == 1 else None

    raw_gateway = RawHttpClient(f"{tray.url}/mcp/{SERVER}", tray.token)
    stack.push_async_callback(raw_gateway.aclose)
    await raw_gateway.connect()
    await raw_gateway.initialize()
    aggregated = {}
    for name, path in zip(RAW_AGGREGATE_CLIENTS, AGGREGATE_PATHS.values(), strict=True):
        raw = RawHttpClient(f"{tray.url}{path}", tray.token, AGGREGATE_TOOL)
        stack.push_async_callback(raw.aclose)
        await raw.connect()
        await raw.initialize()
        aggregated[name] = Client(
            name,
            raw.call,
            _check_raw,
            _roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
            through_tray=True,
        )

    return aggregated | {
        "raw-direct": Client(
            "raw-direct",
            raw_direct.call,
            _check_raw,
            _roles({"client": me, "echo.py": psutil.Process(echo.pid)}),
        ),
        "raw-hop": Client(
            "raw-hop",
            raw_hop.call,
            _check_raw,
            _roles({"client": me, "relay": relay_process, "echo.py": hop_echo}),
        ),
        "raw-gateway": Client(
            "raw-gateway",
            raw_gateway.call,
            _check_raw,
            _roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
            through_tray=True,
        ),
    }


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups nest them), or the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _one_line(exc: BaseException) -> str:
    """The innermost error of an exception (group), on one line."""
    exc = _innermost(exc)
    text = " ".join(str(exc).split())
    if isinstance(exc, PeerUnavailable | BenchError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _peer_client(
    stack: contextlib.AsyncExitStack,
    spec: PeerSpec,
    http: httpx2.AsyncClient,
    me: psutil.Process,
) -> Client:
    """A started peer and an initialized SDK streamable-HTTP session to it; the peer is
    stopped when ``stack`` closes (after the session)."""
    peer = Peer(spec)
    stack.callback(peer.stop)
    peer.start()
    url = await peer.wait_url()
    session, _ = await _session(stack, streamable_http_client(url, http_client=http))
    assert peer.process is not None
    return Client(
        spec.name,
        _sdk_call(session),
        _check,
        _roles(
            {
                "client": me,
                spec.name: psutil.Process(peer.process.pid),
                "echo.py": peer.echo_process(),
            }
        ),
    )


async def _peer_clients(
    stack: contextlib.AsyncExitStack,
    peers: list[PeerSpec],
    me: psutil.Process,
    notes: list[str],
) -> dict[str, Client]:
    """One client per peer that starts; a peer that does not start is stopped at once and
    gets a one-line note instead of a row."""
    if not peers:
        return {}
    # No Authorization header: the tray's token never goes to a peer.
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)))
    clients: dict[str, Client] = {}
    for spec in peers:
        # Its own stack: a peer that fails is unwound now, before anything else is entered.
        peer_stack = contextlib.AsyncExitStack()
        try:
            clients[spec.name] = await _peer_client(peer_stack, spec, http, me)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await peer_stack.aclose()
            notes.append(f"{spec.name} skipped: it did not start: {_one_line(exc)}")
            continue
        except BaseException:
            await peer_stack.aclose()
            raise
        stack.push_async_callback(peer_stack.aclose)
    return clients


async def measure(
    tray: Tray,
    calls: int,
    warmup: int,
    block: int,
    floor: bool,
    modern: bool,
    peers: list[PeerSpec],
    notes: list[str],
) -> dict[str, Client]:
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
                    args=["-m", "core.cli.main", "connect", SERVER],
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
            "direct": Client(
                "direct",
                _sdk_call(direct),
                _check,
                _roles({"client": me, "echo.py": direct_echo}),
            ),
            "gateway": Client(
                "gateway",
                _sdk_call(gateway),
                _check,
                _roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
                through_tray=True,
            ),
            "bridge": Client(
                "bridge",
                _sdk_call(bridge),
                _check,
                _roles(
                    {
                        "client": me,
                        "bridge": bridge_process,
                        "tray": tray_process,
                        "echo.py": tray_echo,
                    }
                ),
                through_tray=True,
            ),
        }
        for name, path in AGGREGATE_PATHS.items():
            session, _ = await _session(
                stack, streamable_http_client(f"{tray.url}{path}", http_client=http)
            )
            clients[name] = Client(
                name,
                _sdk_call(session, AGGREGATE_TOOL),
                _check,
                _roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
                through_tray=True,
            )
        if modern:
            clients.update(
                await _modern_clients(stack, tray, errlog, bridge_env, me, tray_process, tray_echo)
            )
        # The peers after mcp-tray's sessions, each in front of its own echo.py.
        clients.update(await _peer_clients(stack, peers, me, notes))
        if floor:
            # After the SDK sessions: _session tells its spawned child by the bench's children.
            clients.update(await _floor_clients(stack, tray, errlog, me, tray_process, tray_echo))
        for client in clients.values():
            await _warm(client, warmup)
        await _tray_call_path(scrape, tray.url)
        tray.server_protocol = await _tray_upstream(scrape, tray.url)

        order = list(clients.values())
        done = 0
        round_no = 0
        while done < calls:
            size = min(block, calls - done)
            shift = round_no % len(order)
            for client in order[shift:] + order[:shift]:
                through_tray = client.through_tray
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


def _row(name: str, count: int, s: Stats, base: Stats | None, label: str = "") -> str:
    added = f"   {s.p50 - base.p50:>+8.3f} {s.p95 - base.p95:>+8.3f}" if base is not None else ""
    return (
        f"  {name:<14} {count:>6} {s.p50:>8.3f} {s.p95:>8.3f} {s.p99:>8.3f} {s.mean:>8.3f}"
        f"{added}{'   ' + label if label else ''}"
    ).rstrip()


def _block_p50s(samples: list[float], block: int) -> list[float]:
    """The median of each interleaved block of one client, in round order."""
    return [statistics.median(samples[i : i + block]) for i in range(0, len(samples), block)]


def _modern_report(
    clients: dict[str, Client],
    stats: dict[str, Stats],
    header: str,
    block: int,
    enabled: bool,
) -> None:
    """The 2026-07-28 rows over modern-direct, and whether a 2026-07-28 request costs
    more through mcp-tray than a handshake-era one."""
    if not enabled:
        print("  2026-07-28 rows: off (--no-modern)")
        return
    base = stats["modern-direct"]
    print(
        f"  2026-07-28 rows: mcp.Client(mode={MODERN_MODE!r}, cache=None) (mcp SDK "
        f"{package_version('mcp')}): no initialize, a _meta envelope on every request; each "
        f"negotiated {MODERN_VERSION} at connect (checked), same paths, same blocks, same "
        "warm-up and call counts as the handshake-era rows above:"
    )
    print(header + "   (added over modern-direct)")
    for name in MODERN_CLIENTS:
        print(
            _row(
                name,
                len(clients[name].samples),
                stats[name],
                base if name != "modern-direct" else None,
            )
        )
    print(
        f"  modern-direct vs direct (no tray; the SDK client and echo.py, 2026-07-28 vs "
        f"handshake era): p50 {base.p50 - stats['direct'].p50:+.3f} ms, "
        f"p95 {base.p95 - stats['direct'].p95:+.3f} ms"
    )
    print(
        "  2026-07-28 vs handshake-era request through mcp-tray, added p50 (each era over its "
        "own direct row; rounds: the same comparison on the medians of each interleaved "
        "round's blocks):"
    )
    direct_blocks = _block_p50s(clients["direct"].samples, block)
    modern_direct_blocks = _block_p50s(clients["modern-direct"].samples, block)
    for name in ("gateway", "bridge"):
        modern_name = f"modern-{name}"
        handshake = stats[name].p50 - stats["direct"].p50
        modern = stats[modern_name].p50 - base.p50
        more = modern > handshake
        rounds = list(
            zip(
                _block_p50s(clients[name].samples, block),
                _block_p50s(clients[modern_name].samples, block),
                direct_blocks,
                modern_direct_blocks,
                strict=True,
            )
        )
        higher = sum(1 for h, m, hd, md in rounds if m - md > h - hd)
        print(
            f"    {'YES' if more else 'NO ':<3}  a 2026-07-28 request through the {name} "
            f"{'costs' if more else 'does not cost'} more than a handshake-era one: "
            f"{modern_name} {modern:+.3f} ms vs {name} {handshake:+.3f} ms "
            f"({modern - handshake:+.3f} ms; higher in {higher} of {len(rounds)} rounds)"
        )


def _peer_report(
    stats: dict[str, Stats], peers: list[PeerSpec], notes: list[str], enabled: bool
) -> None:
    """What each peer is and how it was launched, and mcp-tray's added p50 against theirs."""
    if not enabled:
        print("  peer rows: off (--no-peers)")
        return
    base = stats["direct"]
    measured = [spec for spec in peers if spec.name in stats]
    print(
        "  peer rows: other stdio -> HTTP gateways, each in front of its own echo.py (the same "
        "script on the same interpreter), called with the same client kind as the gateway row "
        f"(mcp SDK {package_version('mcp')} streamable_http_client over httpx2), in the same "
        "blocks, with the same warm-up and call counts:"
    )
    for spec in measured:
        print(f"    {spec.name}: {spec.describe}, {spec.transport}")
        print(f"      $ {shlex.join(spec.command)}")
    for note in notes:
        print(f"    note: {note}")
    if not measured:
        print("    (no peer row this run)")
        return
    added = {spec.name: stats[spec.name].p50 - base.p50 for spec in measured}
    theirs = ", ".join(f"{name} {value:+.3f}" for name, value in added.items())
    both = "both peers" if len(added) == 2 else "the one peer measured"
    print("  mcp-tray vs peers, added p50 over direct:")
    for name in ("gateway", "bridge"):
        ours = stats[name].p50 - base.p50
        below = all(ours < value for value in added.values())
        print(
            f"    {'YES' if below else 'NO ':<3}  mcp-tray {name} added p50 {ours:+.3f} ms is "
            f"{'' if below else 'not '}below {both} ({theirs} ms)"
        )


def report(
    clients: dict[str, Client],
    args: argparse.Namespace,
    seconds: float,
    peers: list[PeerSpec],
    notes: list[str],
    upstream: str | None,
) -> None:
    stats = {name: Stats.of(client.samples) for name, client in clients.items()}
    base = stats["direct"]
    floor = all(name in clients for name in FLOOR_CLIENTS)
    modern = all(name in clients for name in MODERN_CLIENTS)
    names = [
        name
        for name in (
            *CLIENTS,
            *AGGREGATE_CLIENTS,
            *MODERN_CLIENTS,
            *PEER_CLIENTS,
            *FLOOR_CLIENTS,
            *RAW_AGGREGATE_CLIENTS,
        )
        if name in clients
    ]
    transports = {spec.name: spec.transport for spec in peers}
    rotated = names[1:] + names[:1]
    print("mcp-tray gateway latency: tools/call of a trivial echo tool (tests/servers/echo.py)")
    print(
        f"  {args.calls} timed calls per client after {args.warmup} warm-up calls each; "
        f"interleaved in blocks of {args.block} calls per client, the first client rotating "
        f"every round ({', '.join(names)}, then {', '.join(rotated)}, ...)"
    )
    print(
        f"  python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPU(s), {platform.system()} {platform.release()} {platform.machine()}"
    )
    print(f"  run took {seconds:.1f} s")
    child = (
        f"speaks {upstream} (the tray's probe of it at spawn, per /metrics)"
        if upstream
        else "speaks an unknown revision (no mcp_tray_server_protocol for echo in /metrics)"
    )
    print(
        f"  client eras: direct, gateway, bridge, the peers and the raw floor rows speak "
        f"{PROTOCOL_VERSION} (handshake era, initialize first)"
        + (f"; the modern-* rows speak {MODERN_VERSION} (stateless)" if modern else "")
        + f". The tray's echo.py child {child}, for clients of either era."
    )
    print()
    header = (
        f"  {'client':<14} {'calls':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'mean ms':>8}"
        f"   {'+p50 ms':>8} {'+p95 ms':>8}"
    )
    print(header + "   (added over direct)")
    labels = {name: f"peer: {transport}" for name, transport in transports.items()}
    labels |= {name: f"{path} ({AGGREGATE_TOOL})" for name, path in AGGREGATE_PATHS.items()}
    for name in (*CLIENTS, *AGGREGATE_CLIENTS, *PEER_CLIENTS):
        if name not in clients:
            continue
        print(
            _row(
                name,
                len(clients[name].samples),
                stats[name],
                base if name != "direct" else None,
                labels.get(name, ""),
            )
        )
    print()
    _modern_report(clients, stats, header, args.block, modern)
    print()
    _peer_report(stats, peers, notes, args.peers)
    if floor:
        raw = stats["raw-direct"]
        print()
        print(header + "   (added over raw-direct)")
        for name in (*FLOOR_CLIENTS, *RAW_AGGREGATE_CLIENTS):
            if name not in clients:
                continue
            print(
                _row(
                    name,
                    len(clients[name].samples),
                    stats[name],
                    raw if name != "raw-direct" else None,
                    FLOOR_LABELS.get(name, ""),
                )
            )
        hop = stats["raw-hop"].p50 - raw.p50
        tray_raw = stats["raw-gateway"].p50 - raw.p50
        gateway_added = stats["gateway"].p50 - base.p50
        bridge_added = stats["bridge"].p50 - base.p50
        print()
        print(
            "  floor rows: raw clients with no SDK (asyncio streams, json.dumps/json.loads "
            "only). raw-direct talks to its own echo.py over pipes; raw-hop puts one minimal "
            "Python relay process in between (loopback TCP, a line copied each way, no "
            "parsing, no HTTP), so its added time is what any extra process hop costs on this "
            "machine, before any gateway logic; raw-gateway sends the same calls through the "
            "tray's /mcp/echo with a hand-written HTTP/1.1 keep-alive client, so its added time "
            "is the tray's own cost without the SDK's streamable-HTTP client. The bridge puts "
            "two processes in the path (bridge, tray), so its floor is about two hops."
        )
        print(
            f"  split of the gateway's added p50 {gateway_added:+.3f} ms (p50 differences, "
            f"a rough split): one-hop floor {hop:+.3f}, tray above the floor "
            f"{tray_raw - hop:+.3f}, SDK HTTP client over SDK stdio client "
            f"{gateway_added - tray_raw:+.3f}"
        )
        print(
            f"  bridge added p50 {bridge_added:+.3f} ms vs a two-hop floor of about "
            f"{2 * hop:+.3f} ms"
        )
    print()
    print(
        "  CPU per call, ms (user+sys of each process in the chain, from the OS; the chain is "
        "serial, so on a busy small machine the mean wall time is close to the sum):"
    )
    for name in names:
        client = clients[name]
        count = len(client.samples)
        parts = "  ".join(
            f"{role} {seconds / count * 1000:.3f}" for role, seconds in client.cpu.items()
        )
        total = sum(client.cpu.values()) / count * 1000
        print(f"    {name:<14} {parts}  | sum {total:.3f} (mean wall {stats[name].mean:.3f})")
    print()
    print("  where the mean goes (tray /metrics: time inside ManagedServer.request per call):")
    for name in names:
        client = clients[name]
        if not client.through_tray:
            continue
        if client.tray_calls != len(client.samples) or not client.tray_calls:
            print(
                f"    {name:<14} n/a (the tray counted {client.tray_calls} calls, "
                f"the bench made {len(client.samples)})"
            )
            continue
        inside = client.tray_seconds / client.tray_calls * 1000.0
        outside = stats[name].mean - inside
        reference = {"raw": "raw-direct", "modern": "modern-direct"}.get(
            name.split("-")[0], "direct"
        )
        print(
            f"    {name:<14} call path {inside:.3f} ms ({reference} round trip "
            f"{stats[reference].mean:.3f} ms), everything else {outside:.3f} ms"
        )
    print()
    _routing_report(clients, stats, args.block)
    print()
    print(f"  target: added p50 < {TARGET_ADDED_P50_MS:g} ms over the era's direct row")
    targets = [("gateway", "direct"), ("bridge", "direct")]
    if modern:
        targets += [("modern-gateway", "modern-direct"), ("modern-bridge", "modern-direct")]
    for name, reference in targets:
        added_p50 = stats[name].p50 - stats[reference].p50
        verdict = "PASS" if added_p50 < TARGET_ADDED_P50_MS else "MISS"
        print(f"    {verdict}  {name} added p50 {added_p50:+.3f} ms (over {reference})")
    print()
    extra = "".join(
        f" --{flag} {value}"
        for flag, value, default in (
            ("warmup", args.warmup, DEFAULT_WARMUP),
            ("block", args.block, DEFAULT_BLOCK),
        )
        if value != default
    )
    if not args.floor:
        extra += " --no-floor"
    if not args.modern:
        extra += " --no-modern"
    if not args.peers:
        extra += " --no-peers"
    if not args.lists:
        extra += " --no-lists"
    command = f".venv/bin/python bench/gateway.py --calls {args.calls}{extra}"
    print(f"  reproduce: {command}")
    if floor:
        tray_raw = stats["raw-gateway"].p50 - stats["raw-direct"].p50
        figures = {
            "raw_gateway_added_p50_ms": tray_raw,
            "gateway_added_p50_ms": stats["gateway"].p50 - base.p50,
            "sdk_client_added_p50_ms": stats["gateway"].p50 - base.p50 - tray_raw,
            "bridge_added_p50_ms": stats["bridge"].p50 - base.p50,
        }
        record("gateway", command, figures, ROWS)


def _routing_report(clients: dict[str, Client], stats: dict[str, Stats], block: int) -> None:
    """What an aggregate endpoint's routing adds over the server's own endpoint, same client."""
    print(
        f"  routing of the aggregate endpoints (target: < {TARGET_ROUTING_P50_MS:g} ms p50 over "
        f"/mcp/{SERVER}, same client; one echo call named {AGGREGATE_TOOL}):"
    )
    pairs = [(name, "gateway") for name in AGGREGATE_CLIENTS]
    pairs += [(name, "raw-gateway") for name in RAW_AGGREGATE_CLIENTS]
    for name, reference in pairs:
        if name not in clients or reference not in clients:
            continue
        added = stats[name].p50 - stats[reference].p50
        verdict = "PASS" if added < TARGET_ROUTING_P50_MS else "MISS"
        rounds = _rounds_below(clients[name], clients[reference], block)
        print(
            f"    {verdict}  {name} p50 {added:+.3f} ms over {reference} "
            f"(p95 {stats[name].p95 - stats[reference].p95:+.3f} ms; {rounds})"
        )


def _rounds_below(client: Client, reference: Client, block: int) -> str:
    """In how many interleaved rounds the block's median was within the target of the
    reference's block of the same round."""
    rounds = list(
        zip(_block_p50s(client.samples, block), _block_p50s(reference.samples, block), strict=True)
    )
    within = sum(1 for mine, theirs in rounds if (mine - theirs) * 1000 < TARGET_ROUTING_P50_MS)
    return f"within it in {within} of {len(rounds)} rounds"


# ------------------------------------------------------- tools/list through /mcp


@dataclass(frozen=True)
class ListFigures:
    """tools/list of LIST_SERVERS servers of LIST_TOOLS tools each, through ``/mcp``."""

    calls: int
    tools: int
    aggregate: Stats
    aggregate_bytes: int
    one_server: Stats
    one_server_bytes: int
    #: Building the aggregate's view again (after a member's list changed), in-process.
    rebuild: Stats
    #: The aggregate's own work per call, in-process, by profile (routing_in_process).
    routing: dict[str, Stats]


LIST_NAMES: Final = tuple(f"tools-{n:02d}" for n in range(1, LIST_SERVERS + 1))


def _list_tray_document(enabled: int) -> dict[str, Any]:
    """The many-tools servers, the first ``enabled`` of them enabled."""
    return {
        "mcpServers": {
            name: {
                "command": sys.executable,
                "args": [str(MANY_TOOLS_SCRIPT)],
                "env": {"MANY_TOOLS": str(LIST_TOOLS)},
                "disabled": index >= enabled,
            }
            for index, name in enumerate(LIST_NAMES)
        }
    }


async def _timed_lists(raw: RawHttpClient, calls: int) -> tuple[Stats, bytes]:
    body = b""
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        body = await raw.request("tools/list")
        samples.append(time.perf_counter() - started)
    return Stats.of(samples), body


async def _measure_lists(tray: Tray, calls: int) -> ListFigures:
    from core.serving.profile_view import build_view
    from core.settings.config import load_config
    from core.settings.profiles import EVERYTHING
    from core.supervision.catalog import Catalog

    clients = []
    for path in ("/mcp", "/mcp/tools-01"):
        raw = RawHttpClient(f"{tray.url}{path}", tray.token)
        await raw.connect()
        await raw.initialize()
        clients.append(raw)
    try:
        for raw in clients:
            await _timed_lists(raw, DEFAULT_WARMUP)
        aggregate, listed = await _timed_lists(clients[0], calls)
        one, single = await _timed_lists(clients[1], calls)
    finally:
        for raw in clients:
            await raw.aclose()
    tools = json.loads(listed)["result"]["tools"]
    # The same listings in-process: what building the view again costs the tray.
    config = load_config(tray.config)
    catalogs = {}
    for name in config.servers:
        catalog = catalogs[name] = Catalog()
        catalog.known = True
        catalog.lists = {"tools": json.loads(single)["result"]["tools"]}
    rebuilds = []
    for _ in range(max(10, calls // 10)):
        started = time.perf_counter()
        build_view(EVERYTHING, config.servers, catalogs)
        rebuilds.append(time.perf_counter() - started)
    in_process = tray.home / "in-process"
    in_process.mkdir()
    routing = routing_in_process(in_process)
    return ListFigures(
        calls, len(tools), aggregate, len(listed), one, len(single), Stats.of(rebuilds), routing
    )


def routing_in_process(home: Path, calls: int = 20000) -> dict[str, Stats]:
    """The aggregate's own work per tools/call, in-process and without the call itself:
    the profile's view (cached), the name's route, the link's client, the routed request.
    LIST_SERVERS x LIST_TOOLS tools known; ``all`` and a one-tool profile."""
    from core.serving.aggregate import Aggregate
    from core.serving.aggregate_links import Link, Parent
    from core.serving.pipeline import NoReply, Pipeline
    from core.serving.request import Client as SessionClient
    from core.serving.request import Request
    from core.serving.sessions import ClientSession, SessionTable
    from core.settings.config import DEFAULT_MAX_BODY_BYTES, load_config
    from core.settings.paths import Paths
    from core.supervision.supervisor import Supervisor

    class Hooks:
        def session_opened(self, session: ClientSession) -> None:
            pass

        def session_closed(self, session: ClientSession) -> None:
            pass

    document = _list_tray_document(LIST_SERVERS)
    member = LIST_NAMES[2]
    tool = "search_records_07"
    document["profiles"] = {PROFILE: {"servers": [member], "tools": [f"{member}__{tool}"]}}
    (home / "config.json").write_text(json.dumps(document))
    paths = Paths(home / "config", home / "state", home / "logs", home / "run")
    supervisor = Supervisor(load_config(home / "config.json"), paths)
    names = [f"search_records_{n:02d}" for n in range(LIST_TOOLS)]
    for child in supervisor.servers.values():  # as if each had listed (never started)
        child.catalog.known = True
        child.catalog.lists = {"tools": [{"name": n, "inputSchema": {}} for n in names]}
    pipeline = Pipeline(supervisor, SessionTable(lambda event: None), Hooks(), lambda job: None)
    aggregate = Aggregate(pipeline, lambda worker: None, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    params = {"name": f"{member}__{tool}", "arguments": ARGUMENTS}
    figures = {}
    for profile in ("all", PROFILE):
        session = ClientSession(id=profile, server=f"@{profile}", kind="http")
        parent = Parent(session, profile, modern=False, on_lists=lambda parent, kind: None)
        client = SessionClient(session, modern=False)
        link_session = ClientSession(id=f"{profile}.{member}", server=member, kind="http")
        parent.links[member] = Link(parent, member, link_session, pipeline.seat)
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            view = aggregate.view(profile)
            owner, routed = aggregate._route(view, "tools/call", params)
            link = parent.links[owner]
            request = Request(link.client(client), "tools/call", routed, NoReply(), None)
            parent.called(parent.calling(owner, request.reply))
            samples.append(time.perf_counter() - started)
        figures[profile] = Stats.of(samples)
    return figures


def list_bench(home: Path, calls: int) -> ListFigures:
    """A tray of its own with LIST_SERVERS many-tools servers; always stopped."""
    tray = Tray(home, None, document=_list_tray_document(1))
    try:
        tray.start()
        tray.wait_ready(names=LIST_NAMES[:1])
        # Enabled one at a time (a hot reload each): ten SDK servers starting at once on
        # a small busy machine can miss their handshake deadline and be parked.
        for count in range(2, LIST_SERVERS + 1):
            tray.config.write_text(json.dumps(_list_tray_document(count)))
            tray.wait_ready(names=LIST_NAMES[:count])
        return asyncio.run(_measure_lists(tray, calls))
    finally:
        tray.stop()


def list_report(figures: ListFigures) -> None:
    print(
        f"  tools/list through /mcp: {LIST_SERVERS} servers x {LIST_TOOLS} tools "
        f"(tests/servers/many_tools.py), raw HTTP/1.1 client, handshake era, "
        f"{figures.calls} timed calls after {DEFAULT_WARMUP} warm-up calls:"
    )
    tokens = -(-figures.aggregate_bytes // 4)
    for name, stats, size, note in (
        ("/mcp", figures.aggregate, figures.aggregate_bytes, f"{figures.tools} tools"),
        ("/mcp/tools-01", figures.one_server, figures.one_server_bytes, "one server's"),
    ):
        print(
            f"    {name:<14} p50 {stats.p50:.3f} ms  p95 {stats.p95:.3f} ms  "
            f"{size:,} bytes ({note})"
        )
    for profile, stats in figures.routing.items():
        print(
            f"    routing in-process (@{profile}: view, route, link, request; the call itself "
            f"not included): p50 {stats.p50 * 1000:.1f} us  p95 {stats.p95 * 1000:.1f} us"
        )
    print(
        f"    the /mcp answer is about {tokens:,} tokens in a model's context (bytes / 4); "
        f"building the view again after a member's list changed (in-process, "
        f"core.serving.profile_view.build_view): p50 {figures.rebuild.p50:.3f} ms"
    )


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl+C, so every ``finally`` runs and every process is stopped."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    # Internal: the floor's relay process (see _relay).
    parser.add_argument("--relay-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.relay_child is not None:
        asyncio.run(_relay(args.relay_child))
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
    with _sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as home:
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
            cause: BaseException | None = _innermost(exc)
            if isinstance(cause, BenchError):
                # A client's failure is named in a BenchError: the traceback of what it raised.
                cause = cause.__cause__
            if cause is not None and not isinstance(cause, BenchError):
                traceback.print_exception(cause)
            print(f"bench: FAILED: {_one_line(exc)}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
