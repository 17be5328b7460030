"""The bridge's relay: stdin lines to POSTs on the gateway, replies to stdout lines.

Each message is POSTed as is to ``/mcp/NAME`` on the running tray, and
whatever comes back (a JSON body, or SSE events: progress, a sampling
request, then the answer) is written back line by line. The standalone GET
stream carries notifications not tied to a request. Messages are relayed as
bytes, never re-modelled, so nothing the client or server says is lost in
translation.

Order: a handshake-era client's lines are numbered in the order they were
read (``x-mcp-tray-seq``) and the gateway dispatches them in that order;
what the client sends while its ``initialize`` is being answered waits for
the answer (there is no session to send it in before).

The tray is never the weak link (docs/design.md §3.10): when it goes away (an
upgrade, a crash), the relay keeps the client connected, finds the tray
again through its runtime file (on any port), opens a new gateway session by
replaying the client's own ``initialize``, answers ``ping`` itself
meanwhile, and then sends what waited. A request the tray took with it is
answered honestly, or sent once more when it is safe to repeat. A request
that finds no tray for ``wait_seconds`` is answered with an error naming
mcp-tray; the relay stays, for the next one. Whenever the relay gives up on
a request (or on each of a batch), and at its close, what is still waiting
is answered with an error: no client waits out its own timeout.
"""

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final
from urllib.parse import urlsplit

from core.base.errors import Gone as _Gone
from core.base.errors import HttpError, InstanceError

# The relay's own names for them, kept short: they are on most lines below.
from core.bridge.replies import NOT_THERE, answered_id, given_up
from core.bridge.replies import answer_for as _answer_for
from core.bridge.replies import error_reply as _error
from core.bridge.replies import json_or_none as _json_or_none
from core.bridge.replies import key as _key
from core.bridge.replies import lost as _lost
from core.bridge.replies import never_sent as _never_sent
from core.bridge.replies import result_reply as _result
from core.bridge.replies import unless_stopping as _unless_stopping
from core.protocol.eras import (
    METHOD_HEADER,
    NAME_BEARING_METHODS,
    NAME_HEADER,
    encode_header,
    request_version,
)
from core.protocol.headers import (
    PROTOCOL_HEADER,
    SEQUENCE_HEADER,
    SESSION_HEADER,
)
from core.protocol.http1 import Connection, Pool, Response
from core.protocol.jsonrpc import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    answerable,
    loads,
    reply_id,
    unparsable_reason,
    valid_id,
)
from core.protocol.replay import replay_verdict, tool_annotations
from core.protocol.sse import messages

ACCEPT: Final = "application/json, text/event-stream"
JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"

#: At stdin EOF, how long requests already sent may still deliver answers.
DRAIN_SECONDS: Final = 2.0
#: At exit, how long the DELETE that ends the gateway session may take.
DELETE_SECONDS: Final = 2.0
#: After the standalone GET stream drops, how long before it is reopened.
GET_STREAM_RETRY_SECONDS: Final = 1.0
#: How long a request waits for a tray that went away before it is answered with an error.
RECONNECT_WAIT_SECONDS: Final = 60.0
#: While the tray is away, how often its runtime file is looked at again.
RECONNECT_POLL_SECONDS: Final = 0.1

#: Finds the running tray: the URL of this server's endpoint (raises InstanceError when none runs).
Locate = Callable[[], Awaitable[str]]


