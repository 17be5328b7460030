"""What a client is answered: mcp-tray's own answers, and every answer in the client's era.

The pipeline (core.serving.calls.pipeline) answers some requests itself, from what the
child last said, so a client can connect to a starting or parked server and learn the
real reason on its first request: ``initialize``, ``server/discover`` and the lists
while their listing is known. Whatever the child answers is encoded once, here, for the
client's era (core.serving.calls.translate), held tools left out of a relayed
``tools/list``.
"""

from collections.abc import Mapping
from typing import Any, Final

from core import __version__
from core.protocol.eras import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS, as_complete
from core.protocol.jsonrpc import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from core.serving.calls.translate import encode
from core.supervision.catalog import Catalog
from core.supervision.server import ManagedServer

#: Lists served from the child's last listing.
LIST_METHODS: Final = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
#: A server that never started is announced with this: tools only.
DEFAULT_CAPABILITIES: Final = {"tools": {"listChanged": True}}


def shared_version(requested: object, child: str | None) -> str:
    """The handshake version both the client and the child speak.

    mcp-tray relays messages as they are, so it cannot speak a newer version
    to a client than its child does; an older one the client asks for is
    granted (servers keep speaking the versions before theirs).
    """
    ceiling = child if child in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    if isinstance(requested, str) and requested in HANDSHAKE_PROTOCOL_VERSIONS:
        return min(requested, ceiling)
    return ceiling


def offered_capabilities(server: ManagedServer) -> dict[str, Any]:
    """What a client is told the server offers: its own, with ``listChanged`` (mcp-tray
    tells clients when a respawned server's lists change)."""
    catalog = server.catalog
    offered = dict(catalog.capabilities) if catalog.capabilities else dict(DEFAULT_CAPABILITIES)
    for kind in ("tools", "resources", "prompts"):
        if kind in offered:
            offered[kind] = {**(offered[kind] or {}), "listChanged": True}
    return offered


def hello(base: ManagedServer, server: ManagedServer, requested: object) -> dict[str, Any]:
    """``initialize``'s answer for the entry ``base``, from what its child ``server`` last said."""
    catalog = server.catalog
    info = dict(catalog.server_info) or {"name": base.name, "version": "unknown"}
    info.setdefault("title", f"{base.name} (via mcp-tray {__version__})")
    result: dict[str, Any] = {
        "protocolVersion": shared_version(requested, catalog.version),
        "capabilities": offered_capabilities(server),
        "serverInfo": info,
    }
    if catalog.instructions:
        result["instructions"] = catalog.instructions
    return result


def discovered(server: ManagedServer) -> dict[str, Any]:
    """``server/discover``'s answer: the child's own where it gave one.

    Where it must differ: ``supportedVersions`` says what mcp-tray serves
    in this era; for a handshake-era child everything else is built from
    its ``initialize`` answer (its capabilities, with ``listChanged``,
    which mcp-tray delivers on ``subscriptions/listen``), with caching
    hints that keep nothing (a respawn may change what it offers).
    """
    catalog = server.catalog
    if catalog.modern and catalog.discover:
        result = dict(catalog.discover)
        result["supportedVersions"] = list(MODERN_PROTOCOL_VERSIONS)
        return result
    result = {
        "supportedVersions": [LATEST_MODERN_VERSION],
        "capabilities": offered_capabilities(server),
    }
    if catalog.instructions:
        result["instructions"] = catalog.instructions
    info = catalog.server_info or {"name": server.name, "version": "unknown"}
    return as_complete(result, "server/discover", info)


def listed(
    catalog: Catalog, method: str, params: Mapping[str, Any], modern: bool
) -> dict[str, Any] | None:
    """A list's first page from the child's last listing, or None when it must be asked."""
    if method not in LIST_METHODS or params.get("cursor") or not catalog.known:
        return None
    kind = LIST_METHODS[method]
    lists = {kind: list(catalog.lists.get(kind, []))}
    if modern:
        return as_complete(lists, method, catalog.server_info, catalog.hints.get(kind))
    return lists


def answered(result: dict[str, Any], method: str, modern: bool, catalog: Catalog) -> dict[str, Any]:
    """The child's answer as its client's era has it, held tools out of a relayed list."""
    if method == "tools/list" and isinstance(result.get("tools"), list):
        # Relayed from the child (a page, or before it listed): held tools stay out.
        result = {**result, "tools": catalog.screened(result["tools"])}
    return encode(result, method, modern, catalog)
