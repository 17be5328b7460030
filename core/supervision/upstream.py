"""mcp-tray's own MCP client session to one child (the upstream session).

The SDK's ``stdio_client`` hides the child process, and mcp-tray needs the
pid, the process group and the exit, so the child is spawned by
``core.supervision.child``; this module speaks newline-delimited JSON-RPC over its
pipes. It is a deliberately small peer rather than the SDK's
``JSONRPCDispatcher``: every forwarded call crosses it, and the dispatcher's
memory streams, task hops and tracing span cost ~0.36 ms of CPU per call on
a small machine even with nothing on the other end (bench/gateway.py), when
the whole gateway may add under a millisecond. Messages stay raw dicts, so
fields mcp-tray does not model pass through untouched; errors surface as
``RpcError`` so callers see one exception type.

When the child's stdout ends, or the child exits while a grandchild still
holds the pipe, every request in flight fails at once with
``ConnectionLost`` instead of waiting for its timeout.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final, NamedTuple

from core import __version__
from core.base.clock import SYSTEM_CLOCK, Clock
from core.base.errors import ConnectionLost, RpcError
from core.protocol.eras import (
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    Envelope,
    is_modern,
    with_envelope,
)
from core.protocol.jsonrpc import (
    INTERNAL_ERROR,
    LATEST_HANDSHAKE_VERSION,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
    ProgressFn,
    dumps,
    error_message,
    settle,
)
from core.supervision.child import Child

logger = logging.getLogger(__name__)

#: The newest revision reachable through the initialize handshake.
PROTOCOL_VERSION: Final = LATEST_HANDSHAKE_VERSION
CLIENT_INFO: Final = {"name": "mcp-tray", "version": __version__}
#: What mcp-tray can relay to its clients, so it declares it to its children.
GATEWAY_CAPABILITIES: Final = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
#: mcp-tray's own envelope, for what it asks a 2026-07-28 child on its own behalf.
OWN_ENVELOPE: Final = Envelope(LATEST_MODERN_VERSION, GATEWAY_CAPABILITIES, CLIENT_INFO, None)
#: ``"protocol"`` config value that skips the probe.
HANDSHAKE_MODE: Final = "handshake"
#: After the child exits, how long its stdout may still deliver buffered
#: lines; only a grandchild holding the pipe open makes this run out.
EXIT_DRAIN_SECONDS: Final = 0.05

#: Handles a request the server sends to its client (sampling, roots, elicitation).
ServerRequestHandler = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
#: Receives every notification the server sends.
NotificationHandler = Callable[[str, Mapping[str, Any] | None], Awaitable[None]]
#: Receives stdout lines that are not JSON-RPC (chatty servers print banners).
JunkHandler = Callable[[str], None]


class Handshake(NamedTuple):
    """How the session opened: the 2026 revision agreed (None: the handshake era) and
    the ``server/discover`` or ``initialize`` result."""

    modern: str | None
    result: dict[str, Any]


def _mutual_modern(error: RpcError) -> str | None:
    """The newest stateless revision both speak, from an "unsupported version" error."""
    data = error.data if isinstance(error.data, dict) else {}
    supported = data.get("supported")
    if not isinstance(supported, list):
        return None
    mutual = [version for version in MODERN_PROTOCOL_VERSIONS if version in supported]
    return mutual[-1] if mutual else None


def _request_key(value: object) -> object:
    """Match "7" with 7: peers echo ids back in either form."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


