"""A tiny HTTP/1.1 server on asyncio streams, for the bridge's tests (not a test module).

It listens on 127.0.0.1 port 0; the test supplies the answer to each request
as a coroutine that writes raw bytes, so the test decides the framing, when
each part goes out, whether the connection stays open, and whether the reply
is HTTP at all. It records every request and counts the connections it
accepted and closed, so reuse and retries are seen from the server's side.
"""

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    #: Which accepted connection (0, 1, ...) carried it.
    connection: int = 0

    def json(self) -> Any:
        return json.loads(self.body)


#: Writes the reply to one request; returns False to close the connection after it.
Answer = Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


def answering(data: bytes, *, keep_open: bool = True) -> Answer:
    """The answer that writes the same bytes to every request."""

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        await send(writer, data)
        return keep_open

    return answer


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class RawServer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[Request] = []
        self.accepted = 0
        self.closed = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        """Listen on ``host`` port 0 (over TLS with ``tls``)."""
        self._server = await asyncio.start_server(self._serve, host, 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in self._writers:
            writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        number = self.accepted
        self.accepted += 1
        try:
            await self._requests(reader, writer, number)
        except asyncio.CancelledError:
            pass  # only aclose cancels us; asyncio 3.11's done-callback would log a cancel
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            self.closed += 1

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int
    ) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, OSError):
                return  # OSError: a TLS client that gave up on the handshake, too
            request_line, *header_lines = head.decode("latin-1").split("\r\n")[:-2]
            method, target, _ = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = Request(method, target, headers, body, number)
            self.requests.append(request)
            if not await self.answer(request, writer):
                return
