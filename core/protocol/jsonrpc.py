"""JSON-RPC 2.0 for both of mcp-tray's peers: the upstream session and the gateway.

Both relay raw dicts; errors in either direction are ``RpcError``. The few
constants the MCP SDK also defines are kept here on purpose: importing the
SDK (``mcp``, ``mcp_types``) costs a long-running tray ~30 MB of memory
for names it can spell itself; tests/protocol/test_jsonrpc.py keeps them equal to
the SDK's.
"""

import asyncio
import itertools
import json
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final

from core.base.errors import NotFinite, RpcError

#: How deep a client's message may nest arrays and objects. Far beyond any
#: real tool's arguments, far below where the parser or encoder would recurse
#: out of stack (about 1,000 levels in CPython).
MAX_NESTING: Final = 128
NESTING_MESSAGE: Final = (
    f"Invalid Request: arrays and objects nested deeper than {MAX_NESTING} levels"
)
SURROGATE_MESSAGE: Final = (
    "Invalid Request: a string holds a lone UTF-16 surrogate (such as \\ud800), "
    "which is not Unicode text"
)

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: MCP's own code for a request that ran out of time.
REQUEST_TIMEOUT: Final = -32001

#: Messages longer than this (in characters) go out in slices this long (``encoded``).
SLICE_CHARS: Final = 256 * 1024

#: Revisions reachable through the initialize handshake, oldest first.
HANDSHAKE_PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION: Final = HANDSHAKE_PROTOCOL_VERSIONS[-1]
#: The one revision whose streamable HTTP allows JSON-RPC batches.
BATCH_PROTOCOL_VERSIONS: Final = ("2025-03-26",)


#: Receives the params of each ``notifications/progress`` of one request, as sent.
ProgressFn = Callable[[Mapping[str, Any]], Awaitable[None]]