class Upstream:
    """A JSON-RPC session over one child's pipes. Use ``Upstream.open``."""

    def __init__(
        self,
        child: Child,
        on_request: ServerRequestHandler,
        on_notification: NotificationHandler,
        on_junk: JunkHandler,
    ) -> None:
        self.child = child
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_junk = on_junk
        self._pending: dict[object, asyncio.Future[dict[str, Any]]] = {}
        self._progress: dict[object, ProgressFn] = {}
        self._handlers: dict[object, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._next_id = 0
        #: Set when the read side ended (stdout EOF, or the leader exited).
        self.closed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    @property
    def in_flight(self) -> int:
        """Requests sent to the child and not answered yet."""
        return len(self._pending)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        child: Child,
        *,
        on_request: ServerRequestHandler,
        on_notification: NotificationHandler,
        on_junk: JunkHandler,
    ) -> AsyncIterator["Upstream"]:
        upstream = cls.start(
            child, on_request=on_request, on_notification=on_notification, on_junk=on_junk
        )
        try:
            yield upstream
        finally:
            await upstream.aclose()

    @classmethod
    def start(
        cls,
        child: Child,
        *,
        on_request: ServerRequestHandler,
        on_notification: NotificationHandler,
        on_junk: JunkHandler,
    ) -> "Upstream":
        """A session that outlives the task that opened it (a standby spare's, which one
        task prepares and the run loop later serves); ``aclose`` ends it."""
        upstream = cls(child, on_request, on_notification, on_junk)
        upstream._reader = asyncio.ensure_future(upstream._read_until_end())
        return upstream

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        self._fail_pending()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def rebind(
        self,
        *,
        on_request: ServerRequestHandler,
        on_notification: NotificationHandler,
        on_junk: JunkHandler,
    ) -> None:
        """Whose the child's own messages are from now on (a spare taking over)."""
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_junk = on_junk

    # ---------------------------------------------------------- outbound

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Send one request; ``ConnectionLost`` if the child went away under it."""
        if self.closed.is_set():
            raise ConnectionLost("the child's stdout is closed")
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None or on_progress is not None:
            out = dict(params or {})
            if on_progress is not None:
                # Our id doubles as the progress token, so progress finds its caller.
                out["_meta"] = {**(out.get("_meta") or {}), "progressToken": request_id}
                self._progress[request_id] = on_progress
            message["params"] = out
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._write(message)
            if timeout is None:
                return await future
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            await self._cancel_upstream(request_id, f"timed out after {timeout:g}s")
            raise RpcError(REQUEST_TIMEOUT, f"Request {method!r} timed out") from None
        except asyncio.CancelledError:
            # The caller gave up (its client cancelled): tell the server to stop.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._cancel_upstream(request_id, "the client cancelled"))
            raise
        finally:
            self._pending.pop(request_id, None)
            self._progress.pop(request_id, None)

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        with contextlib.suppress(ConnectionLost):
            await self._write(message)

    async def _cancel_upstream(self, request_id: int, reason: str) -> None:
        await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    async def _write(self, message: Mapping[str, Any]) -> None:
        try:
            await self.child.write(dumps(message) + b"\n")
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionLost(f"the child's stdin is closed ({exc})") from None

    async def initialize(self) -> dict[str, Any]:
        """The handshake; a refusal is an ``RpcError`` whose message says it was initialize."""
        try:
            result = await self.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    # Declared so server->client requests can reach the gateway's
                    # clients; each is then passed on only to a client that declared
                    # the same capability (core.serving.calls.request.Client.may_be_asked).
                    "capabilities": dict(GATEWAY_CAPABILITIES),
                    "clientInfo": CLIENT_INFO,
                },
            )
        except RpcError as exc:
            raise RpcError(exc.code, f"initialize refused: {exc.message}", exc.data) from None
        await self.notify("notifications/initialized", None)
        return result

    async def discover(self, version: str, timeout: float | None) -> dict[str, Any]:
        """``server/discover`` of the stateless era, on mcp-tray's own behalf."""
        return await self.request(
            "server/discover",
            with_envelope(None, OWN_ENVELOPE._replace(version=version)),
            timeout=timeout,
        )

    async def start_session(
        self,
        mode: str,
        probe_window: float,
        *,
        clock: Clock = SYSTEM_CLOCK,
        note: Callable[[str], None] | None = None,
    ) -> "Handshake":
        """Open the session: the era is decided by the child's first answer, never by silence.

        ``server/discover`` first. Its answer decides: a result offering the
        revision means the 2026-07-28 era, an error (or a result without it)
        the handshake era, so ``initialize`` follows. A child still silent
        when ``probe_window`` passes may be a handshake-era server that
        ignores what it does not know, or a slow one not reading yet:
        ``initialize`` goes too, discover stays pending, and whichever
        succeeds first decides (an SDK server settles its era with the first
        request it reads and refuses the other). The caller's start timeout
        bounds the whole. ``mode`` pins an era: "handshake" skips the probe,
        a 2026 revision never falls back. ``note`` hears each step.
        """
        if mode == HANDSHAKE_MODE:
            return Handshake(None, await self.initialize())
        say = note or (lambda _text: None)
        version = mode if is_modern(mode) else LATEST_MODERN_VERSION
        if is_modern(mode):
            found = await self._probe(version, pinned=True)
            assert found is not None  # pinned: a refusal raises
            return found
        probe = asyncio.ensure_future(self._probe(version, pinned=False))
        handshake: asyncio.Future[dict[str, Any]] | None = None
        try:
            if not await _done_within(clock, probe, probe_window):
                say(
                    f"server/discover unanswered after {probe_window:g} s: sending initialize "
                    "as well; the first of the two to succeed decides the era"
                )
                handshake = asyncio.ensure_future(self.initialize())
                return await _first_success(probe, handshake)
            found = probe.result()
            if found is not None:
                return found
            say("server/discover refused: a handshake-era server, sending initialize")
            return Handshake(None, await self.initialize())
        finally:
            for task in (probe, handshake):
                if task is not None and not task.done():
                    task.cancel()
            await asyncio.gather(*(t for t in (probe, handshake) if t), return_exceptions=True)

    async def _probe(self, version: str, *, pinned: bool) -> "Handshake | None":
        """``server/discover`` until it answers: the 2026 session, or None when its answer
        says the child is of the handshake era (pinned: that answer raises instead).

        One corrective probe when its error names a newer revision both sides speak.
        """
        for attempt in range(2):
            try:
                result = await self.discover(version, None)
            except RpcError as exc:
                if pinned:
                    raise RpcError(
                        exc.code, f"server/discover refused: {exc.message}", exc.data
                    ) from None
                retry = _mutual_modern(exc) if exc.code == UNSUPPORTED_PROTOCOL_VERSION else None
                if retry is not None and attempt == 0 and retry != version:
                    version = retry
                    continue
                return None
            offered = result.get("supportedVersions")
            if isinstance(offered, list) and version in offered:
                return Handshake(version, result)
            if pinned:
                raise RpcError(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    f"the server does not offer {version} (it offers {offered!r})",
                )
            return None
        return None

    async def list_all(
        self, method: str, key: str, base: Mapping[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Follow ``nextCursor`` through a paginated list; the items and the first page's hints."""
        items: list[dict[str, Any]] = []
        hints: dict[str, Any] = {}
        cursor: str | None = None
        for _ in range(1000):  # a server that never stops paginating is broken
            params = {**(base or {}), "cursor": cursor} if cursor else base
            page = await self.request(method, params)
            if not hints:
                hints = {k: page[k] for k in ("ttlMs", "cacheScope") if k in page}
            items.extend(item for item in page.get(key, []) if isinstance(item, dict))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return items, hints

    async def ping(self, timeout: float | None, modern: bool = False) -> None:
        """Ping (server/discover in the stateless era, which has no ping), or
        list tools where the server does not implement ping."""
        if modern:
            await self.discover(LATEST_MODERN_VERSION, timeout)
            return
        try:
            await self.request("ping", None, timeout=timeout)
        except RpcError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            await self.request("tools/list", None, timeout=timeout)

    # ----------------------------------------------------------- inbound

    async def _read_until_end(self) -> None:
        reader = asyncio.ensure_future(self._read_messages())
        try:
            # Whichever comes first: stdout EOF, or the leader's exit (a
            # grandchild may hold stdout open long after the server died)...
            watched: list[asyncio.Future[Any]] = [reader, self.child.exited]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if not reader.done():
                # ...but what the server wrote before dying is still delivered.
                await asyncio.wait([reader], timeout=EXIT_DRAIN_SECONDS)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            self.closed.set()
            self._fail_pending()

    async def _read_messages(self) -> None:
        stdout = self.child.stdout
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self._on_junk("<a stdout line longer than the read limit was dropped>")
                continue
            if not line:
                return
            try:
                text = line.decode("utf-8-sig", "surrogatepass")  # as json.loads would
            except UnicodeDecodeError:
                self._on_junk(line.decode("utf-8", errors="replace").rstrip()[:500])
                continue
            # Its bytes go before it is parsed, and its text and parsed form before
            # the next line is awaited: a large result is held at most twice, and
            # nothing of it stays here once it was answered.
            del line
            if not text.isspace():
                self._take(text)
            del text

    def _take(self, line: str) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self._on_junk(line.rstrip()[:500])
            return
        if isinstance(message, dict):
            self._dispatch(message)
        else:
            self._on_junk(line.rstrip())

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else None
            if "id" in message:
                key = _request_key(message["id"])
                task = self._spawn(self._answer(message["id"], method, params))
                self._handlers[key] = task
                task.add_done_callback(partial(self._forget_handler, key))
            elif method == "notifications/progress" and params is not None:
                self._relay_progress(params)
            elif method == "notifications/cancelled" and params is not None:
                handler = self._handlers.get(_request_key(params.get("requestId")))
                if handler is not None:
                    handler.cancel()
            else:
                self._spawn(self._notify_safely(method, params))
            return
        future = self._pending.get(_request_key(message.get("id")))
        if future is not None:
            settle(future, message)

    def _forget_handler(self, key: object, _task: "asyncio.Task[Any]") -> None:
        self._handlers.pop(key, None)

    def _relay_progress(self, params: dict[str, Any]) -> None:
        # Passed on as the server wrote it (an integer stays an integer);
        # the caller puts its own client's token in place of ours.
        callback = self._progress.get(_request_key(params.get("progressToken")))
        if callback is not None:
            self._spawn(callback(params))

    async def _answer(self, request_id: Any, method: str, params: dict[str, Any] | None) -> None:
        try:
            result = await self._on_request(method, params)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except RpcError as exc:
            reply = error_message(request_id, exc.code, exc.message, exc.data)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            logger.exception("answering the server's %s failed", method)
            reply = error_message(request_id, INTERNAL_ERROR, str(exc))
        with contextlib.suppress(ConnectionLost):
            await self._write(reply)

    async def _notify_safely(self, method: str, params: dict[str, Any] | None) -> None:
        try:
            await self._on_notification(method, params)
        except Exception:
            logger.exception("handling the server's %s failed", method)

    def _spawn(self, coro: Awaitable[Any]) -> "asyncio.Task[Any]":
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _fail_pending(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionLost("the connection to the child closed"))


async def _done_within(clock: Clock, task: "asyncio.Future[Any]", seconds: float) -> bool:
    """Wait up to ``seconds`` of ``clock`` time for ``task``, leaving it running."""
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait([task, timer], return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return task.done()


async def _first_success(
    probe: "asyncio.Future[Handshake | None]", handshake: "asyncio.Future[dict[str, Any]]"
) -> Handshake:
    """Whichever of a pending discover and initialize succeeds first; when neither
    does, initialize's failure (the era the child was last asked for) is raised."""
    pending: set[asyncio.Future[Any]] = {probe, handshake}
    while pending:
        _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        if probe.done() and not probe.cancelled() and probe.exception() is None:
            found = probe.result()
            if found is not None:
                return found
        if handshake.done() and not handshake.cancelled() and handshake.exception() is None:
            return Handshake(None, handshake.result())
    return Handshake(None, handshake.result())


def describe_start_failure(exc: BaseException, *, remote: bool = False) -> str:
    """Why a handshake failed, in words for the log and the server's error."""
    if isinstance(exc, RpcError):
        # The message names the request (initialize, server/discover, a list).
        return f"error {exc.code}: {exc.message}"
    if isinstance(exc, ConnectionLost):
        if remote:
            return "the session ended before the handshake finished"
        return "its stdout closed before the handshake finished"
    if isinstance(exc, TimeoutError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
