"""A minimal HTTP/1.1 client on asyncio streams: the bridge's hop to the gateway, and the
tray's hop to a remote server (core.supervision.remote_wire).

Both sit in front of every call they carry, so the hop must cost microseconds,
not the CPU a general HTTP client spends per request on a small machine
(~2.6 ms for the bridge, bench/gateway.py; ~40 % of the tray's own time on a
remote call, bench/remote_latency.py). Keep-alive connections from a small
pool, bodies by Content-Length or chunked, TLS where asked, no redirects, no
proxies (a remote behind a proxy keeps the general client).
"""

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from core.base.errors import HttpError
from core.platform.sockets import has_input

#: Idle keep-alive connections kept for reuse.
POOL_SIZE: Final = 8
#: A connection idle this long is not reused: the tray's server drops them
#: after 75 s, and one dropped just as a request goes out would lose it (a
#: remote that drops them sooner is seen by ``Connection.stale``).
MAX_IDLE_SECONDS: Final = 60.0
MAX_HEADER_BYTES: Final = 64 * 1024
#: How long connecting (and the TLS handshake) may take, by default.
CONNECT_SECONDS: Final = 5.0
#: Methods whose requests carry a body, so a Content-Length even when it is empty.
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})


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
        except (asyncio.IncompleteReadError, ValueError, OSError) as exc:
            self._keep_alive = False
            raise HttpError(str(exc) or type(exc).__name__) from None

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    @property
    def reusable(self) -> bool:
        return self._done and self._keep_alive


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
        seconds: float = CONNECT_SECONDS,
    ) -> "Connection":
        where = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host,
                    port,
                    limit=MAX_HEADER_BYTES * 16,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                ),
                seconds,
            )
        except TimeoutError:
            raise HttpError(
                f"cannot connect to {where}: no answer within {seconds:g} s", never_sent=True
            ) from None
        except ssl.SSLError as exc:
            raise HttpError(
                f"cannot connect to {where}: TLS failed: {exc.reason or exc}", never_sent=True
            ) from None
        except OSError as exc:
            raise HttpError(
                f"cannot connect to {where}: {exc.strerror or exc}", never_sent=True
            ) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()

    def stale(self) -> bool:
        """Whether this idle connection is closed, closing, or has something to read."""
        if self.reader.at_eof() or self.writer.is_closing():
            return True
        sock = self.writer.get_extra_info("socket")
        if sock is None:
            return True
        return has_input(sock.fileno())

    async def send(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> Response:
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{key}: {value}" for key, value in headers.items()]
        if body or method in _WITH_BODY:
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
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            # OSError: a TLS connection's failures too; ValueError: a head line past the limit.
            raise HttpError(str(exc) or type(exc).__name__) from None
        length = reply_headers.get("content-length")
        try:
            response = Response(int(parts[1]), reply_headers, self)
            if reply_headers.get("transfer-encoding", "").lower() == "chunked":
                response._chunked = True
            elif length is not None:
                response._remaining = int(length)
        except ValueError:
            raise HttpError(
                f"a malformed HTTP reply: {status_line[:80]!r}, length {length!r}"
            ) from None
        response._keep_alive = reply_headers.get("connection", "").lower() != "close"
        if response._remaining == 0:
            response._done = True
        return response


class Pool:
    """Keep-alive connections to one host:port; concurrent requests get their own."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        # An IPv6 address is bracketed in the Host header (RFC 9110 §7.2).
        self._authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._idle: list[Connection] = []

    @contextlib.asynccontextmanager
    async def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> AsyncIterator[Response]:
        headers = {"host": self._authority, **headers}
        connection = self._idle_connection() or await Connection.open(
            self.host, self.port, self.tls
        )
        try:
            response = await connection.send(method, target, headers, body)
        except BaseException:
            # Never sent again: the server may have read it (and acted on it).
            connection.close()
            raise
        try:
            yield response
        finally:
            if response.reusable and len(self._idle) < POOL_SIZE:
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            else:
                connection.close()

    def _idle_connection(self) -> Connection | None:
        """A kept connection the server has not closed meanwhile.

        A request is never sent twice (the server may have read it), so a
        connection the server dropped while idle must be noticed before use:
        an idle connection with something to read (an EOF the loop has not
        seen yet, or bytes no request asked for) is not used, and neither is
        one idle nearly as long as the server keeps them. Asking the socket
        costs one poll; waiting for the loop to see it cost a turn of the loop
        on every call.
        """
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            fresh = now - connection.idle_since < MAX_IDLE_SECONDS
            if fresh and not connection.stale():
                return connection
            connection.close()
        return None

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
