"""One client request as the gateway's pipeline sees it, whatever era it came in.

Both eras' adapters (core.serving.eras.handshake, core.serving.eras.stateless) decode
a client's message once into a ``Request``: which client session it comes
from and what that client declared (``Client``), what it asks (method and
params, as sent), and how to answer it (``Reply``: where its related
messages go; ``ask``: how to put a server->client request to the client
during this request, where its era allows one). core.serving.calls.pipeline takes
it from there.
"""

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from core.base.errors import RpcError
from core.base.verdict import Verdict
from core.protocol.eras import LATEST_MODERN_VERSION, Envelope
from core.protocol.jsonrpc import METHOD_NOT_FOUND
from core.serving.sessions.sessions import ClientSession

#: A server->client request put to the client (sampling, elicitation, roots).
ClientAsk = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]

#: The client capability each server request needs.
REQUIRED_CAPABILITY: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
#: What a client declares when a server may ask it something (sampling, elicitation, roots).
ASKABLE_CAPABILITIES: Final = frozenset(REQUIRED_CAPABILITY.values())


class Reply(Protocol):
    """Where the messages related to one request go (its own stream)."""

    @property
    def progress_token(self) -> Any: ...

    def related(self, message: dict[str, Any]) -> None: ...

    async def progress(self, params: Mapping[str, Any]) -> None: ...


@dataclass(slots=True)
class Client:
    """One client session, what its client declared, and the era it speaks."""

    session: ClientSession
    #: Speaks 2026-07-28 (stateless); else the handshake era.
    modern: bool
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] | None = None
    #: A 2026-07-28 request's own log level (a handshake session's is kept in its share).
    log_level: str | None = None
    #: Asks the client outside any request (its GET stream), having checked that it
    #: declared what is asked (``may_be_asked``); None where it cannot be asked.
    ask: ClientAsk | None = None

    def declare(self, params: Mapping[str, Any]) -> None:
        """Take what a handshake-era client says of itself in ``initialize``."""
        session = self.session
        info = params.get("clientInfo")
        if (
            session.kind != "bridge"  # a bridge names the client it speaks for
            and isinstance(info, dict)
            and isinstance(info.get("name"), str)
        ):
            session.client_name = info["name"]
        capabilities = params.get("capabilities")
        self.capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        self.info = dict(info) if isinstance(info, dict) else None

    @property
    def askable(self) -> bool:
        """The client declared something a server may ask it for."""
        return not ASKABLE_CAPABILITIES.isdisjoint(self.capabilities)

    def may_be_asked(self, method: str) -> None:
        """Refuse a server request this client never declared it can answer."""
        needed = REQUIRED_CAPABILITY.get(method)
        if needed is not None and needed not in self.capabilities:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the client of this session ({self.session.client_name}) "
                f"did not declare the {needed!r} capability",
            )

    def envelope(self, log_level: str | None) -> Envelope:
        """What this client says about itself, for a 2026-07-28 child."""
        return Envelope(LATEST_MODERN_VERSION, self.capabilities, self.info, log_level)


@dataclass(slots=True)
class Request:
    """One request of a client, decoded once."""

    client: Client
    method: str
    #: As the client sent them (a 2026-07-28 request's envelope included).
    params: Mapping[str, Any]
    reply: Reply
    #: Asks the client during this request (on its stream), having checked that it declared
    #: what is asked; None where the era has no way.
    ask: ClientAsk | None
    #: The HTTP headers it came with (a 2026-07-28 tools/call's Mcp-Param-* are checked).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: What oversight decided about it (core.serving.calls.approvals), for the call journal.
    verdict: Verdict | None = None
    #: Its HTTP headers mirror its params (False: a discovery profile's ``call_tool``, whose
    #: headers were made for the meta-tool's own arguments).
    mirrored: bool = True


class NoReply:
    """The reply of a request of mcp-tray's own making (a seat to find): nothing rides it."""

    progress_token = None

    def related(self, message: dict[str, Any]) -> None:
        pass

    async def progress(self, params: Mapping[str, Any]) -> None:
        pass
