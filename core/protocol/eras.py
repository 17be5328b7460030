"""The two eras of MCP and what mcp-tray rewrites between them.

The handshake era (2024-11-05 to 2025-11-25) opens a session with
``initialize``; the stateless 2026-07-28 revision has none: every request
carries its own ``_meta`` envelope (protocol version, client capabilities,
optionally client info and log level), servers answer ``server/discover``,
every result says ``resultType``, and a server that needs input from the
client (sampling, elicitation, roots) answers ``input_required`` with
``inputRequests`` and an opaque ``requestState``, which the client echoes
back when it retries with ``inputResponses`` (multi round-trip requests).

mcp-tray speaks both on both sides, chosen per client request and per
child. The names here are the spec's (tests/protocol/test_jsonrpc.py keeps them equal
to the SDK's); the helpers rewrite a message for the other era and leave
everything else as it came.
"""

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from core.protocol.headers import PROTOCOL_HEADER
from core.protocol.jsonrpc import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)

#: Revisions of the stateless era, oldest first.
MODERN_PROTOCOL_VERSIONS: Final = ("2026-07-28",)
LATEST_MODERN_VERSION: Final = MODERN_PROTOCOL_VERSIONS[-1]
#: Every revision mcp-tray serves, oldest first.
SUPPORTED_VERSIONS: Final = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)

PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META_KEY: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_META_KEY: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_META_KEY: Final = "io.modelcontextprotocol/subscriptionId"
#: The request ``_meta`` keys that make up the envelope.
#: W3C trace context in a request's ``_meta`` (as 2026-07-28 carries it).
TRACEPARENT_META_KEY: Final = "traceparent"
ENVELOPE_KEYS: Final = (
    PROTOCOL_VERSION_META_KEY,
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
)

HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: HTTP headers of a 2026-07-28 request (the version header is the handshake era's too).
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
#: The params member each name-bearing method mirrors in ``Mcp-Name``.
NAME_BEARING_METHODS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
#: The requests that may answer ``input_required``.
INPUT_REQUIRED_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Results a 2026-07-28 client caches, which must carry ``ttlMs`` and ``cacheScope``.
CACHEABLE_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
#: Handshake-era requests 2026-07-28 removed.
REMOVED_IN_MODERN: Final = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
#: A result of the stateless era: finished, or waiting for the client's input.
COMPLETE: Final = "complete"
INPUT_REQUIRED: Final = "input_required"
#: ``ttlMs`` mcp-tray gives a list it serves when the child gave none: a
#: respawn may change it at any time.
DEFAULT_TTL_MS: Final = 0
DEFAULT_CACHE_SCOPE: Final = "private"

#: JSON-RPC error codes whose HTTP status is not 200 on the stateless path.
ERROR_STATUS: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}

_B64_SENTINEL: Final = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")
_HEADER_SAFE: Final = re.compile(r"^[\x20-\x7E]*$")


def is_modern(version: object) -> bool:
    return isinstance(version, str) and version in MODERN_PROTOCOL_VERSIONS


