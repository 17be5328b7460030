"""The floor: what the least a Python gateway could do per call costs on this machine.

bench/scale.py's calls section measures the tray's CPU per call. This bench
measures, with the same lean client (bench/gateway.py's ``RawHttpClient``) and
the same lean child (bench/lean_echo.py), a gateway that does nothing but
the unavoidable: an asyncio protocol per connection parsing HTTP/1.1 with
httptools (uvicorn's parser), the JSON-RPC request parsed and its id
swapped for the child's, one line to the child's stdin, the child's line
parsed and its id swapped back, and a Content-Length response. No token
check, no sessions beyond an id, no supervision, retry, breaker, timeout,
cancellation, progress, metrics or logs: every feature of the tray is
missing, so what it costs is the floor under the tray's figure, the cost
of a Python event loop, a parser, JSON and four system calls per call.

Run: .venv/bin/python bench/floor.py [--sessions 1,8,32,64] [--seconds 8]
(``--serve PORT`` is the gateway itself, started by the bench).
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httptools
import psutil

from bench.harness.clients import RawHttpClient
from bench.harness.files import LEAN_ECHO
from bench.harness.records import Row, record
from bench.harness.stats import percentile

#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS: Final = (
    Row(
        "the floor: a bare Python gateway's CPU per call, 32 sessions",
        "(for scale: what the tray's figure sits on)",
        "{cpu_per_call_ms:.3f} ms, {calls_per_second:,.0f} calls/s (httptools, json, one "
        "line to the child and back; no feature of the tray)",
    ),
)
RECORDED_SESSIONS: Final = 32

SESSION: Final = "floor-session"


class Child(asyncio.SubprocessProtocol):
    """The lean echo child: requests go out with our ids, replies come back to their waiter."""

    def __init__(self) -> None:
        self.stdin: asyncio.WriteTransport | None = None
        self.pending: dict[int, tuple[Connection, Any]] = {}
        self.ids = itertools.count(1)
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        self.stdin = stdin

    def send(self, connection: "Connection", message: dict[str, Any]) -> None:
        own = next(self.ids)
        self.pending[own] = (connection, message["id"])
        message["id"] = own
        assert self.stdin is not None
        self.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        lines = (self.buffer + data).split(b"\n")
        self.buffer = lines.pop()
        for line in lines:
            reply = json.loads(line)
            connection, client_id = self.pending.pop(reply["id"])
            reply["id"] = client_id
            connection.respond(200, json.dumps(reply, separators=(",", ":")).encode())


class Connection(asyncio.Protocol):
    child: Child

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.body = []

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        message = json.loads(b"".join(self.body))
        if "id" not in message:
            self.respond(202, b"")  # a notification: nothing to relay
        else:
            self.child.send(self, message)  # initialize too: the child's own answer

    def respond(self, status: int, body: bytes) -> None:
        assert self.transport is not None
        reason = b"OK" if status == 200 else b"Accepted"
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nmcp-session-id: %s\r\n"
            b"content-length: %d\r\n\r\n%s" % (status, reason, SESSION.encode(), len(body), body)
        )


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    _, child = await loop.subprocess_exec(Child, sys.executable, str(LEAN_ECHO))
    Connection.child = child
    server = await loop.create_server(Connection, "127.0.0.1", port, backlog=128)
    async with server:
        await server.serve_forever()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run_calls(
    port: int, sessions: int, seconds: float, process: psutil.Process
) -> tuple[str, dict[str, float]]:
    clients = [RawHttpClient(f"http://127.0.0.1:{port}/mcp/echo", "-") for _ in range(sessions)]
    for client in clients:
        await client.connect()
        await client.initialize()
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def loop_calls(client: RawHttpClient) -> None:
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await client.call()
            latencies.append(time.perf_counter() - started)

    for client in clients:  # warm-up
        await client.call()
    cpu = process.cpu_times()
    wall = time.perf_counter()
    await asyncio.gather(*(loop_calls(client) for client in clients))
    wall = time.perf_counter() - wall
    after = process.cpu_times()
    used = (after.user - cpu.user) + (after.system - cpu.system)
    for client in clients:
        await client.aclose()
    calls = len(latencies)
    figures = {"cpu_per_call_ms": used / calls * 1000, "calls_per_second": calls / wall}
    line = (
        f"{sessions:>10} {calls / wall:>10,.0f} {used / calls * 1000:>13.3f} ms "
        f"{used / wall:>8.0%} {percentile(latencies, 0.5) * 1000:>8.3f}"
    )
    return line, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sessions", default="1,8,32,64")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    if args.serve is not None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(args.serve))
        return
    port = free_port()
    gateway = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            time.sleep(0.02)
        process = psutil.Process(gateway.pid)
        print(f"bench/floor.py on {psutil.cpu_count()} CPUs, python {sys.version.split()[0]}")
        print("  sessions    calls/s  gateway CPU/call  CPU  p50 ms")
        kept: dict[str, float] | None = None
        for sessions in (int(n) for n in args.sessions.split(",")):
            line, figures = asyncio.run(run_calls(port, sessions, args.seconds, process))
            print(line, flush=True)
            if sessions == RECORDED_SESSIONS:
                kept = figures
        command = (
            f".venv/bin/python bench/floor.py --sessions {args.sessions} --seconds {args.seconds:g}"
        )
        print(f"reproduce: {command}")
        if kept is not None:
            record("floor", command, kept, ROWS)
    finally:
        gateway.terminate()
        gateway.wait(10)


if __name__ == "__main__":
    main()
