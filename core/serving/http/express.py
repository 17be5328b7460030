"""The express lane: a tool call of an open session, served without the ASGI stack around it.

Nearly every request a tray serves is the same: a POST to ``/mcp/NAME`` of a
JSON-RPC request in a handshake-era session that already exists, with the
token, a loopback Host and nothing unusual. Through uvicorn's ASGI cycle,
the control API's guard, the gateway's front, the gateway and the endpoint's
checks, each such call went through a dozen layers that each looked at the
request once more (docs/design.md §3.10). The connection's protocol
(core.serving.http.http_guard) asks ``Express.ticket`` at the end of a request's
head and ``Ticket.message`` once its body is in; when both say yes, the
request goes straight to its session (``StreamableHttp.serve_request``), and
its reply leaves through uvicorn's own response writer as before.

Everything else takes the full path, and the lane only takes what the full
path would have served the same way: both questions answer None on anything
the full path would refuse, redirect, adopt or treat differently (a second
Host or any repeated header, an Origin, a query, an escaped path, an unknown
or not yet served server, a profile, an unknown session, another revision's
header, a body too large, unparsable or unusable, a batch, a notification,
``initialize``). So the lane holds no rule of its own; it only takes the
checks' common answer for granted once it has checked that it is that answer.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.types import Receive, Scope, Send

from core.protocol.headers import PROTOCOL_HEADER, SEQUENCE_HEADER, SESSION_HEADER
from core.protocol.http_session import HttpSession
from core.protocol.jsonrpc import HANDSHAKE_PROTOCOL_VERSIONS, loads, plainly_usable
from core.protocol.streamable import StreamableHttp, sequence_number
from core.protocol.wire import content_problem, shape_problem
from core.serving.http.api import gateway_server, host_is_loopback, presents_token
from core.serving.http.gateway import Gateway
from core.settings.profiles import is_target

#: Bodies larger than this take the full path (it reads them in pieces, under flow
#: control); a tool call's arguments are a few hundred bytes.
EXPRESS_MAX_BODY_BYTES: Final = 256 * 1024
#: Verdicts kept per kind of value (a client sends the same head every time).
KNOWN_VALUES: Final = 64
#: The headers the lane reads; any of them twice sends a request the full way.
_READ: Final = frozenset(
    {
        b"host",
        b"authorization",
        SESSION_HEADER.encode(),
        PROTOCOL_HEADER.encode(),
        b"content-type",
        b"accept",
        b"content-length",
        SEQUENCE_HEADER.encode(),
    }
)
#: Headers the lane leaves to the full path: a browser's Origin (the guard judges it),
#: a body in chunks, a trace context (the call's span continues it: core.serving.observe.telemetry).
_NEVER: Final = frozenset({b"origin", b"transfer-encoding", b"traceparent"})
_SESSION: Final = SESSION_HEADER.encode()
_PROTOCOL: Final = PROTOCOL_HEADER.encode()
_SEQUENCE: Final = SEQUENCE_HEADER.encode()
_HANDSHAKE_VERSIONS: Final = frozenset(v.encode() for v in HANDSHAKE_PROTOCOL_VERSIONS)


@dataclass(slots=True)
class Ticket:
    """A request whose head qualified: where it goes, once its body qualifies too."""

    endpoint: StreamableHttp
    session: HttpSession
    seq: int | None
    length: int

    def message(self, body: bytes) -> dict[str, Any] | None:
        """The request, when the full path would dispatch it as one request of the session."""
        if len(body) != self.length or not plainly_usable(body):
            return None
        try:
            message = loads(body)
        except (ValueError, RecursionError):
            return None
        # What the full path dispatches as one request: a message shape_problem clears,
        # with a method other than initialize and an id.
        if shape_problem(message) is not None or "id" not in message:
            return None
        if type(message) is not dict or message.get("method") in (None, "initialize"):
            return None
        session = self.session
        if session.closed or self.endpoint.sessions.get(session.id) is not session:
            return None  # ended while its body was in flight
        return message

    def app(self, message: dict[str, Any]) -> Callable[[Scope, Receive, Send], Any]:
        """The ASGI app uvicorn's cycle runs for this request (its error handling and all)."""

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            await self.endpoint.serve_request(self.session, message, self.seq, send)

        return serve


class Express:
    """Decides, from a request's raw head, whether it may take the express lane."""

    def __init__(self, gateway: Gateway, token: Callable[[], str]) -> None:
        self._gateway = gateway
        self._token = token

    def ticket(self, url: bytes, raw: list[tuple[bytes, bytes]]) -> Ticket | None:
        """For a POST's target and head (names lower case): a ticket, or None for the full path.

        Looks at the raw bytes once, without decoding the head (a client sends the same
        head with every call, so the verdicts that take work are kept per value)."""
        name = _server_of(url)
        if not name:
            return None
        found: dict[bytes, bytes] = {}
        for key, value in raw:
            if key in _READ:
                if key in found:
                    return None  # a repeated header: the guard or the endpoint decides
                found[key] = value
            elif key in _NEVER:
                return None
        host = found.get(b"host")
        if host is None or not _loopback(host):
            return None
        if not presents_token(found.get(b"authorization", b""), self._token()):
            return None
        endpoint = self._gateway.served_endpoint(name)
        session_id = found.get(_SESSION)
        if endpoint is None or session_id is None:
            return None
        session = endpoint.sessions.get(session_id.decode("latin-1"))
        if session is None or session.handler is None:
            return None
        version = found.get(_PROTOCOL)
        if version is not None and version not in _HANDSHAKE_VERSIONS:
            return None
        if not _plain_content(found.get(b"content-type", b""), found.get(b"accept")):
            return None
        length = found.get(b"content-length", b"")
        if not length.isdigit():
            return None
        size = int(length)
        if size > min(EXPRESS_MAX_BODY_BYTES, endpoint.max_body_bytes):
            return None
        seq = found.get(_SEQUENCE)
        number = None if seq is None else sequence_number({SEQUENCE_HEADER: seq.decode("latin-1")})
        return Ticket(endpoint, session, number, size)


# The verdicts a client's head needs, kept per value as core.protocol.wire keeps the
# Content-Type and Accept pairs it judged (a client sends the same head every time).


@functools.lru_cache(maxsize=KNOWN_VALUES)
def _server_of(url: bytes) -> str:
    """The plain server a target names ("" for anything else: a profile, a query...)."""
    if not url.startswith(b"/") or any(c in url for c in (b"?", b"%", b"#")):
        return ""
    try:
        found = gateway_server(url.decode("ascii"))
    except UnicodeDecodeError:
        return ""
    return found if found and not is_target(found) else ""


@functools.lru_cache(maxsize=KNOWN_VALUES)
def _loopback(host: bytes) -> bool:
    return host_is_loopback(host.decode("latin-1"))


@functools.lru_cache(maxsize=KNOWN_VALUES)
def _plain_content(content_type: bytes, accept: bytes | None) -> bool:
    headers = {"content-type": content_type.decode("latin-1")}
    if accept is not None:
        headers["accept"] = accept.decode("latin-1")
    return content_problem(headers) is None
