"""The bridge's relay: stdin lines to POSTs on the gateway, replies to stdout lines.

Each message is POSTed as is to ``/mcp/NAME`` on the running tray, and
whatever comes back (a JSON body, or SSE events: progress, a sampling
request, then the answer) is written back line by line. The standalone GET
stream carries notifications not tied to a request. Messages are relayed as
bytes, never re-modelled, so nothing the client or server says is lost in
translation.
"""

import asyncio
import contextlib
import json
from collections.abc import Coroutine
from typing import Any, Final
from urllib.parse import urlsplit

from core.base.errors import HttpError
from core.bridge.http1 import Pool, Response
from core.protocol.eras import (
    METHOD_HEADER,
    NAME_BEARING_METHODS,
    NAME_HEADER,
    encode_header,
    request_version,
)
from core.protocol.headers import PROTOCOL_HEADER, SEQUENCE_HEADER, SESSION_HEADER
from core.protocol.jsonrpc import HANDSHAKE_PROTOCOL_VERSIONS

ACCEPT: Final = "application/json, text/event-stream"
JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"

#: At stdin EOF, how long requests already sent may still deliver answers.
DRAIN_SECONDS: Final = 2.0
#: At exit, how long the DELETE that ends the gateway session may take.
DELETE_SECONDS: Final = 2.0
#: After the standalone GET stream drops, how long before it is reopened.
GET_STREAM_RETRY_SECONDS: Final = 1.0


