"""The floor of one extra process hop: ``--relay-child``, a line-copying TCP relay
in front of its own echo.py, and the ``Relay`` that runs it.
"""

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from bench.harness.errors import BenchError
from bench.harness.files import BENCH, ROOT
from bench.harness.processes import kill_group, spawn_echo, stop_child
from bench.harness.tray import STOP_SECONDS
from bench.suites.gateway.constants import RELAY_READY_SECONDS


async def run_relay(portfile: Path) -> None:
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
        child = await spawn_echo()
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
            await stop_child(child)
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
            await stop_child(child)


class Relay:
    """The ``--relay-child`` process; always stopped by ``stop``."""

    def __init__(self, home: Path, stderr: IO[str]) -> None:
        self.portfile = home / "relay.port"
        self.stderr = stderr
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(BENCH / "gateway.py"), "--relay-child", str(self.portfile)],
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
                kill_group(process.pid, hard=True)
            process.wait(5)
