"""Part 2, the flood: connections without the token held open and reopened, while
the status is timed and a bridge child is killed.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import argparse
import asyncio
import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psutil

from bench.harness.files import ECHO_SCRIPT
from bench.harness.processes import children_running
from bench.harness.tray import SERVER, server_entry, tray_cli_async
from bench.suites.abuse.constants import (
    CLI_STATUS_EVERY,
    CONNECT_SECONDS,
    FLOOD_KINDS,
    HALF_HEAD,
    PROBE_EVERY,
    PROBE_SECONDS,
    READY_SECONDS,
    TRICKLED_HEAD,
)
from bench.suites.abuse.tray import Tray
from core.serving.http.http_guard import MAX_CONNECTIONS, connection_cap


@dataclass
class Conn:
    kind: str
    #: Seconds from the flood's start.
    opened: float
    connected: bool = False
    #: Seconds after ``opened`` that the server closed it (None: it did not).
    closed_after: float | None = None
    #: eof, reset, connect failed: ..., held to the end.
    how: str = ""
    received: bytes = b""


@dataclass
class Probe:
    at: float
    seconds: float | None
    error: str = ""
    state: str = ""
    generation: int = 0


@dataclass
class FloodFigures:
    conns: list[Conn] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    cli_probes: list[tuple[float, float, int]] = field(default_factory=list)
    fds: list[tuple[float, int]] = field(default_factory=list)
    fds_before: int = 0
    fds_after: int = 0
    cap: int = 0
    tray_nofile: int = 0
    hold: float = 0.0
    reopen_rate: int = 1
    #: Seconds from the probes' start to the flood's.
    start: float = 0.0
    burst_seconds: float = 0.0
    kill_at: float | None = None
    killed: list[int] = field(default_factory=list)
    generation_before: int = 0
    ready_after: float | None = None
    new_pid: int = 0
    states_seen: list[str] = field(default_factory=list)
    bench_nofile: int = 0


async def feed(kind: str, writer: asyncio.StreamWriter) -> None:
    """What a connection of ``kind`` sends (never the token)."""
    if kind == "idle":
        return
    if kind == "half-head":
        writer.write(HALF_HEAD)
        await writer.drain()
        return
    if kind == "trickle-head":
        for index in range(len(TRICKLED_HEAD)):
            writer.write(TRICKLED_HEAD[index : index + 1])
            await writer.drain()
            await asyncio.sleep(1.0)
        return
    writer.write(TRICKLED_HEAD)
    await writer.drain()
    while True:
        await asyncio.sleep(1.0)
        writer.write(b"x")
        await writer.drain()


async def read_until_closed(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    received = b""
    try:
        while True:
            data = await reader.read(4096)
            if not data:
                return "eof", received
            received = (received + data)[:200]
    except (ConnectionResetError, BrokenPipeError):
        return "reset", received


async def attack(conn: Conn, port: int, zero: float, stop: asyncio.Event) -> None:
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), CONNECT_SECONDS
        )
    except (OSError, TimeoutError) as exc:
        conn.how = f"connect failed: {type(exc).__name__} {exc}"[:120]
        return
    conn.connected = True
    feeder = asyncio.create_task(feed(conn.kind, writer))
    reading = asyncio.create_task(read_until_closed(reader))
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if reading.done():
            conn.closed_after = time.perf_counter() - zero - conn.opened
            conn.how, conn.received = reading.result()
        else:
            conn.how = "held to the end"
    finally:
        for task in (feeder, reading, stopping):
            task.cancel()
        await asyncio.gather(feeder, reading, stopping, return_exceptions=True)
        writer.transport.abort()


async def probe_loop(
    tray: Tray, zero: float, stop: asyncio.Event, figures: FloodFigures, process: psutil.Process
) -> None:
    """GET /api/v1/status on a new connection every PROBE_EVERY, and the tray's fds."""
    limits = httpx2.Limits(max_keepalive_connections=0)
    async with httpx2.AsyncClient(
        base_url=tray.url,
        headers={"Authorization": f"Bearer {tray.token}"},
        timeout=httpx2.Timeout(PROBE_SECONDS),
        limits=limits,
    ) as fresh:
        while not stop.is_set():
            sent = time.perf_counter()
            probe = Probe(sent - zero, None)
            try:
                reply = await asyncio.wait_for(fresh.get("/api/v1/status"), PROBE_SECONDS)
                if reply.status_code == 200:
                    probe.seconds = time.perf_counter() - sent
                    entry = server_entry(reply.json(), SERVER)
                    probe.state = str(entry.get("state"))
                    probe.generation = int(entry.get("generation") or 0)
                else:
                    probe.error = f"HTTP {reply.status_code}"
            except (httpx2.HTTPError, TimeoutError, ValueError) as exc:
                probe.error = f"{type(exc).__name__} {exc}"[:120]
            figures.probes.append(probe)
            with contextlib.suppress(psutil.Error):
                figures.fds.append((time.perf_counter() - zero, process.num_fds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    stop.wait(), max(0.0, PROBE_EVERY - (time.perf_counter() - sent))
                )


async def cli_status(home: Path) -> int:
    """One real ``mcp-tray status --json`` on ``home`` (bounded at 30 s); its exit code."""
    code, _ = await tray_cli_async(home, "status", "--json")
    return code


async def cli_status_loop(
    tray: Tray, zero: float, stop: asyncio.Event, figures: FloodFigures
) -> None:
    """The real ``mcp-tray status --json`` every CLI_STATUS_EVERY (interpreter start included)."""
    while not stop.is_set():
        sent = time.perf_counter()
        code = await cli_status(tray.home)
        figures.cli_probes.append((sent - zero, time.perf_counter() - sent, code))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                stop.wait(), max(0.0, CLI_STATUS_EVERY - (time.perf_counter() - sent))
            )