class Relay:
    """Stdin lines to POSTs, replies (JSON or SSE events) to stdout lines."""

    def __init__(self, url: str, headers: dict[str, str], out: asyncio.StreamWriter | Any) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self._pool = Pool(parts.hostname or "127.0.0.1", parts.port or 80)
        self._headers = headers
        self._out = out
        self._write_lock = asyncio.Lock()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._get_stream: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: Set once the initialize answer is in (None before any initialize).
        self._initialized: asyncio.Event | None = None
        #: The number of the last line read that belongs to the session.
        self._seq = 0
        #: 2026-07-28 requests in flight, by id, so a cancellation can close their stream.
        self._stateless_calls: dict[object, asyncio.Task[None]] = {}

    async def aclose(self) -> None:
        if self._get_stream is not None:
            self._get_stream.cancel()
        if self._tasks:
            # Let answers already on their way reach the client.
            await asyncio.wait(list(self._tasks), timeout=DRAIN_SECONDS)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(
            *self._tasks, *([self._get_stream] if self._get_stream else []), return_exceptions=True
        )
        if self.session_id is not None:
            with contextlib.suppress(HttpError, OSError, TimeoutError):
                async with asyncio.timeout(DELETE_SECONDS):
                    async with self._pool.request(
                        "DELETE", self.path, self._session_headers()
                    ) as reply:
                        await reply.read()
        self._pool.close()

    def _session_headers(self) -> dict[str, str]:
        headers = {
            **self._headers,
            "accept": ACCEPT,
            "content-type": JSON_TYPE,
        }
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version:
            headers[PROTOCOL_HEADER] = self.protocol_version
        return headers

    async def emit(self, data: bytes) -> None:
        async with self._write_lock:
            self._out.write(data.rstrip(b"\n") + b"\n")
            await self._out.drain()

    def submit(self, line: bytes) -> None:
        """Relay one stdin line; lines are numbered in the order they were read."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self._spawn(
                self.emit(
                    _error(None, -32700, "Parse error: the bridge got a line that is not JSON")
                )
            )
            return
        version = request_version(message.get("params")) if isinstance(message, dict) else None
        if isinstance(version, str) and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            self._stateless(line.strip(), message, version)
            return
        is_initialize = isinstance(message, dict) and message.get("method") == "initialize"
        seq: int | None = None
        if is_initialize:
            # Whatever the client sends before the answer waits for it: only
            # then is there a session to send it in (a ping included).
            self._initialized = asyncio.Event()
        else:
            self._seq += 1
            seq = self._seq
        self._spawn(self._forward(line.strip(), message, seq, self._initialized))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _stateless(self, line: bytes, message: dict[str, Any], version: str) -> None:
        """A 2026-07-28 message: its own POST, headers from its body, no session."""
        method = message.get("method")
        if method == "notifications/cancelled":
            # In this era a client cancels over HTTP by closing the request's stream.
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            task = self._stateless_calls.get(_key(request_id))
            if task is not None:
                task.cancel()
            return
        headers = {**self._headers, "accept": ACCEPT, "content-type": JSON_TYPE}
        headers[PROTOCOL_HEADER] = version
        if isinstance(method, str):
            headers[METHOD_HEADER] = method
            named = (message.get("params") or {}).get(NAME_BEARING_METHODS.get(method, ""))
            if isinstance(named, str):
                headers[NAME_HEADER] = encode_header(named)
        request_id = message.get("id") if isinstance(method, str) else None
        task = self._spawn(self._post(line, headers, request_id))
        if request_id is not None:
            key = _key(request_id)
            self._stateless_calls[key] = task
            task.add_done_callback(lambda _: self._stateless_calls.pop(key, None))

    async def _post(self, line: bytes, headers: dict[str, str], request_id: Any) -> None:
        try:
            async with self._pool.request("POST", self.path, headers, line) as reply:
                if reply.headers.get("content-type", "").startswith(SSE_TYPE):
                    await self._relay_events(reply)
                    return
                body = await reply.read()
                if reply.status == 202 or request_id is None:
                    return
                if body and reply.status in (200, 400, 404):
                    parsed = _json_or_none(body)
                    if isinstance(parsed, dict) and parsed.get("id") == request_id:
                        await self.emit(body)
                        return
                await self.emit(_answer_for(request_id, reply.status, body))
        except (HttpError, OSError) as exc:
            if request_id is not None:
                await self.emit(
                    _error(
                        request_id,
                        -32603,
                        f"mcp-tray's gateway did not answer ({exc}); is mcp-tray still running?",
                    )
                )

    async def _forward(
        self, line: bytes, message: Any, seq: int | None, initialized: asyncio.Event | None
    ) -> None:
        is_initialize = seq is None
        request_id = (
            message.get("id")
            if isinstance(message, dict) and "method" in message and "id" in message
            else None
        )
        if not is_initialize and initialized is not None:
            await initialized.wait()
        headers = self._session_headers()
        if seq is not None and self.session_id is not None:
            headers[SEQUENCE_HEADER] = str(seq)
        try:
            async with self._pool.request("POST", self.path, headers, line) as reply:
                if is_initialize:
                    self.session_id = reply.headers.get(SESSION_HEADER)
                content_type = reply.headers.get("content-type", "")
                if content_type.startswith("text/event-stream"):
                    await self._relay_events(reply)
                    return
                body = await reply.read()
                if reply.status == 202:
                    return
                if reply.status == 200 and body:
                    if is_initialize:
                        self._note_version(body)
                    await self.emit(body)
                elif request_id is not None:
                    await self.emit(_answer_for(request_id, reply.status, body))
        except (HttpError, OSError) as exc:
            if request_id is not None:
                await self.emit(
                    _error(
                        request_id,
                        -32603,
                        f"mcp-tray's gateway did not answer ({exc}); is mcp-tray still running?",
                    )
                )
            return
        finally:
            if is_initialize:
                if initialized is not None:
                    initialized.set()
                if self.session_id and self._get_stream is None:
                    self._get_stream = asyncio.get_running_loop().create_task(self._listen())

    def _note_version(self, body: bytes) -> None:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            self.protocol_version = json.loads(body)["result"]["protocolVersion"]

    async def _relay_events(self, reply: Response) -> None:
        buffer = b""
        data: list[bytes] = []
        async for chunk in reply.chunks():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                text = raw.rstrip(b"\r")
                if text.startswith(b"data:"):
                    data.append(text[5:].lstrip(b" "))
                elif not text and data:
                    await self.emit(b"\n".join(data))
                    data = []
        if data:
            await self.emit(b"\n".join(data))

    async def _listen(self) -> None:
        """The session's GET stream: notifications not tied to a request."""
        while True:
            try:
                headers = {**self._session_headers(), "accept": "text/event-stream"}
                async with self._pool.request("GET", self.path, headers) as reply:
                    if reply.status != 200:
                        return
                    await self._relay_events(reply)
            except (HttpError, OSError):
                pass
            await asyncio.sleep(GET_STREAM_RETRY_SECONDS)


def _key(request_id: object) -> object:
    return str(request_id) if isinstance(request_id, int | str) else request_id


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _answer_for(request_id: Any, status: int, body: bytes) -> bytes:
    """An error reply the client can match to its request, whatever the gateway sent."""
    with contextlib.suppress(ValueError, RecursionError):
        reply = json.loads(body)
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            code = error.get("code")
            return _error(
                request_id,
                code if isinstance(code, int) and not isinstance(code, bool) else -32603,
                error["message"],
            )
        if isinstance(reply, dict) and isinstance(reply.get("error"), str):
            return _error(request_id, -32603, f"mcp-tray: {reply['error']}")
    text = body.decode("utf-8", errors="replace").strip()[:200]
    return _error(
        request_id, -32603, f"mcp-tray answered HTTP {status}" + (f": {text}" if text else "")
    )


def _error(request_id: Any, code: int, message: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    ).encode()
