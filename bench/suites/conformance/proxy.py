"""The header-adding proxy: HTTP/1.1 relayed byte for byte, with the tray's bearer
token added, so the suite reaches the tray as it reaches the direct server.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import asyncio
import contextlib
from typing import Final
from urllib.parse import urlsplit

from bench.harness.errors import BenchError

_HEAD_END: Final = b"\r\n\r\n"


_MAX_HEAD: Final = 64 * 1024


_PIECE: Final = 64 * 1024


class _Downstream:
    """The client side of one proxied connection; ``pending`` is a byte read early."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.pending = b""


def _split_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head[: -len(_HEAD_END)].decode("latin-1").split("\r\n")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name, value.strip()))
    return lines[0], headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    return next((value for key, value in headers if key.lower() == name), None)


def _is_chunked(headers: list[tuple[str, str]]) -> bool:
    return "chunked" in (_header(headers, "transfer-encoding") or "").lower()


async def _read_head(reader: asyncio.StreamReader, prefix: bytes = b"") -> bytes | None:
    """One HTTP head up to and including the blank line; None on a clean EOF."""
    try:
        return prefix + await reader.readuntil(_HEAD_END)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial and not prefix:
            return None
        raise
    except asyncio.LimitOverrunError as exc:
        raise BenchError("proxy: an HTTP head over 64 KiB") from exc


async def _copy_exactly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        piece = await reader.read(min(n, _PIECE))
        if not piece:
            raise ConnectionError("the peer closed mid-body")
        writer.write(piece)
        await writer.drain()
        n -= len(piece)


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body, each chunk passed on as it arrives (SSE events stay live)."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        writer.write(size_line)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:  # trailers, then the blank line
                line = await reader.readuntil(b"\r\n")
                writer.write(line)
                if line == b"\r\n":
                    break
            await writer.drain()
            return
        await _copy_exactly(reader, writer, size + 2)


async def _copy_to_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while piece := await reader.read(_PIECE):
        writer.write(piece)
        await writer.drain()


class HeaderProxy:
    """A loopback HTTP/1.1 reverse proxy that adds ``Authorization: Bearer <token>``.

    One upstream connection per client connection; requests on a connection
    are handled in turn (the suite's client does not pipeline). Heads are
    forwarded with their header order and case; bodies byte for byte, chunk
    by chunk, so streaming responses are not buffered. A client that hangs
    up during a response (an SSE stream it is done with) has its upstream
    connection closed too, as the gateway would see without the proxy.
    """

    def __init__(self, upstream: str, token: str) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise BenchError(f"proxy: cannot proxy to {upstream!r}")
        self.host = parts.hostname
        self.port = parts.port
        self.token = token
        self.listen_port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self.listen_port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _rewrite(self, head: bytes) -> bytes:
        """The request head with the token added; every other line as it came.

        Authorization is replaced, and a Host or Origin naming this proxy is
        made to name the gateway; all other header lines keep their bytes
        (case, order, whitespace), so what the gateway parses is what the
        suite sent.
        """
        own = {f"127.0.0.1:{self.listen_port}", f"localhost:{self.listen_port}"}
        upstream = f"{self.host}:{self.port}"
        lines = head[: -len(_HEAD_END)].decode("latin-1").split("\r\n")
        out = [lines[0]]
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key, value = name.strip().lower(), value.strip()
            if key == "authorization":
                continue
            if key == "host" and value.lower() in own:
                line = f"{name}: {upstream}"
            elif key == "origin" and value.lower().removeprefix("http://") in own:
                line = f"{name}: http://{upstream}"
            out.append(line)
        out.append(f"Authorization: Bearer {self.token}")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        client = _Downstream(reader, writer)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                head = await _read_head(reader, client.pending)
                client.pending = b""
                if head is None:
                    return
                start, headers = _split_head(head)
                method = start.split(" ", 1)[0].upper()
                if upstream is None:
                    upstream = await asyncio.open_connection(self.host, self.port)
                up_reader, up_writer = upstream
                up_writer.write(self._rewrite(head))
                if _is_chunked(headers):
                    await _copy_chunked(reader, up_writer)
                elif length := int(_header(headers, "content-length") or 0):
                    await _copy_exactly(reader, up_writer, length)
                await up_writer.drain()
                keep = await self._response(client, up_reader, method)
                wants_close = (_header(headers, "connection") or "").lower() == "close"
                if not keep or wants_close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        except asyncio.CancelledError:
            # close() or shutdown: a leaf task, so ending quietly is right (asyncio's
            # start_server callback would otherwise log the cancellation as an error).
            return
        finally:
            self._tasks.discard(task)
            for stream_writer in (writer, upstream[1] if upstream else None):
                if stream_writer is not None:
                    stream_writer.close()
                    with contextlib.suppress(Exception):
                        await stream_writer.wait_closed()

    async def _response(
        self, client: _Downstream, up_reader: asyncio.StreamReader, method: str
    ) -> bool:
        """Pass one response on; False when either connection must close after it."""
        while True:
            head = await _read_head(up_reader)
            if head is None:
                return False
            status_line, headers = _split_head(head)
            client.writer.write(head)
            await client.writer.drain()
            status = int(status_line.split(" ", 2)[1])
            if not (100 <= status < 200):
                break
        if method == "HEAD" or status in (204, 304):
            body = None
        elif _is_chunked(headers):
            body = _copy_chunked(up_reader, client.writer)
        elif (length := _header(headers, "content-length")) is not None:
            body = _copy_exactly(up_reader, client.writer, int(length))
        else:
            body = _copy_to_eof(up_reader, client.writer)
        if body is not None:
            copying = asyncio.ensure_future(body)
            hangup = asyncio.ensure_future(client.reader.read(1))
            try:
                done, _ = await asyncio.wait({copying, hangup}, return_when=asyncio.FIRST_COMPLETED)
                if copying not in done:
                    early = hangup.result()
                    if not early:  # the client hung up mid-response
                        return False
                    client.pending = early  # a pipelined request: keep its first byte
                    await copying
                copying.result()
            finally:
                for future in (copying, hangup):
                    future.cancel()
                await asyncio.gather(copying, hangup, return_exceptions=True)
            if hangup.done() and not hangup.cancelled() and hangup.exception() is None:
                client.pending = client.pending or hangup.result()
            if _header(headers, "content-length") is None and not _is_chunked(headers):
                return False
        return (_header(headers, "connection") or "").lower() != "close"