def valid_id(value: object) -> bool:
    """A request id MCP allows: a string or a number (never null, never a bool, never a
    float JSON cannot write back, such as ``1e400``, which Python reads as infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int) and not isinstance(value, bool)


def reply_id(message: Any) -> Any:
    """The id an answer to ``message`` carries: a request's own; else None (JSON-RPC's id
    null, for what is not a valid request, such as ``42``, a batch, or ``"id": {}``)."""
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        request_id = message.get("id")
        if valid_id(request_id):
            return request_id
    return None


def answerable(message: Any) -> bool:
    """Whether JSON-RPC answers ``message``: a request does, and so does what is not a
    valid message at all (with an error); a notification or a response never does."""
    if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
        if isinstance(message.get("method"), str) and "id" not in message:
            return False
        if "method" not in message and valid_id(message.get("id")):
            return False
    return True


def loads(data: str | bytes | bytearray) -> Any:
    """JSON text, parsed as JSON says: ``NotFinite`` (a ValueError, as for any other
    text that is not JSON) for ``NaN`` and ``±Infinity``, which could not be written back.

    ``json.loads`` as it reads bytes, on a decoder made once (given an option, it
    makes one per call)."""
    if not isinstance(data, str):
        data = data.decode(json.detect_encoding(data), "surrogatepass")
    elif data.startswith("\ufeff"):
        return json.loads(data)  # raises json's own error for a BOM in text
    return _DECODER.decode(data)


def _no_constant(name: str) -> Any:
    raise NotFinite(f"{name} is not JSON: numbers must be finite")


_DECODER: Final = json.JSONDecoder(parse_constant=_no_constant)
#: ``json.dumps(separators=(",", ":"), ensure_ascii=False)``, made once (``json.dumps``
#: makes an encoder per call when given options).
_COMPACT: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class EncodedResult(dict[str, Any]):
    """A result whose compact JSON was made once (an aggregate's list, encoded once per
    change): ``dumps`` and ``encoded`` splice ``json`` into a response instead of encoding
    the dict again. Never changed after it is made (it would no longer match its bytes)."""

    def __init__(self, result: Mapping[str, Any]) -> None:
        super().__init__(result)
        self.json: bytes = _utf8(_COMPACT.encode(result), result)


def _spliced(message: Any) -> bytes | None:
    """A response ``{"jsonrpc", "id", "result"}`` whose result is an ``EncodedResult``,
    with its bytes put in; None for any other message (encoded as usual)."""
    if type(message) is not dict or len(message) != 3:
        return None
    result = message.get("result")
    if type(result) is not EncodedResult or "jsonrpc" not in message or "id" not in message:
        return None
    head = _COMPACT.encode({"jsonrpc": message["jsonrpc"], "id": message["id"]})
    return b"".join((head[:-1].encode(), b',"result":', result.json, b"}"))


def dumps(message: Any) -> bytes:
    spliced = _spliced(message)
    if spliced is not None:
        return spliced
    return _utf8(_COMPACT.encode(message), message)


def _utf8(text: str, message: Any) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        # A lone surrogate (legal as a JSON escape, not as UTF-8): keep it escaped.
        return json.dumps(message, separators=(",", ":")).encode()


def encoded(message: Any) -> tuple[int, Iterator[bytes]]:
    """``dumps(message)``: its length, and its bytes in slices made as they are taken.

    A large message is never whole as bytes; and when a long string is what makes it
    large (a tool's text, an image), it is not whole twice as text either: the C
    encoder holds its output twice at its peak (the escaped string and the joined
    result), so such a message goes through the streaming one, whose only copy is
    the escaped string. It is no slower for that shape, and is kept away from small
    messages, which it would encode four times slower.
    """
    spliced = _spliced(message)
    if spliced is not None:
        return len(spliced), (
            spliced[start : start + SLICE_CHARS] for start in range(0, len(spliced), SLICE_CHARS)
        )
    if _holds_long_string(message):
        chunks = list(_COMPACT.iterencode(message))
    else:
        text = _COMPACT.encode(message)
        if len(text) <= SLICE_CHARS:
            body = _utf8(text, message)
            return len(body), iter((body,))
        chunks = [text]
    if all(chunk.isascii() for chunk in chunks):  # known without a scan: the common case
        return sum(map(len, chunks)), _slices(chunks)
    try:
        length = sum(len(piece) for piece in _slices(chunks))
    except UnicodeEncodeError:
        # As dumps: a lone surrogate stays escaped.
        chunks = [json.dumps(message, separators=(",", ":"))]
        length = len(chunks[0])
    return length, _slices(chunks)


#: How much of a message is looked at for a long string: results carry their bulk
#: near the top (``result.content[].text``, ``result.contents[].blob``...).
_LOOKED_AT: Final = 64


def _holds_long_string(message: Any) -> bool:
    """Whether one of the first ``_LOOKED_AT`` values of ``message`` (breadth first) is
    a string longer than ``SLICE_CHARS``."""
    queue = [message]
    for item in queue:  # grows while it is walked, up to _LOOKED_AT values
        kind = type(item)  # what json.loads makes; a subclass only misses the lean path
        if kind is str:
            if len(item) > SLICE_CHARS:
                return True
        elif (kind is dict or kind is list) and len(queue) < _LOOKED_AT:
            values = item.values() if kind is dict else item
            queue.extend(itertools.islice(values, _LOOKED_AT - len(queue)))
    return False


def _slices(chunks: list[str]) -> Iterator[bytes]:
    for chunk in chunks:
        for start in range(0, len(chunk), SLICE_CHARS):
            yield chunk[start : start + SLICE_CHARS].encode()


def unparsable_reason(exc: Exception) -> str:
    """Why a body is not JSON, in words (a RecursionError says nothing useful itself)."""
    if isinstance(exc, RecursionError):
        return f"nested deeper than {MAX_NESTING} levels"
    return str(exc)


def too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (checked without recursion)."""
    return unusable(value, limit) == NESTING_MESSAGE


def unusable(value: Any, limit: int = MAX_NESTING) -> str | None:
    """Why a parsed client message cannot be passed on, or None.

    Nesting past ``limit``, or a string (key or value) holding a lone UTF-16
    surrogate: JSON may escape one (``"\\ud800"``), but it is not Unicode
    text, and the SDK's servers drop such a request without an answer.
    Walked without recursion.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _has_surrogate(item):
                return SURROGATE_MESSAGE
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return NESTING_MESSAGE
        stack.extend((child, depth + 1) for child in children)
    return None


def plainly_usable(body: bytes, limit: int = MAX_NESTING) -> bool:
    """Whether the message ``loads(body)`` makes is sure to pass ``unusable``, seen from its
    bytes (a few scans in C where ``unusable`` walks every value in Python).

    No deeper than ``limit``: it opens at most ``limit`` arrays and objects. No lone
    surrogate: one comes only from a ``\\u`` escape, from bytes that UTF-8 decoding with
    ``surrogatepass`` (as ``json.loads`` decodes) lets through, which begin with 0xED, or
    from a UTF-16 or UTF-32 body, whose ASCII (which JSON's syntax is) holds NUL bytes.
    False says nothing: ``unusable`` then decides.
    """
    return (
        body.count(b"[") + body.count(b"{") <= limit
        and b"\\u" not in body
        and b"\xed" not in body
        and b"\x00" not in body
    )


def _has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def error_message(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def settle(future: "asyncio.Future[dict[str, Any]]", message: Mapping[str, Any]) -> None:
    """Complete a waiting request with the peer's response (or its error)."""
    if future.done():
        return
    error = message.get("error")
    if isinstance(error, dict):
        future.set_exception(
            RpcError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "")),
                error.get("data"),
            )
        )
        return
    result = message.get("result")
    future.set_result(result if isinstance(result, dict) else {})