async def kill_once(tray: Tray, zero: float, delay: float, figures: FloodFigures) -> None:
    """kill -9 the echo child after ``delay``; then until status shows it ready again."""
    await asyncio.sleep(delay)
    before = server_entry(await tray.status(), SERVER)
    figures.generation_before = int(before.get("generation") or 0)
    pids = await asyncio.to_thread(children_running, tray.pid, ECHO_SCRIPT)
    killed_at = time.perf_counter()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    figures.kill_at, figures.killed = killed_at - zero, pids
    while time.perf_counter() - killed_at < READY_SECONDS:
        with contextlib.suppress(httpx2.HTTPError, ValueError):
            entry = server_entry(await tray.status(), SERVER)
            state = str(entry.get("state"))
            if not figures.states_seen or figures.states_seen[-1] != state:
                figures.states_seen.append(state)
            if state == "ready" and int(entry.get("generation") or 0) > figures.generation_before:
                figures.ready_after = time.perf_counter() - killed_at
                figures.new_pid = int(entry.get("pid") or 0)
                return
        await asyncio.sleep(0.05)


async def flood(tray: Tray, args: argparse.Namespace, figures: FloodFigures) -> None:
    process = psutil.Process(tray.pid)
    figures.fds_before = process.num_fds()
    with contextlib.suppress(psutil.Error, AttributeError):
        figures.tray_nofile = process.rlimit(psutil.RLIMIT_NOFILE)[0]
    figures.cap = connection_cap(MAX_CONNECTIONS, figures.tray_nofile or 1024)
    figures.hold = args.hold
    figures.reopen_rate = args.reopen_rate
    zero = time.perf_counter()
    stop_probes, stop_flood = asyncio.Event(), asyncio.Event()
    probes = asyncio.create_task(probe_loop(tray, zero, stop_probes, figures, process))
    cli_probes = asyncio.create_task(cli_status_loop(tray, zero, stop_probes, figures))
    await asyncio.sleep(2.0)  # a baseline before the flood

    kinds = itertools.cycle(FLOOD_KINDS)
    tasks: set[asyncio.Task[None]] = set()

    def open_one() -> None:
        conn = Conn(next(kinds), time.perf_counter() - zero)
        figures.conns.append(conn)
        task = asyncio.create_task(attack(conn, tray.port, zero, stop_flood))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    flood_began = time.perf_counter()
    figures.start = flood_began - zero
    killer = asyncio.create_task(kill_once(tray, zero, args.hold / 2, figures))
    while len(figures.conns) < args.flood:
        for _ in range(min(50, args.flood - len(figures.conns))):
            open_one()
        await asyncio.sleep(0.05)
    figures.burst_seconds = time.perf_counter() - flood_began
    tick = 0.1
    while time.perf_counter() - flood_began < args.hold:
        missing = args.flood - len(tasks)
        for _ in range(min(missing, max(1, int(args.reopen_rate * tick)))):
            open_one()
        await asyncio.sleep(tick)
    stop_flood.set()
    await asyncio.gather(*list(tasks), return_exceptions=True)
    await killer
    await asyncio.sleep(2.0)  # after the flood
    stop_probes.set()
    await asyncio.gather(probes, cli_probes)
    with contextlib.suppress(psutil.Error):
        figures.fds_after = process.num_fds()
