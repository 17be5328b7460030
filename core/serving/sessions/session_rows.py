"""One saved handshake-era session, and the check each saved row passes before it is believed.

The saved-sessions files (core.serving.sessions.session_file) are input like any
other: any local process of the user may have written them. So a row is
taken field by field, each against the shape the gateway itself writes
(``SavedSession``), and a row that fails is dropped with the reason,
naming its field: a session that cannot be trusted is one its client
opens again, where a wrong type would fail every request of that session
later (a string as capabilities), or mean something else (a string as
subscriptions, subscribed one character at a time).
"""

import json
import math
from dataclasses import dataclass, field
from typing import Any, Final

from core.base.errors import BadRow
from core.protocol.jsonrpc import HANDSHAKE_PROTOCOL_VERSIONS, MAX_NESTING
from core.protocol.streamable import SESSION_IDLE_TIMEOUT_SECONDS
from core.settings.filereader import nested_deeper

#: The most characters of a session id (the gateway's are 32 hex digits).
MAX_ID_CHARS: Final = 128
#: The most characters of a name (server, client, worker identity, log level).
MAX_NAME_CHARS: Final = 256
#: The most bytes one row may take: a client's capabilities and info are a few hundred;
#: a session whose row is bigger is not kept (its client opens a new one after a restart).
MAX_ROW_BYTES: Final = 16 * 1024
#: How far in the future ``last_active`` may be (a clock set back), not a row that never expires.
FUTURE_SLACK_SECONDS: Final = SESSION_IDLE_TIMEOUT_SECONDS
#: What a session's ``kind`` may be.
KINDS: Final = ("http", "bridge")


@dataclass
class SavedSession:
    """What a handshake-era session needs to go on in the next tray."""

    id: str
    #: The server (``echo``), or the aggregate or profile (``@all``, ``@coding``).
    server: str
    protocol_version: str
    kind: str
    client_name: str
    worker_identity: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    subscriptions: list[str] = field(default_factory=list)
    log_level: str | None = None
    #: Wall-clock seconds of its last request (the next tray's clock is another).
    last_active: float = 0.0

    def to_json(self) -> str:
        # Its fields as they are: json.dumps copies nothing (asdict would deep-copy each
        # value first, most of a 10,000-row start).
        return json.dumps(vars(self))


def parse_row(raw: Any, now: float) -> SavedSession:
    """The session a row stands for, or ``BadRow`` naming the field that is wrong."""
    if not isinstance(raw, dict):
        raise BadRow(f"a row is a JSON object, not {_kind(raw)}")
    saved = SavedSession(
        id=_name(raw, "id", MAX_ID_CHARS),
        server=_name(raw, "server", MAX_NAME_CHARS),
        protocol_version=_version(raw),
        kind=_choice(raw, "kind", KINDS),
        client_name=_name(raw, "client_name", MAX_NAME_CHARS),
        worker_identity=_optional_name(raw, "worker_identity"),
        capabilities=_capabilities(raw),
        client_info=_client_info(raw),
        subscriptions=_subscriptions(raw),
        log_level=_optional_name(raw, "log_level"),
        last_active=_time(raw, now),
    )
    if not saved.id.isascii() or not saved.id.isprintable() or " " in saved.id:
        raise BadRow("'id' is not a session id (visible ASCII characters)")
    return saved


def _kind(value: Any) -> str:
    """A JSON value's kind, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _name(raw: dict[str, Any], key: str, limit: int) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise BadRow(f"{key!r} is a non-empty string, not {_kind(value)}")
    if len(value) > limit:
        raise BadRow(f"{key!r} has {len(value)} characters, more than {limit}")
    return value


def _optional_name(raw: dict[str, Any], key: str) -> str | None:
    return None if raw.get(key) is None else _name(raw, key, MAX_NAME_CHARS)


def _choice(raw: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = raw.get(key)
    if value not in allowed:
        shown = repr(value)[:40]
        raise BadRow(f"{key!r} is one of {', '.join(allowed)}, not {shown}")
    assert isinstance(value, str)
    return value


def _version(raw: dict[str, Any]) -> str:
    return _choice(raw, "protocol_version", HANDSHAKE_PROTOCOL_VERSIONS)


def _object(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw[key]
    if not isinstance(value, dict):
        raise BadRow(f"{key!r} is a JSON object, not {_kind(value)}")
    if nested_deeper(value, MAX_NESTING):
        raise BadRow(f"{key!r} is nested deeper than {MAX_NESTING} levels")
    return value


def _capabilities(raw: dict[str, Any]) -> dict[str, Any]:
    if "capabilities" not in raw:
        return {}
    capabilities = _object(raw, "capabilities")
    for name, value in capabilities.items():
        # Every capability a client declares is an object ({"roots": {"listChanged": true}}).
        if not isinstance(value, dict):
            raise BadRow(f"'capabilities.{name[:40]}' is a JSON object, not {_kind(value)}")
    return capabilities


def _client_info(raw: dict[str, Any]) -> dict[str, Any] | None:
    if raw.get("client_info") is None:
        return None
    info = _object(raw, "client_info")
    if "name" in info and not isinstance(info["name"], str):
        raise BadRow(f"'client_info.name' is a string, not {_kind(info['name'])}")
    return info


def _subscriptions(raw: dict[str, Any]) -> list[str]:
    value = raw.get("subscriptions", [])
    if not isinstance(value, list):
        raise BadRow(f"'subscriptions' is an array of resource URIs, not {_kind(value)}")
    for uri in value:
        if not isinstance(uri, str) or not uri:
            raise BadRow(f"'subscriptions' holds resource URIs (strings), not {_kind(uri)}")
    return list(value)


def _time(raw: dict[str, Any], now: float) -> float:
    value = raw.get("last_active")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(f"'last_active' is a number of seconds, not {_kind(value)}")
    if not math.isfinite(value):
        raise BadRow(f"'last_active' is a finite number of seconds, not {value}")
    if value > now + FUTURE_SLACK_SECONDS:
        raise BadRow(f"'last_active' ({value!r}) is in the future")
    return float(value)
