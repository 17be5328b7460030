"""What both eras of streamable HTTP share on the wire: replies, checks, SSE framing.

A reply is a plain JSON body unless something related to the request has
to reach the client first (progress, a log line, a server request): then it
becomes an SSE stream. A large message (a 50 MB tool result) goes out in
slices, each encoded when the socket took the last one, so it is never held
whole as bytes. core.protocol.streamable (the handshake era, with
sessions) and core.protocol.stateless (2026-07-28, without) both build on
these.
"""

import asyncio
import functools
import itertools
from collections.abc import Iterable, Mapping
from typing import Any, Final

from starlette.types import Message, Receive, Send

from core.protocol.jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    dumps,
    encoded,
    error_message,
    loads,
    plainly_usable,
    unparsable_reason,
    unusable,
    valid_id,
)

#: Largest request body accepted unless the config says otherwise.
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
#: Told to clients in SSE streams: how long to wait before reconnecting.
SSE_RETRY_MS: Final = 1000

JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"


class Reply:
    """One POST's answer: a JSON body (one response, or a batch's array) unless
    something related has to reach the client first; then an SSE stream.

    The stream is written by a task that is only created when needed, so the
    common call costs no extra task at all.
    """

    def __init__(
        self,
        send: Send,
        headers: Mapping[str, str],
        expected: int,
        *,
        batch: bool,
        stream_id: str | None,
    ) -> None:
        self._send = send
        self._headers = headers
        #: Set where the session's revision has SSE event ids (2025-11-25 on):
        #: the stream then opens with a priming event and a retry interval.
        self._stream_id = stream_id
        self._events = itertools.count(1)
        self._expected = expected
        self._batch = batch
        self._responses: list[dict[str, Any]] = []
        self._queue: asyncio.Queue[dict[str, Any] | None] | None = None
        self._writer: asyncio.Task[None] | None = None

    @property
    def streaming(self) -> bool:
        return self._queue is not None

    def related(self, message: dict[str, Any]) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._writer = asyncio.get_running_loop().create_task(self._stream(self._queue))
        self._queue.put_nowait(message)

    async def _stream(self, queue: "asyncio.Queue[dict[str, Any] | None]") -> None:
        await start_sse(self._send, self._headers)
        if self._stream_id is not None:
            priming = f"id: {self._stream_id}/0\nretry: {SSE_RETRY_MS}\ndata: \n\n"
            await self._send(
                {"type": "http.response.body", "body": priming.encode(), "more_body": True}
            )
        while (item := await queue.get()) is not None:
            event_id = (
                None if self._stream_id is None else f"{self._stream_id}/{next(self._events)}"
            )
            await event(self._send, item, event_id)
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def respond(self, response: dict[str, Any] | None) -> None:
        """One request's response (None: cancelled, not answered); the last one ends the reply."""
        self._expected -= 1
        if response is not None:
            if self._queue is not None:
                self._queue.put_nowait(response)
            else:
                self._responses.append(response)
        if self._expected > 0:
            return
        if self._queue is not None and self._writer is not None:
            self._queue.put_nowait(None)
            await self._writer
        elif not self._responses:
            # Every request was cancelled: the spec says not to answer, and a
            # POST of a request still needs a reply, so an empty stream ends it.
            await start_sse(self._send, self._headers)
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            body = self._responses if self._batch else self._responses[0]
            await respond_json(self._send, 200, body, self._headers)


