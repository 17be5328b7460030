"""mcp-tray's own MCP client session to one child (the upstream session).

The SDK's ``stdio_client`` hides the child process, and mcp-tray needs the
pid, the process group and the exit, so the child is spawned by
``core.child`` and only the framing lives here: newline-delimited JSON on the
child's stdout/stdin, bridged to the SDK's ``JSONRPCDispatcher`` (the layer
``ClientSession`` itself runs on). Requests are forwarded as raw dicts, so
fields mcp-tray does not model pass through untouched.

When the child's stdout ends, or the child exits while a grandchild still
holds the pipe, the read side is closed: every in-flight request fails at
once with ``CONNECTION_CLOSED`` instead of waiting for its timeout.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import CallOptions, DispatchContext, ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from core import __version__
from core.child import ChildProcess

#: The newest revision reachable through the initialize handshake (stdio
#: servers speak the handshake era; the 2026 "discover" era is HTTP-first).
PROTOCOL_VERSION: Final = LATEST_HANDSHAKE_VERSION
CLIENT_INFO: Final = {"name": "mcp-tray", "version": __version__}
#: After the child exits, how long its stdout may still deliver buffered
#: lines; only a grandchild holding the pipe open makes this run out.
EXIT_DRAIN_SECONDS: Final = 0.05

#: Handles a request the server sends to its client (sampling, roots, elicitation).
ServerRequestHandler = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
#: Receives every notification the server sends.
NotificationHandler = Callable[[str, Mapping[str, Any] | None], Awaitable[None]]
#: Receives stdout lines that are not JSON-RPC (chatty servers print banners).
JunkHandler = Callable[[str], None]


class ConnectionLost(Exception):
    """The upstream transport closed while a request was in flight."""


class Upstream:
    """A JSON-RPC session over one child's pipes. Use ``Upstream.open``."""

    def __init__(
        self,
        child: ChildProcess,
        dispatcher: JSONRPCDispatcher[TransportContext],
        closed: asyncio.Event,
    ) -> None:
        self.child = child
        self._dispatcher = dispatcher
        #: Set when the read side ended (stdout EOF, or the leader exited).
        self.closed = closed
        self.initialize_result: dict[str, Any] = {}

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        child: ChildProcess,
        *,
        on_request: ServerRequestHandler,
        on_notification: NotificationHandler,
        on_junk: JunkHandler,
    ) -> AsyncIterator["Upstream"]:
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)
        dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(read_recv, write_send)

        async def on_request_(
            ctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
        ) -> dict[str, Any]:
            return await on_request(method, params)

        async def on_notify_(
            ctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
        ) -> None:
            await on_notification(method, params)

        closed = asyncio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump_stdout, child, read_send, on_junk, closed)
            tg.start_soon(_pump_stdin, child, write_recv)
            await tg.start(dispatcher.run, on_request_, on_notify_)
            try:
                yield cls(child, dispatcher, closed)
            finally:
                tg.cancel_scope.cancel()

    async def initialize(self) -> dict[str, Any]:
        result = await self._dispatcher.send_raw_request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                # Advertised so server->client requests reach the gateway's clients.
                "capabilities": {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}},
                "clientInfo": CLIENT_INFO,
            },
            # The spec forbids cancelling initialize.
            {"cancel_on_abandon": False},
        )
        await self._dispatcher.notify("notifications/initialized", None)
        self.initialize_result = result
        return result

    @property
    def capabilities(self) -> Mapping[str, Any]:
        caps = self.initialize_result.get("capabilities")
        return caps if isinstance(caps, dict) else {}

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFnT | None = None,
    ) -> dict[str, Any]:
        """Send one request; ``ConnectionLost`` if the child went away under it."""
        opts: CallOptions = {}
        if timeout is not None:
            opts["timeout"] = timeout
        if on_progress is not None:
            opts["on_progress"] = on_progress
        try:
            return await self._dispatcher.send_raw_request(method, params, opts)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise ConnectionLost(exc.message) from None
            raise

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        await self._dispatcher.notify(method, params)

    async def list_all(self, method: str, key: str) -> list[dict[str, Any]]:
        """Follow ``nextCursor`` through a paginated list."""
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(1000):  # a server that never stops paginating is broken
            page = await self.request(method, {"cursor": cursor} if cursor else None)
            items.extend(item for item in page.get(key, []) if isinstance(item, dict))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return items

    async def ping(self, timeout: float | None) -> None:
        """Ping, or list tools where the server does not implement ping."""
        try:
            await self.request("ping", None, timeout=timeout)
        except MCPError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            await self.request("tools/list", None, timeout=timeout)


async def _pump_stdout(
    child: ChildProcess,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    on_junk: JunkHandler,
    closed: asyncio.Event,
) -> None:
    try:
        await _pump_until_end(child, sink, on_junk)
    finally:
        closed.set()


async def _pump_until_end(
    child: ChildProcess,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    on_junk: JunkHandler,
) -> None:
    async with sink:
        reader: asyncio.Future[None] = asyncio.ensure_future(_read_messages(child, sink, on_junk))
        try:
            # Whichever comes first: stdout EOF, or the leader's exit (a
            # grandchild may hold stdout open long after the server died)...
            watched: list[asyncio.Future[Any]] = [reader, child.exited]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if not reader.done():
                # ...but what the server wrote before dying is still delivered.
                await asyncio.wait([reader], timeout=EXIT_DRAIN_SECONDS)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


async def _read_messages(
    child: ChildProcess,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    on_junk: JunkHandler,
) -> None:
    while True:
        try:
            line = await child.stdout.readline()
        except (ValueError, asyncio.LimitOverrunError):
            on_junk("<a stdout line longer than the read limit was dropped>")
            continue
        if not line:
            return
        text = line.strip()
        if not text:
            continue
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError:
            on_junk(text.decode("utf-8", errors="replace"))
            continue
        await sink.send(SessionMessage(message))


async def _pump_stdin(
    child: ChildProcess, source: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    async with source:
        async for item in source:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            try:
                await child.write(data.encode())
            except (BrokenPipeError, ConnectionResetError):
                # The child is going; the stdout side reports it to the callers.
                return