def meta_of(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (params or {}).get("_meta")
    return meta if isinstance(meta, dict) else {}


def request_version(params: Mapping[str, Any] | None) -> object:
    """The protocol version a request's envelope names (None in the handshake era)."""
    return meta_of(params).get(PROTOCOL_VERSION_META_KEY)


class Envelope(NamedTuple):
    """What a 2026-07-28 request says about its client."""

    version: str
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    log_level: str | None


def with_envelope(
    params: Mapping[str, Any] | None, envelope: Envelope, *, log_level: bool = True
) -> dict[str, Any]:
    """The params for a 2026-07-28 server: the request's own, with this envelope in ``_meta``."""
    meta = dict(meta_of(params))
    meta[PROTOCOL_VERSION_META_KEY] = envelope.version
    meta[CLIENT_CAPABILITIES_META_KEY] = dict(envelope.capabilities)
    if envelope.client_info is not None:
        meta[CLIENT_INFO_META_KEY] = dict(envelope.client_info)
    if envelope.log_level is not None and log_level:
        meta[LOG_LEVEL_META_KEY] = envelope.log_level
    return {**(params or {}), "_meta": meta}


def without_envelope(params: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The params for a handshake-era server: no envelope keys (an SDK server on a
    handshake connection refuses requests that carry them)."""
    meta = meta_of(params)
    if not any(key in meta for key in ENVELOPE_KEYS):
        return params
    kept = {key: value for key, value in meta.items() if key not in ENVELOPE_KEYS}
    out = {key: value for key, value in (params or {}).items() if key != "_meta"}
    if kept:
        out["_meta"] = kept
    return out


def as_complete(
    result: Mapping[str, Any],
    method: str,
    server_info: Mapping[str, Any] | None,
    hints: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A handshake-era result, dressed as 2026-07-28 expects it."""
    out = dict(result)
    out.setdefault("resultType", COMPLETE)
    if method in CACHEABLE_METHODS:
        out.setdefault("ttlMs", (hints or {}).get("ttlMs", DEFAULT_TTL_MS))
        out.setdefault("cacheScope", (hints or {}).get("cacheScope", DEFAULT_CACHE_SCOPE))
    if server_info:
        meta = dict(out.get("_meta") or {})
        meta.setdefault(SERVER_INFO_META_KEY, dict(server_info))
        out["_meta"] = meta
    return out


def as_handshake(result: Mapping[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result, as a handshake-era client expects it (some reject unknown keys)."""
    out = {k: v for k, v in result.items() if k not in ("resultType", "ttlMs", "cacheScope")}
    meta = out.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
        if rest:
            out["_meta"] = rest
        else:
            del out["_meta"]
    return out


def encode_header(value: str) -> str:
    """A header value that survives HTTP: printable ASCII as is, else base64 in a sentinel."""
    if (
        _HEADER_SAFE.fullmatch(value)
        and value == value.strip()
        and not _B64_SENTINEL.fullmatch(value)
    ):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def decode_header(value: str | None) -> str | None:
    """Inverse of ``encode_header``; a malformed sentinel decodes to None (never a match)."""
    if value is None:
        return None
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


class Rejection(NamedTuple):
    code: int
    message: str
    data: Any = None


def check_request(
    message: Mapping[str, Any], headers: Mapping[str, str] | None
) -> Envelope | Rejection:
    """The 2026-07-28 request ladder: envelope, then headers (HTTP), then version."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return Rejection(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {PROTOCOL_VERSION_META_KEY!r} and "
            f"{CLIENT_CAPABILITIES_META_KEY!r}",
        )
    missing = [
        k for k in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY) if k not in meta
    ]
    if missing:
        return Rejection(
            INVALID_PARAMS,
            f"params._meta is missing the required envelope key(s): {', '.join(missing)}",
        )
    version = meta[PROTOCOL_VERSION_META_KEY]
    method = message.get("method")
    if headers is not None:
        if headers.get(PROTOCOL_HEADER) != version:
            return Rejection(
                HEADER_MISMATCH,
                "Header mismatch: MCP-Protocol-Version does not match the request's "
                f"{PROTOCOL_VERSION_META_KEY}",
            )
        if headers.get(METHOD_HEADER) != method:
            return Rejection(
                HEADER_MISMATCH, "Header mismatch: Mcp-Method does not match the request's method"
            )
        name_key = NAME_BEARING_METHODS.get(str(method))
        if name_key is not None and isinstance(params, dict):
            named = params.get(name_key)
            sent = headers.get(NAME_HEADER)
            # Whitespace around a field value is not part of it (RFC 9110 §5.5).
            if named is not None and decode_header(sent.strip() if sent else sent) != named:
                return Rejection(
                    HEADER_MISMATCH,
                    f"Header mismatch: Mcp-Name does not match the request's {name_key!r}",
                )
    if not isinstance(version, str):
        return Rejection(INVALID_PARAMS, "the protocol version in params._meta must be a string")
    if version not in MODERN_PROTOCOL_VERSIONS:
        return unsupported(version)
    capabilities = meta[CLIENT_CAPABILITIES_META_KEY]
    info = meta.get(CLIENT_INFO_META_KEY)
    level = meta.get(LOG_LEVEL_META_KEY)
    return Envelope(
        version,
        capabilities if isinstance(capabilities, dict) else {},
        info if isinstance(info, dict) else None,
        level if isinstance(level, str) else None,
    )


def unsupported(requested: object) -> Rejection:
    """The stateless era's answer to a version it does not speak: the ones it does
    (the handshake revisions are reached through ``initialize``, not here)."""
    return Rejection(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version {requested!r}; this endpoint speaks "
        f"{', '.join(MODERN_PROTOCOL_VERSIONS)} per request, and {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)} "
        "through initialize",
        {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": requested},
    )


def param_header_problem(
    schema: object, arguments: Mapping[str, Any], headers: Mapping[str, str]
) -> str | None:
    """Why a tools/call's ``Mcp-Param-*`` headers disagree with its arguments (None: they agree).

    Each property annotated ``x-mcp-header: Token`` (reached by a chain of
    ``properties``) is mirrored in ``Mcp-Param-Token``: both present and equal
    (sentinel-decoded; booleans as true/false, integers compared as numbers),
    or both absent.
    """
    for path, token, prop in _annotated(schema, ()):
        header = f"mcp-param-{token.lower()}"
        raw = headers.get(header)
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            if raw is not None:
                return f"Mcp-Param-{token} is sent but the argument {'.'.join(path)!r} is not"
            continue
        rendered = (
            ("true" if value else "false")
            if isinstance(value, bool)
            else (str(value) if isinstance(value, str | int | float) else None)
        )
        if raw is None:
            if rendered is None:
                continue
            return f"Mcp-Param-{token} is missing but the argument {'.'.join(path)!r} is present"
        decoded = decode_header(raw.strip())
        if decoded is None or rendered is None:
            return f"Mcp-Param-{token} does not match the argument {'.'.join(path)!r}"
        if (
            prop.get("type") == "integer"
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ):
            try:
                if float(decoded) == float(value) and float(value).is_integer():
                    continue
            except ValueError:
                pass
        if decoded != rendered:
            return f"Mcp-Param-{token} does not match the argument {'.'.join(path)!r}"
    return None


def _annotated(
    schema: object, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    found: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return found
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            continue
        token = prop.get("x-mcp-header")
        if isinstance(token, str) and token:
            found.append(((*path, name), token, prop))
        found.extend(_annotated(prop, (*path, name)))
    return found
