"""A remote MCP server (streamable HTTP) with a child process's face.

The run loop, the upstream session (core.supervision.upstream), the health
ping, the breakers, the eras and the journal all speak to a child through
its stdout lines, ``write`` and ``exited``; a remote gets the same face, so
everything above it stays as it is. Each JSON-RPC message written is one
POST; what comes back (a JSON body, or the events of an SSE stream) is fed
to ``stdout`` as lines; once the server names a session (``Mcp-Session-Id``)
every later POST carries it, and a GET stream brings what the server sends
on its own (notifications, list changes). ``stderr`` carries this
transport's own notes, one line each, as a child's stderr would (the Logs
tab shows them).

Ending, as a child's exit: a remote that cannot be reached (DNS, refused,
TLS, timeout) or that forgot the session (404 to a request carrying it)
ends this "run", with the reason in ``end_text``; its pending requests then
fail at once (stdout ends), and the supervisor starts a new run, which here
means a new session, with its backoff. A refused request of a session that
lives (another 4xx, a 5xx) is answered as that request's JSON-RPC error
naming the status, and the session goes on.

The run loop (core.supervision.runloop) makes one for an entry with ``"url"``;
one that ended ``unreachable`` puts its server in that state (tried again with
a backoff, never parked for it), one that ended ``needs_sign_in`` (a 401 asking
for a bearer token, or a sign-in that could not be renewed without a person,
core.supervision.remote_auth) in ``needs-sign-in``.
"""

import asyncio
import contextlib
import json
import sys
from collections.abc import Mapping
from typing import Any, Final

import httpx2

from core.base.clock import SYSTEM_CLOCK, Clock
from core.base.errors import HttpError, SecretStoreError, SignInRequired
from core.protocol.sse import MESSAGE, events
from core.supervision.child import MAX_LINE_BYTES
from core.supervision.remote_wire import WIRE_FAILURES, Reply, WireFailure, wire_for

#: The server's JSON-RPC error for a request it refused at the HTTP level.
HTTP_REFUSED_CODE: Final = -32000
#: How long connecting may take before the remote counts as unreachable.
CONNECT_SECONDS: Final = 5.0
#: A DELETE of the session at stop: best effort, never holding the stop up long.
DELETE_SECONDS: Final = 2.0
SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
#: A body kept in a note or an error text, at most.
BODY_CHARS: Final = 200