def shape_problem(message: Any) -> dict[str, Any] | None:
    """The JSON-RPC error for a message that is not a usable JSON-RPC 2.0 message."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_message(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    if "id" in message and not valid_id(message["id"]):
        return error_message(
            None, INVALID_REQUEST, "Invalid Request: an id must be a string or a number"
        )
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        return error_message(
            message.get("id"), INVALID_REQUEST, "Invalid Request: method must be a string"
        )
    if method is None and "id" not in message:
        return error_message(
            None,
            INVALID_REQUEST,
            "Invalid Request: neither a request, a notification nor a response",
        )
    return None


def content_problem(
    headers: Mapping[str, str], *, sse_required: bool = True
) -> tuple[int, str] | None:
    return _content_problem(headers.get("content-type", ""), headers.get("accept"), sse_required)


#: Content-Type and Accept pairs whose verdict is kept: a client sends the same pair
#: with every request, so a handful covers every client of a tray.
CHECKED_HEADER_PAIRS: Final = 32


@functools.lru_cache(maxsize=CHECKED_HEADER_PAIRS)
def _content_problem(
    content_type_header: str, accept: str | None, sse_required: bool
) -> tuple[int, str] | None:
    content_type = content_type_header.split(";", 1)[0].strip().lower()
    if content_type != JSON_TYPE:
        return 415, (
            f"Unsupported Media Type: the body must be {JSON_TYPE} "
            f"(Content-Type was {content_type or 'missing'})"
        )
    if not (
        _accepts(accept or "", JSON_TYPE) and (_accepts(accept or "", SSE_TYPE) or not sse_required)
    ):
        wanted = f"both {JSON_TYPE} and {SSE_TYPE}" if sse_required else JSON_TYPE
        return 406, (
            f"Not Acceptable: the client must accept {wanted} (Accept was {accept or 'missing'})"
        )
    return None


def accepts(headers: Mapping[str, str], media_type: str) -> bool:
    return _accepts(headers.get("accept", ""), media_type)


def _accepts(accept: str, media_type: str) -> bool:
    kind = media_type.split("/", 1)[0]
    offered = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return bool(offered & {media_type, f"{kind}/*", "*/*"})


async def read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


#: What ``read_message`` returns when it has answered the request itself.
ANSWERED: Final = object()


async def read_message(
    receive: Receive,
    send: Send,
    headers: Mapping[str, str],
    max_body_bytes: int,
    *,
    sse_required: bool = True,
) -> Any:
    """A POST's JSON-RPC body, parsed; or ``ANSWERED`` after refusing it with the
    status and error it earned (415/406, 413, a parse error, nesting or a lone
    surrogate) — the same checks for both eras."""
    problem = content_problem(headers, sse_required=sse_required)
    if problem is not None:
        await error(send, problem[0], INVALID_REQUEST, problem[1])
        return ANSWERED
    body = await read_body(receive, max_body_bytes)
    if body is None:
        await error(
            send,
            413,
            INVALID_REQUEST,
            f"Payload Too Large: request bodies are limited to {max_body_bytes} bytes "
            "(gateway.max_body_bytes in the config raises it)",
        )
        return ANSWERED
    try:
        message = loads(body)
    except (ValueError, RecursionError) as exc:
        await error(send, 400, PARSE_ERROR, f"Parse error: {unparsable_reason(exc)}")
        return ANSWERED
    if not plainly_usable(body) and (unfit := unusable(message)) is not None:
        await error(send, 400, INVALID_REQUEST, unfit)
        return ANSWERED
    return message


async def wait_disconnect(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


async def respond(
    send: Send, status: int, body: bytes, media_type: str, headers: Mapping[str, str] | None = None
) -> None:
    await _start(send, status, len(body), media_type, headers)
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def respond_json(
    send: Send, status: int, message: Any, headers: Mapping[str, str] | None = None
) -> None:
    """``message`` as a JSON body; a large one in slices, each sent when the last one
    left (uvicorn waits for the socket), so neither we nor the socket's buffer hold
    it whole as bytes."""
    length, pieces = encoded(message)
    first = next(pieces)
    if len(first) == length:
        await respond(send, status, first, JSON_TYPE, headers)
        return
    await _start(send, status, length, JSON_TYPE, headers)
    await _body(send, itertools.chain([first], pieces))
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _body(send: Send, pieces: Iterable[bytes]) -> None:
    for piece in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})


async def _start(
    send: Send, status: int, length: int, media_type: str, headers: Mapping[str, str] | None
) -> None:
    raw = [(b"content-type", media_type.encode()), (b"content-length", str(length).encode())]
    raw.extend((k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": raw})


async def error(
    send: Send,
    status: int,
    code: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    request_id: Any = None,
) -> None:
    await respond(send, status, dumps(error_message(request_id, code, message)), JSON_TYPE, headers)


async def start_sse(send: Send, headers: Mapping[str, str]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", SSE_TYPE.encode()),
                (b"cache-control", b"no-cache, no-transform"),
                *((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()),
            ],
        }
    )


async def event(send: Send, message: Mapping[str, Any], event_id: str | None = None) -> None:
    """One SSE event; a large one in slices, as ``respond_json`` sends a body."""
    head = b"event: message\n" if event_id is None else f"id: {event_id}\nevent: message\n".encode()
    length, pieces = encoded(message)
    first = next(pieces)
    if len(first) == length:
        await _body(send, [head + b"data: " + first + b"\n\n"])
    else:
        await _body(send, itertools.chain([head + b"data: " + first], pieces, [b"\n\n"]))
