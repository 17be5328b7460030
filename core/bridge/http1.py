"""A minimal HTTP/1.1 client on asyncio streams, for the bridge's hop to the gateway.

The bridge sits in front of every call a stdio-only client makes, so its
hop must cost microseconds, not the ~2.6 ms of CPU a general HTTP client
spends per request on a small machine (bench/gateway.py). It only ever
talks to mcp-tray's own gateway on 127.0.0.1: keep-alive connections from a
small pool, bodies by Content-Length or chunked, no redirects, no TLS.
"""

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from core.base.errors import HttpError

#: Idle keep-alive connections kept for reuse.
POOL_SIZE: Final = 8
MAX_HEADER_BYTES: Final = 64 * 1024


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    _connection: "Connection"
    _remaining: int | None = None
    _chunked: bool = False
    _done: bool = False
    _keep_alive: bool = field(default=True)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (SSE events come chunk by chunk)."""
        reader = self._connection.reader
        try:
            if self._chunked:
                while True:
                    size_line = await reader.readline()
                    if not size_line:
                        raise HttpError("connection closed inside a chunked body")
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        await reader.readline()  # the blank line after the last chunk
                        break
                    data = await reader.readexactly(size)
                    await reader.readexactly(2)
                    yield data
            elif self._remaining is not None:
                while self._remaining > 0:
                    data = await reader.read(min(self._remaining, 65536))
                    if not data:
                        raise HttpError("connection closed inside the body")
                    self._remaining -= len(data)
                    yield data
            else:
                self._keep_alive = False
                while data := await reader.read(65536):
                    yield data
            self._done = True
        except (asyncio.IncompleteReadError, ValueError, ConnectionError) as exc:
            self._keep_alive = False
            raise HttpError(str(exc)) from None

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    @property
    def reusable(self) -> bool:
        return self._done and self._keep_alive


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> "Connection":
        try:
            reader, writer = await asyncio.open_connection(host, port, limit=MAX_HEADER_BYTES * 16)
        except OSError as exc:
            raise HttpError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()

    async def send(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> Response:
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{key}: {value}" for key, value in headers.items()]
        lines.append(f"content-length: {len(body)}")
        try:
            self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await self.writer.drain()
            status_line = await self.reader.readline()
            if not status_line:
                raise HttpError("the connection closed before a reply", unanswered=True)
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
                raise HttpError(f"not an HTTP/1.1 reply: {status_line[:80]!r}")
            reply_headers: dict[str, str] = {}
            while True:
                line = await self.reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                key, _, value = line.decode("latin-1").partition(":")
                reply_headers[key.strip().lower()] = value.strip()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise HttpError(str(exc), unanswered=True) from None
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise HttpError(str(exc)) from None
        length = reply_headers.get("content-length")
        response = Response(int(parts[1]), reply_headers, self)
        if reply_headers.get("transfer-encoding", "").lower() == "chunked":
            response._chunked = True
        elif length is not None:
            response._remaining = int(length)
        response._keep_alive = reply_headers.get("connection", "").lower() != "close"
        if response._remaining == 0:
            response._done = True
        return response


class Pool:
    """Keep-alive connections to one host:port; concurrent requests get their own."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._idle: list[Connection] = []

    @contextlib.asynccontextmanager
    async def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> AsyncIterator[Response]:
        headers = {"host": f"{self.host}:{self.port}", **headers}
        reused = bool(self._idle)
        connection = self._idle.pop() if reused else await Connection.open(self.host, self.port)
        try:
            response = await connection.send(method, target, headers, body)
        except HttpError as exc:
            connection.close()
            if not (reused and exc.unanswered):
                raise
            # The server had closed this idle keep-alive connection before
            # reading anything: nothing was processed, so one fresh try is safe.
            connection = await Connection.open(self.host, self.port)
            response = await connection.send(method, target, headers, body)
        try:
            yield response
        finally:
            if response.reusable and len(self._idle) < POOL_SIZE:
                self._idle.append(connection)
            else:
                connection.close()

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
