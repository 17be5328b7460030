"""The scale bench's clients: a pool of raw sessions, and the probe process
(bench/probe.py) that times calls at a steady pace.
"""

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator

from bench.harness.clients import RawHttpClient
from bench.harness.errors import BenchError
from bench.harness.files import PROBE_SCRIPT
from bench.harness.tray import Tray
from bench.suites.scale.constants import PROBE_INTERVAL_SECONDS, WARMUP_CALLS


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
            str(PROBE_SCRIPT),
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