class RemoteChild:
    """One session with a remote server, shaped like core.supervision.child.ChildProcess."""

    #: No process of ours: no pid, no tree, nothing to sweep.
    pid: None = None
    tag: str = ""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        self.url = url
        self.argv = [url]
        self._headers = dict(headers or {})
        #: A 401 asking for a bearer token means "sign in" only where the entry does not
        #: send credentials of its own (then it means they are wrong).
        self._own_credentials = any(k.lower() == "authorization" for k in self._headers)
        self._wire = wire_for(url, connect_seconds=CONNECT_SECONDS, transport=transport, auth=auth)
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[int] = loop.create_future()
        # A child's limit: an answer is one line, and a tool's result may be megabytes.
        self.stdout = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        self.stderr = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        #: Why this session ended (None while it lives).
        self.end_text: str | None = None
        #: It ended because the remote could not be reached (not a refusal, not a stop).
        self.unreachable = False
        #: It ended because going on needs the person to sign in (core.supervision.remote_auth).
        self.needs_sign_in = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._initialize_ids: set[Any] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._listening = False

    # ------------------------------------------------------------------ the face

    @property
    def returncode(self) -> int | None:
        return self.exited.result() if self.exited.done() else None

    def is_alive(self) -> bool:
        return not self.exited.done()

    def describe_end(self) -> str:
        return self.end_text or "still connected"

    async def write(self, data: bytes) -> None:
        """Each message in ``data`` (JSON lines) on its own POST; returns at once (the
        answer comes on stdout, as a child's would)."""
        if self.exited.done():
            raise BrokenPipeError(f"the session with {self.url} has ended: {self.end_text}")
        for line in data.splitlines():
            if line.strip():
                self._spawn(self._post(line))

    def close_stdin(self) -> None:
        self._end("closed by mcp-tray")

    async def stop(
        self, timing: object = None, log: object = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """End the session: the remote is told (DELETE) when it named one."""
        if self.session_id is not None and not self.exited.done():
            with contextlib.suppress(httpx2.HTTPError, HttpError, TimeoutError):
                await asyncio.wait_for(self._delete(), DELETE_SECONDS)
        self._end("stopped by mcp-tray")
        await self.end_group()

    async def end_group(
        self, timing: object = None, log: object = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Nothing of it runs here: let its requests go and the connections close."""
        self._end("stopped by mcp-tray")
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._wire.aclose()

    async def _delete(self) -> None:
        async with self._wire.request("DELETE", self.url, self._request_headers()) as reply:
            await reply.read()

    # ------------------------------------------------------------------ the wire

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _request_headers(
        self, accept: str = "application/json, text/event-stream"
    ) -> dict[str, str]:
        headers = {**self._headers, "accept": accept, "content-type": "application/json"}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[VERSION_HEADER] = self.protocol_version
        return headers

    async def _post(self, raw: bytes) -> None:
        """A message, as written (sent as it came), on a POST of its own."""
        # Read only for an initialize (its answer's version is kept) or a refusal (its
        # error names the id): a call goes out without being decoded here once more.
        if b'"initialize"' in raw:
            message = json.loads(raw)
            if isinstance(message, dict) and message.get("method") == "initialize":
                self._initialize_ids.add(message.get("id"))
        had_session = self.session_id is not None
        # A single request's stream ends once its answer is out; a cut after that
        # (the remote stopping as it closes) lost nothing, so it ends no session:
        # the next exchange finds the remote gone, in its own words.
        answered = False
        try:
            async with self._wire.request(
                "POST", self.url, self._request_headers(), raw
            ) as response:
                named = response.headers.get(SESSION_HEADER)
                if named and self.session_id is None and response.status < 300:
                    # Only an accepted request opens a session: the SDK's server names
                    # one even on its 400 to a probe, and forgets it at once.
                    self.session_id = named
                if response.status == 404 and had_session:
                    self._end(f"the remote ended the session (HTTP 404 from {self.url})")
                    return
                if response.status == 401 and self.asks_sign_in(response):
                    self.sign_in_needed("it answered HTTP 401 and asks for a sign-in")
                    return
                if response.status >= 400:
                    body = (await response.read()).decode(errors="replace")[:BODY_CHARS]
                    self._note(f"POST {response.status}: {body}")
                    self._refused(raw, response.status, body)
                    return
                if response.status == 202:
                    return
                kind = response.headers.get("content-type", "")
                if kind.startswith("text/event-stream"):
                    async for name, data in events(response.chunks()):
                        if name == MESSAGE:
                            self._feed_bytes(data)
                            # No "method" key: a response (a nested one only makes this
                            # err on the safe side, the cut then ends the session).
                            answered = b'"method"' not in data
                else:
                    body_bytes = await response.read()
                    if body_bytes.strip():
                        self._feed(body_bytes.decode())
        except Exception as exc:
            if answered and isinstance(exc, WIRE_FAILURES) and raw.lstrip().startswith(b"{"):
                self._note(f"the stream ended after its answer: {describe(exc)}")
                return
            if not self.ended_by(exc):
                raise
            return
        if self.session_id is not None and not self._listening and self.protocol_version:
            self._listening = True
            self._spawn(self._listen())

    async def _listen(self) -> None:
        """What the server sends unasked, on a GET stream (405: it keeps none)."""
        try:
            async with self._wire.request(
                "GET", self.url, self._request_headers("text/event-stream")
            ) as response:
                if response.status == 405:
                    return
                if response.status >= 400:
                    self._note(f"GET {response.status}: no stream of the server's own messages")
                    return
                async for name, data in events(response.chunks()):
                    if name == MESSAGE:
                        self._feed_bytes(data)
        except WIRE_FAILURES as exc:
            self._note(f"the server's stream ended: {describe(exc)}")

    def _feed_bytes(self, data: bytes) -> None:
        """An SSE message's data (on one line, core.protocol.sse): passed on as it came when
        it is one message and not the answer to initialize (whose protocol version is kept);
        else decoded."""
        if self._initialize_ids or not data.startswith(b"{"):
            self._feed(data.decode(errors="replace"))
        elif not self.exited.done():
            # The upstream session decodes it (a bad line is its junk, told as a child's).
            self.stdout.feed_data(data + b"\n")

    def _feed(self, text: str) -> None:
        """One JSON-RPC message (or a batch) from the remote, to stdout as lines."""
        try:
            decoded = json.loads(text)
        except ValueError:
            self._note(f"not JSON-RPC: {text[:BODY_CHARS]}")
            return
        for message in decoded if isinstance(decoded, list) else [decoded]:
            if not isinstance(message, dict):
                continue
            if message.get("id") in self._initialize_ids and isinstance(
                message.get("result"), dict
            ):
                self._initialize_ids.discard(message.get("id"))
                version = message["result"].get("protocolVersion")
                if isinstance(version, str):
                    self.protocol_version = version
            if not self.exited.done():
                self.stdout.feed_data(json.dumps(message).encode() + b"\n")

    def _refused(self, raw: bytes, status: int, body: str) -> None:
        """The request ``raw`` refused at the HTTP level, answered as its JSON-RPC error (a
        notification or a response has no one to answer)."""
        message = json.loads(raw)
        if not isinstance(message, dict) or "method" not in message:
            return
        request_id = message.get("id")
        if request_id is None:
            return
        reason = httpx2.codes.get_reason_phrase(status)
        text = f"{self.url} answered HTTP {status} {reason}".rstrip()
        if body.strip():
            text += f": {body.strip()}"
        self._feed(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": HTTP_REFUSED_CODE, "message": text},
                }
            )
        )

    def ended_by(self, exc: Exception) -> bool:
        """End the session for an exchange that raised ``exc``: the remote unreachable, or
        a sign-in that cannot go on without the person. False: not such a failure."""
        if isinstance(exc, WIRE_FAILURES):
            self.unreachable = not self.exited.done()
            self._end(f"unreachable: {describe(exc)} ({self.url})")
        elif isinstance(exc, SignInRequired):
            self.sign_in_needed("its sign-in ran out and could not be renewed")
        elif isinstance(exc, SecretStoreError):
            self.sign_in_needed(f"its sign-in could not be read ({exc})")
        elif is_oauth_error(exc):
            self.sign_in_needed(f"its sign-in failed ({exc})")
        else:
            return False
        return True

    def asks_sign_in(self, response: Reply) -> bool:
        challenge = response.headers.get("www-authenticate", "")
        return not self._own_credentials and challenge.lower().startswith("bearer")

    def sign_in_needed(self, why: str) -> None:
        if self.exited.done():
            return
        self.needs_sign_in = True
        self._end(f"needs sign-in: {why} ({self.url})")

    def _note(self, text: str) -> None:
        if not self.exited.done():
            self.stderr.feed_data(f"[remote] {text}\n".encode())

    def _end(self, text: str) -> None:
        if self.exited.done():
            return
        self.end_text = text
        self._note(text)
        self.stdout.feed_eof()
        self.stderr.feed_eof()
        self.exited.set_result(0)


def is_oauth_error(exc: BaseException) -> bool:
    """Whether the SDK's sign-in failed (its module is loaded only where a sign-in is used:
    a tray without one never imports the SDK)."""
    module = sys.modules.get("mcp.client.auth.exceptions")
    return module is not None and isinstance(exc, module.OAuthFlowError)


_REASONS: Final[tuple[tuple[type[httpx2.TransportError], str], ...]] = (
    (httpx2.ConnectTimeout, "no answer to the connection within the timeout"),
    (httpx2.ConnectError, "could not connect"),
    (httpx2.ReadTimeout, "no answer within the timeout"),
    (httpx2.RemoteProtocolError, "the server broke the HTTP exchange"),
)


def describe(exc: WireFailure) -> str:
    """What failed, in words, with the library's own detail (refused, DNS, TLS...)."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, HttpError):
        if exc.never_sent:
            return f"could not connect: {detail.removeprefix('cannot connect to ')}"
        # Cut off mid-exchange: before a reply, or inside one.
        return f"the server broke the HTTP exchange: {detail}"
    for kind, words in _REASONS:
        if isinstance(exc, kind):
            return f"{words}: {detail}"
    return detail
