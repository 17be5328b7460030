"""HTTP header names that the gateway and the bridge both speak.

Kept here, below both, so neither imports the other: the bridge (its own
process) sends them, the gateway reads them.
"""

from collections.abc import Iterable, MutableMapping
from typing import Any, Final

#: MCP streamable HTTP: the session a request belongs to (handshake era).
SESSION_HEADER: Final = "mcp-session-id"
#: MCP streamable HTTP: the negotiated protocol revision.
PROTOCOL_HEADER: Final = "mcp-protocol-version"
#: mcp-tray's own: the client a bridge speaks for, so the gateway's session
#: shows the real client rather than "mcp-tray connect".
CLIENT_HEADER: Final = "x-mcp-tray-client"
#: mcp-tray's own: the client a direct HTTP snippet of ``client-config`` was made
#: for (its name), so a session shows the client rather than an address.
IDENTITY_HEADER: Final = "x-mcp-tray-identity"
#: mcp-tray's own: the bridge's worker row, so the session links to it.
WORKER_HEADER: Final = "x-mcp-tray-worker"
#: mcp-tray's own: the order in which a bridge read the messages it POSTs
#: (concurrent POSTs may arrive in any order; the gateway restores this one).
SEQUENCE_HEADER: Final = "x-mcp-tray-seq"

#: The ``User-Agent`` of ``mcp-tray``'s own commands: the call journal names
#: ``mcp-tray call`` as its door (``cli``), other users of the API as ``api``.
CLI_USER_AGENT: Final = "mcp-tray-cli"

#: ``error.data.reason`` of the answer to a request cut because mcp-tray is
#: shutting down: a bridge treats it as the tray going away (it reconnects,
#: and repeats the request when that is safe) rather than as the server's answer.
TRAY_STOPPING_REASON: Final = "mcp-tray-stopping"


def decode_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """An ASGI scope's headers as a dict with lower-cased names (the one decoding of them)."""
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in raw}


#: Where ``scope_headers`` keeps a request's decoded headers in its ASGI scope.
_DECODED: Final = "mcp_tray.headers"


def scope_headers(scope: MutableMapping[str, Any]) -> dict[str, str]:
    """``decode_headers`` of an ASGI scope, decoded once per request: the control API's
    guard and the gateway both read them (a reader must not change the dict)."""
    decoded: dict[str, str] | None = scope.get(_DECODED)
    if decoded is None:
        decoded = scope[_DECODED] = decode_headers(scope["headers"])
    return decoded
