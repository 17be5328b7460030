"""The express lane: a tool call of an open session, served without the ASGI stack around it.

Nearly every request a tray serves is the same: a POST to ``/mcp/NAME`` of a
JSON-RPC request in a handshake-era session that already exists, with the
token, a loopback Host and nothing unusual. Through uvicorn's ASGI cycle,
the control API's guard, the gateway's front, the gateway and the endpoint's
checks, each such call went through a dozen layers that each looked at the
request once more (docs/design.md §3.10). The connection's protocol
(core.serving.http_guard) asks ``Express.ticket`` at the end of a request's
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

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.types import Receive, Scope, Send

from core.protocol.headers import PROTOCOL_HEADER, SESSION_HEADER, decode_headers
from core.protocol.http_session import HttpSession
from core.protocol.jsonrpc import HANDSHAKE_PROTOCOL_VERSIONS, loads, plainly_usable
from core.protocol.streamable import StreamableHttp, sequence_number
from core.protocol.wire import content_problem, shape_problem
from core.serving.api import gateway_server, host_is_loopback
from core.serving.gateway import Gateway
from core.settings.profiles import is_target

#: Bodies larger than this take the full path (it reads them in pieces, under flow
#: control); a tool call's arguments are a few hundred bytes.
EXPRESS_MAX_BODY_BYTES: Final = 256 * 1024
#: Host header verdicts kept (a client sends the same one every time).
KNOWN_HOSTS: Final = 64


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
        if not isinstance(message, dict) or shape_problem(message) is not None:
            return None
        method = message.get("method")
        if not isinstance(method, str) or "id" not in message or method == "initialize":
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
        #: Host header values seen, and whether each is a loopback address.
        self._hosts: dict[str, bool] = {}

    def ticket(self, url: bytes, raw: list[tuple[bytes, bytes]]) -> Ticket | None:
        """For a POST's target and head (names lower case): a ticket, or None for the full path."""
        if not url.startswith(b"/") or b"?" in url or b"%" in url or b"#" in url:
            return None
        try:
            name = gateway_server(url.decode("ascii"))
        except UnicodeDecodeError:
            return None
        if not name or is_target(name):
            return None
        headers = decode_headers(raw)
        if len(headers) < len(raw) or "origin" in headers:
            return None  # a repeated header, or a browser's request: the guard decides
        host = headers.get("host")
        if host is None or not self._loopback(host):
            return None
        expected = f"Bearer {self._token()}"
        if not hmac.compare_digest(headers.get("authorization", "").encode(), expected.encode()):
            return None
        endpoint = self._gateway.served_endpoint(name)
        session_id = headers.get(SESSION_HEADER)
        if endpoint is None or session_id is None:
            return None
        session = endpoint.sessions.get(session_id)
        if session is None or session.handler is None:
            return None
        version = headers.get(PROTOCOL_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        if content_problem(headers) is not None:
            return None
        length = headers.get("content-length", "")
        if not length.isdigit() or "transfer-encoding" in headers:
            return None
        size = int(length)
        if size > min(EXPRESS_MAX_BODY_BYTES, endpoint.max_body_bytes):
            return None
        return Ticket(endpoint, session, sequence_number(headers), size)

    def _loopback(self, host: str) -> bool:
        verdict = self._hosts.get(host)
        if verdict is None:
            verdict = host_is_loopback(host)
            if len(self._hosts) < KNOWN_HOSTS:
                self._hosts[host] = verdict
        return verdict