class Relay:
    """Stdin lines to POSTs, replies (JSON or SSE events) to stdout lines."""

    def __init__(
        self,
        url: str | Locate,
        headers: dict[str, str],
        out: asyncio.StreamWriter | Any,
        *,
        wait_seconds: float = RECONNECT_WAIT_SECONDS,
    ) -> None:
        self._locate: Locate = url if callable(url) else _fixed(url)
        self._pool: Pool | None = None
        self.path = urlsplit(url).path if isinstance(url, str) else ""
        self._headers = headers
        self._out = out
        self.wait_seconds = wait_seconds
        #: Why the tray is absent, when the bridge knows (autostart off, or the tray it
        #: started died): said in the "not running" answer.
        self.absent_why: str | None = None
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        #: The task relaying each request (or batch) not yet answered: the message,
        #: and the ids of a batch answered so far. The bridge answers what is left
        #: whenever it gives up (core.bridge.replies.given_up).
        self._pending: dict[asyncio.Task[None], tuple[Any, set[object]]] = {}
        self._get_stream: asyncio.Task[None] | None = None
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        #: The client's own initialize and initialized, replayed on a new tray.
        self._hello: bytes | None = None
        self._hello_done: bytes | None = None
        #: "fresh" (no initialize yet), "opening" (its answer awaited), "open".
        self._state = "fresh"
        #: Handshake-era lines waiting for the session (opening, or the tray away).
        self._backlog: list[tuple[bytes, Any, float]] = []
        #: The number of the last line sent in the current gateway session.
        self._seq = 0
        #: Set while the tray is reachable; cleared while it is away.
        self._reachable = asyncio.Event()
        self._reconnecting: asyncio.Task[None] | None = None
        #: Each tool as the tray listed it (from tools/list answers), for the replay rule.
        self._tools: dict[str, Any] = {}
        self._listings: set[object] = set()
        #: 2026-07-28 requests in flight, by id, so a cancellation can close their stream.
        self._stateless_calls: dict[object, asyncio.Task[None]] = {}
        #: Called after the relay found the tray again (the bridge re-registers its row).
        self.on_reconnected: Callable[[], Awaitable[None]] | None = None
        if isinstance(url, str):
            # A fixed address: reachable until proven otherwise.
            self._use(url)
            self._reachable.set()

    # ----------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Find the tray now (``InstanceError`` when there is none)."""
        url = await self._locate()
        self._use(url)
        self._reachable.set()

    def _use(self, url: str) -> None:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        if self._pool is None or (self._pool.host, self._pool.port) != (host, port):
            if self._pool is not None:
                self._pool.close()
            self._pool = Pool(host, port)
        self.path = parts.path

    async def aclose(self, why: str = "its client closed its input") -> None:
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        # Let answers already on their way reach the client, and the requests
        # an answer let go meanwhile (those held behind an initialize, when the
        # whole input came at once: `mcp-tray connect NAME < requests.jsonl`).
        deadline = asyncio.get_running_loop().time() + DRAIN_SECONDS
        while self._tasks and (left := deadline - asyncio.get_running_loop().time()) > 0:
            await asyncio.wait(list(self._tasks), timeout=left)
        # What is still unanswered is answered now: no client waits out its own timeout.
        unanswered = [entry for task, entry in self._pending.items() if not task.done()]
        unanswered += [(message, set()) for _, message, _ in self._backlog]
        for task in list(self._tasks):
            task.cancel()
        # Cancelled last: an initialize answered during the drain opened it.
        others = [t for t in (self._get_stream, self._reconnecting) if t is not None]
        for task in others:
            task.cancel()
        await asyncio.gather(*self._tasks, *others, return_exceptions=True)
        stopped = f"the bridge stopped before mcp-tray answered this request ({why})"
        for message, answered in unanswered:
            if (answer := given_up(message, stopped, answered)) is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    await self.emit(answer)
        if self.session_id is not None and self._pool is not None and self._reachable.is_set():
            with contextlib.suppress(HttpError, OSError, TimeoutError):
                async with asyncio.timeout(DELETE_SECONDS):
                    async with self._pool.request(
                        "DELETE", self.path, self._session_headers()
                    ) as reply:
                        await reply.read()
        if self._pool is not None:
            self._pool.close()

    def _session_headers(self) -> dict[str, str]:
        headers = {**self._headers, "accept": ACCEPT, "content-type": JSON_TYPE}
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version:
            headers[PROTOCOL_HEADER] = self.protocol_version
        return headers

    async def emit(self, data: bytes) -> None:
        async with self._write_lock:
            self._out.write(data.rstrip(b"\n") + b"\n")
            await self._out.drain()

    def _spawn(self, coro: Coroutine[Any, Any, None], message: Any = None) -> "asyncio.Task[None]":
        """A task of the relay; with the ``message`` it relays, when that expects an answer."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if message is not None and answerable(message):
            self._pending[task] = (message, set())
            task.add_done_callback(lambda done: self._pending.pop(done, None))
        return task

    async def _give_up(self, message: Any, why: str) -> None:
        """Answer every request ``message`` holds (a batch's not yet answered) with ``why``."""
        task = asyncio.current_task()
        entry = self._pending.get(task) if task is not None else None
        if (reply := given_up(message, why, entry[1] if entry else ())) is not None:
            await self.emit(reply)

    # ------------------------------------------------------------- stdin

    def submit(self, line: bytes) -> None:
        """Relay one stdin line; a handshake-era client's lines keep the order they were read in."""
        try:
            message = loads(line)
        except (ValueError, RecursionError) as exc:
            why = f"Parse error: the bridge got a line that is not JSON ({unparsable_reason(exc)})"
            self._spawn(self.emit(_error(None, -32700, why)))
            return
        line = line.strip()
        version = request_version(message.get("params")) if isinstance(message, dict) else None
        if isinstance(version, str) and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            self._stateless(line, message, version)
            return
        method = message.get("method") if isinstance(message, dict) else None
        if method == "initialize" and "id" in message:
            self._hello = line
            self._state = "opening"
            self._spawn(self._open_session(line, message["id"]), message)
            return
        if method == "notifications/initialized":
            self._hello_done = line
        if method == "tools/list" and "id" in message:
            self._listings.add(_key(message["id"]))
        if method == "ping" and valid_id(message.get("id")) and (self._away or not self.session_id):
            # The tray is away, or there is no session to ask it in yet (a ping may
            # come before initialize): the bridge is alive, and says so itself.
            self._spawn(self.emit(_result(message["id"], {})))
            return
        if self._state == "opening" or self._away:
            self._backlog.append((line, message, time.monotonic()))
            return
        self._send(line, message)

    @property
    def _away(self) -> bool:
        return self._reconnecting is not None

    def _send(self, line: bytes, message: Any) -> None:
        seq: int | None = None
        if self._state == "open":
            self._seq += 1
            seq = self._seq
        self._spawn(self._forward(line, message, seq), message)

    def _flush(self) -> None:
        backlog, self._backlog = self._backlog, []
        for line, message, _ in backlog:
            self._send(line, message)

    # -------------------------------------------------- the gateway session

    async def _open_session(self, line: bytes, request_id: Any) -> None:
        """The client's initialize: its answer opens the gateway session."""
        try:
            await self._reachable_within()
            status, reply_body = await self._handshake(line)
        except _Gone as gone:
            await self.emit(_error(request_id, NOT_THERE, str(gone)))
            self._state = "fresh"
            self._fail_backlog(str(gone))
            return
        except (HttpError, OSError) as exc:
            await self.emit(_error(request_id, NOT_THERE, _lost(exc)))
            self._state = "fresh"
            self._fail_backlog(_lost(exc))
            self._lost_tray()
            return
        if self._state != "open":
            # Refused (a name not configured): its answer under its own id, whatever
            # id the gateway could give (none, for a request it never parsed).
            parsed = _json_or_none(reply_body)
            if not (isinstance(parsed, dict) and parsed.get("id") == request_id):
                reply_body = _answer_for(request_id, status, reply_body)
            await self.emit(reply_body)
            self._fail_backlog("no session: mcp-tray refused this client's initialize")
            return
        await self.emit(reply_body)
        self._flush()

    async def _handshake(self, line: bytes) -> tuple[int, bytes]:
        """POST an initialize; on success the session is open. Returns the reply."""
        assert self._pool is not None
        headers = {**self._headers, "accept": ACCEPT, "content-type": JSON_TYPE}
        async with self._pool.request("POST", self.path, headers, line) as reply:
            body = await reply.read()
            status, session = reply.status, reply.headers.get(SESSION_HEADER)
        if session:
            self.session_id = session
            self._seq = 0
            self._state = "open"
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.protocol_version = json.loads(body)["result"]["protocolVersion"]
            if self._get_stream is None or self._get_stream.done():
                self._get_stream = asyncio.get_running_loop().create_task(self._listen())
        else:
            self._state = "fresh"
        return status, body

    async def _reachable_within(self) -> None:
        """Wait (bounded) for the tray to be reachable; ``_Gone`` when it stays away."""
        if self._reachable.is_set():
            return
        if self._reconnecting is None:
            self._lost_tray()
        try:
            await asyncio.wait_for(self._reachable.wait(), self.wait_seconds)
        except TimeoutError:
            raise _Gone(self.wait_seconds, self.absent_why) from None

    def _lost_tray(self) -> None:
        """The tray is away (or lost our session): find it again, once."""
        self._reachable.clear()
        if self._reconnecting is None:
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        try:
            while True:
                try:
                    self._use(await self._locate())
                    assert self._pool is not None
                    # Somebody must answer there before anything is sent again.
                    (await Connection.open(self._pool.host, self._pool.port)).close()
                    if self._hello is not None:
                        # A new gateway session, opened as the client opened its own.
                        await self._handshake(self._hello)
                        if self._hello_done is not None:
                            await self._post_quietly(self._hello_done)
                    break
                except (InstanceError, HttpError, OSError):
                    self._expire_backlog()
                    await asyncio.sleep(RECONNECT_POLL_SECONDS)
        finally:
            self._reconnecting = None
        self._reachable.set()
        if self.on_reconnected is not None:
            with contextlib.suppress(Exception):
                await self.on_reconnected()
        if self._state != "opening":
            self._flush()

    async def _post_quietly(self, line: bytes) -> None:
        assert self._pool is not None
        async with self._pool.request("POST", self.path, self._session_headers(), line) as reply:
            await reply.read()

    def _expire_backlog(self) -> None:
        """Requests that waited out ``wait_seconds`` for a tray are answered; notifications go."""
        now = time.monotonic()
        kept = []
        for entry in self._backlog:
            _, message, since = entry
            if now - since < self.wait_seconds:
                kept.append(entry)
            elif reply := given_up(message, str(_Gone(self.wait_seconds, self.absent_why))):
                self._spawn(self.emit(reply))
        self._backlog = kept

    def _fail_backlog(self, why: str) -> None:
        backlog, self._backlog = self._backlog, []
        for _, message, _ in backlog:
            if (reply := given_up(message, why)) is not None:
                self._spawn(self.emit(reply))

    # ------------------------------------------------------------ requests

    async def _forward(
        self, line: bytes, message: Any, seq: int | None, retried: bool = False
    ) -> None:
        request_id = reply_id(message)
        if self._pool is None:
            self._backlog.append((line, message, time.monotonic()))
            self._lost_tray()
            return
        headers = self._session_headers()
        if seq is not None:
            headers[SEQUENCE_HEADER] = str(seq)
        try:
            async with self._pool.request("POST", self.path, headers, line) as reply:
                if reply.status == 404 and self.session_id is not None:
                    body = await reply.read()
                    if b"Session not found" in body:
                        # A new tray on the same port: it never saw this line.
                        self._backlog.insert(0, (line, message, time.monotonic()))
                        self._lost_tray()
                        return
                    await self._answer(message, reply.status, body)
                    return
                if reply.headers.get("content-type", "").startswith(SSE_TYPE):
                    await self._relay_events(reply)
                    return
                body = await reply.read()
                if reply.status == 202:
                    return
                if reply.status == 200 and body:
                    self._learn(request_id, body)
                    await self.emit(_unless_stopping(body))
                else:
                    await self._answer(message, reply.status, body)
        except (HttpError, OSError) as exc:
            await self._lost_in_flight(line, message, request_id, exc, retried)

    async def _lost_in_flight(
        self, line: bytes, message: Any, request_id: Any, exc: Exception, retried: bool
    ) -> None:
        self._lost_tray()
        if self._send_again(exc, message, request_id, retried):
            # Not taken, or safe to take twice: once more when the tray is back.
            if not await self._tray_back(message):
                return
            seq = None
            if self._state == "open":
                self._seq += 1
                seq = self._seq
            await self._forward(line, message, seq, retried=not _never_sent(exc))
            return
        await self._give_up(message, _lost(exc, taken=True))

    def _send_again(self, exc: Exception, message: Any, request_id: Any, retried: bool) -> bool:
        """A request cut by ``exc``: send it again once the tray is back? Yes when it
        certainly never arrived, or is safe to take twice and was not sent twice yet."""
        if _never_sent(exc):
            return True
        return request_id is not None and not retried and self._repeatable(message)

    async def _tray_back(self, message: Any) -> bool:
        """Wait (bounded) for the tray; False once the request was answered that it is gone."""
        try:
            await self._reachable_within()
        except _Gone as gone:
            await self._give_up(message, str(gone))
            return False
        return True

    def _repeatable(self, message: Any) -> bool:
        """The replay rule (core.protocol.replay), with the hints the tray listed; the
        bridge never sees the server's ``retry`` config, so it goes by the hints alone."""
        method = message.get("method") if isinstance(message, dict) else None
        if not isinstance(method, str):
            return False
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        hints = tool_annotations(self._tools.get(str(params.get("name"))))
        return replay_verdict(method, params, hints).again

    def _learn(self, request_id: Any, body: bytes) -> None:
        """What each tool says about repeating its calls, from the answers to tools/list."""
        if _key(request_id) not in self._listings:
            return
        self._listings.discard(_key(request_id))
        with contextlib.suppress(ValueError, RecursionError, AttributeError, TypeError):
            for tool in json.loads(body)["result"]["tools"]:
                if isinstance(tool.get("name"), str):
                    self._tools[tool["name"]] = tool

    async def _answer(self, message: Any, status: int, body: bytes) -> None:
        """The gateway refused ``message``: the client hears why, under its request's id
        (under id null when it has none to give), unless JSON-RPC answers no such message."""
        if answerable(message):
            await self.emit(_answer_for(reply_id(message), status, body))

    # ------------------------------------------------ 2026-07-28 requests

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
        request_id = reply_id(message)
        if method == "tools/list" and request_id is not None:
            self._listings.add(_key(request_id))
        task = self._spawn(self._post(line, message, headers, request_id), message)
        if request_id is not None:
            key = _key(request_id)
            self._stateless_calls[key] = task
            task.add_done_callback(lambda _: self._stateless_calls.pop(key, None))

    async def _post(
        self,
        line: bytes,
        message: Any,
        headers: dict[str, str],
        request_id: Any,
        retried: bool = False,
    ) -> None:
        if not await self._tray_back(message):
            return
        assert self._pool is not None
        try:
            async with self._pool.request("POST", self.path, headers, line) as reply:
                if reply.headers.get("content-type", "").startswith(SSE_TYPE):
                    await self._relay_events(reply)
                    return
                body = await reply.read()
                if reply.status == 202:
                    return
                if request_id is None:
                    await self._answer(message, reply.status, body)
                    return
                if body and reply.status == 200:
                    # The gateway's answer to this very request: passed on unparsed
                    # (a 50 MB result costs no parse here).
                    self._learn(request_id, body)
                    await self.emit(_unless_stopping(body))
                    return
                if body and reply.status in (400, 404):
                    parsed = _json_or_none(body)
                    if isinstance(parsed, dict) and parsed.get("id") == request_id:
                        self._learn(request_id, body)
                        await self.emit(_unless_stopping(body))
                        return
                await self.emit(_answer_for(request_id, reply.status, body))
        except (HttpError, OSError) as exc:
            self._lost_tray()
            if request_id is None:
                return
            if self._send_again(exc, message, request_id, retried):
                await self._post(line, message, headers, request_id, retried=not _never_sent(exc))
                return
            await self.emit(_error(request_id, NOT_THERE, _lost(exc, taken=True)))

    # ------------------------------------------------------------ replies

    async def _relay_events(self, reply: Response) -> None:
        task = asyncio.current_task()
        entry = self._pending.get(task) if task is not None else None
        # A batch's answers may come one by one: those already here are not given up.
        answered = entry[1] if entry is not None and isinstance(entry[0], list) else None
        async for message in messages(reply.chunks()):
            await self.emit(_unless_stopping(message))
            if answered is not None and (done := answered_id(message)) is not None:
                answered.add(done)

    async def _listen(self) -> None:
        """The session's GET stream: notifications not tied to a request."""
        while True:
            try:
                await self._reachable.wait()
                assert self._pool is not None
                headers = {**self._session_headers(), "accept": SSE_TYPE}
                async with self._pool.request("GET", self.path, headers) as reply:
                    if reply.status == 404:
                        return  # the session is gone: a reconnection opens a new stream
                    if reply.status == 200:
                        await self._relay_events(reply)
            except (HttpError, OSError):
                pass
            await asyncio.sleep(GET_STREAM_RETRY_SECONDS)


def _fixed(url: str) -> Locate:
    async def locate() -> str:
        return url

    return locate
