"""Clients written by hand, so that a bench measures the tray and not an SDK: newline
JSON-RPC over a stream, streamable HTTP over one kept-alive HTTP/1.1 connection,
and the echo call they all time.
"""

import asyncio
import itertools
import json
import time
from typing import Any, Final
from urllib.parse import urlsplit

from mcp.types import TextContent

from bench.harness.errors import BenchError
from bench.harness.processes import close_writer


def result_text(result: object) -> str:
    content = getattr(result, "content", None) or []
    return "".join(block.text for block in content if isinstance(block, TextContent))


TOOL: Final = "echo"


ARGUMENTS: Final = {"text": "hi"}


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
            await close_writer(self.writer)

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


async def timed_call(client: RawHttpClient) -> float:
    """One echo call's seconds, from the request sent to its answer read."""
    began = time.perf_counter()
    answer = await client.call()
    took = time.perf_counter() - began
    if "result" not in answer or answer["result"].get("isError"):
        raise BenchError(f"echo answered {answer!r}")
    return took
