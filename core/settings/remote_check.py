"""A remote server's entry, checked: ``"url"``, ``"headers"``, ``"transport"``, ``"allow_insecure"``.

A remote runs elsewhere: none of a local command's keys mean anything for it
(core.settings.config_model.LOCAL_ONLY_KEYS), and each is refused by name
rather than ignored. Plain ``http://`` leaves the machine in clear text, so a
URL whose host is not this machine's loopback needs ``"allow_insecure":
true``: the headers (an API key, a token) would otherwise travel readable.
"""

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from core.settings.config_model import (
    LOCAL_ONLY_KEYS,
    REMOTE_TRANSPORTS,
    OAuthClient,
    RemoteConfig,
)
from core.settings.profiles import Problems

#: The keys the other clients use for a URL, and ours.
URL_ALIASES: Final = ("serverUrl", "httpUrl")
#: ``"type"`` as clients write it for a remote entry, and the transport each means.
REMOTE_TYPES: Final = {
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "sse": "sse",
}
#: Headers the transport itself sets: a config that set them would break the session.
RESERVED_HEADERS: Final = frozenset(
    {
        "accept",
        "content-type",
        "content-length",
        "host",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "connection",
        "transfer-encoding",
    }
)
#: RFC 9110's token: what a header's name may hold.
_HEADER_NAME_RE: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
OAUTH_KEYS: Final = ("client_id", "client_secret", "scopes", "redirect_port")
#: The longest URL accepted (servers and proxies refuse longer request lines).
MAX_URL_CHARS: Final = 2048


def is_remote_entry(entry: Mapping[str, Any]) -> bool:
    return "url" in entry


def check_remote(
    entry: Mapping[str, Any],
    keys: list[str | int],
    problems: Problems,
    check_secret: Callable[[list[str | int], str], str],
) -> RemoteConfig:
    """The remote part of an entry that has ``"url"``."""
    for key in LOCAL_ONLY_KEYS:
        if key in entry:
            raise problems.error(
                [*keys, key],
                f'a remote server (it has "url") runs elsewhere: "{key}" applies only to a '
                "local command",
                fix=f'remove "{key}", or remove "url" to run a local command',
            )
    url = check_url(entry["url"], [*keys, "url"], problems, entry.get("allow_insecure", False))
    transport = check_transport(entry, keys, problems)
    raw = entry.get("headers", {})
    if not isinstance(raw, dict):
        raise problems.error(
            [*keys, "headers"],
            f"must be an object, got {problems.describe(raw)}",
            fix='write "headers": {"X-Api-Key": "${keyring:NAME}"}',
        )
    headers: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in raw.items():
        where = [*keys, "headers", name]
        if not _HEADER_NAME_RE.fullmatch(name):
            raise problems.error(
                where,
                "a header's name may hold only letters, digits and !#$%&'*+.^_`|~-",
                fix="use the header's name as the server's documentation spells it",
            )
        if name.lower() in RESERVED_HEADERS:
            raise problems.error(
                where,
                f"{name} is set by the transport itself (MCP's streamable HTTP)",
                fix=f'remove "{name}"',
            )
        if name.lower() in seen:
            raise problems.error(
                where,
                "this header is given twice (header names do not care about case)",
                fix="keep one of them",
            )
        seen.add(name.lower())
        if not isinstance(value, str):
            raise problems.error(
                where,
                f"a header's value must be a string, got {problems.describe(value)}",
                fix=f'quote it: "{name}": {json.dumps(json.dumps(value))}',
            )
        if any(c in value for c in "\r\n\0"):
            raise problems.error(
                where,
                "a header's value may not hold a line break or a NUL",
                fix="put the value on one line",
            )
        headers[name] = check_secret(where, value)
    oauth = (
        check_oauth(entry["oauth"], [*keys, "oauth"], problems, check_secret)
        if "oauth" in entry
        else None
    )
    return RemoteConfig(url=url, headers=headers, transport=transport, oauth=oauth)


def check_oauth(
    raw: object,
    keys: list[str | int],
    problems: Problems,
    check_secret: Callable[[list[str | int], str], str],
) -> OAuthClient:
    """``"oauth"``: the client registered by hand, for a server without dynamic registration."""
    example = '{"client_id": "…", "client_secret": "${keyring:NAME}", "scopes": ["read"]}'
    if not isinstance(raw, dict):
        raise problems.error(
            keys, f"must be an object, got {problems.describe(raw)}", fix=f"write {example}"
        )
    for key in raw:
        if key not in OAUTH_KEYS:
            raise problems.error(
                [*keys, key],
                "unknown key" + (problems.hint(key, OAUTH_KEYS) if isinstance(key, str) else ""),
                fix=f'use one of {", ".join(OAUTH_KEYS)}, or remove it (leave "oauth" out '
                "altogether where the server registers clients by itself)",
            )
    client_id = raw.get("client_id")
    if not isinstance(client_id, str) or not client_id.strip():
        raise problems.error(
            [*keys, "client_id"],
            f"must be the client id the server's owner gave you, got {problems.describe(client_id)}",
            fix=f"write {example}",
        )
    secret = raw.get("client_secret")
    if secret is not None and (not isinstance(secret, str) or not secret):
        raise problems.error(
            [*keys, "client_secret"],
            f"must be a string, got {problems.describe(secret)}",
            fix='keep it in the keyring: "client_secret": "${keyring:NAME}" (mcp-tray secret set '
            "NAME), or leave it out for a public client",
        )
    scopes = raw.get("scopes", [])
    if not isinstance(scopes, list) or not all(
        isinstance(x, str) and x and " " not in x for x in scopes
    ):
        raise problems.error(
            [*keys, "scopes"],
            f"must be a list of scope names (no spaces), got {problems.describe(scopes)}",
            fix='write "scopes": ["read", "write"]',
        )
    port = raw.get("redirect_port")
    if port is not None and (type(port) is not int or not 1024 <= port <= 65535):
        raise problems.error(
            [*keys, "redirect_port"],
            f"must be a port from 1024 to 65535, got {problems.describe(port)}",
            fix="the port of the redirect URI registered with the client "
            "(http://127.0.0.1:PORT/callback), or leave it out",
        )
    return OAuthClient(
        client_id=client_id,
        client_secret=check_secret([*keys, "client_secret"], secret) if secret else None,
        scopes=tuple(scopes),
        redirect_port=port,
    )


def check_url(value: object, keys: list[str | int], problems: Problems, insecure: object) -> str:
    if not isinstance(insecure, bool):
        raise problems.error(
            [*keys[:-1], "allow_insecure"],
            f"must be true or false, got {problems.describe(insecure)}",
            fix='write "allow_insecure": true (only for a server you trust on your own network)',
        )
    example = "https://example.com/mcp"
    if not isinstance(value, str) or not value.strip():
        raise problems.error(
            keys,
            f"must be the server's URL, got {problems.describe(value)}",
            fix=f"write the URL its documentation gives, e.g. {json.dumps(example)}",
        )
    if len(value) > MAX_URL_CHARS or any(c.isspace() or not c.isprintable() for c in value):
        raise problems.error(
            keys,
            f"is not a URL (it holds spaces or control characters, or is over {MAX_URL_CHARS} "
            "characters)",
            fix=f"write the URL its documentation gives, e.g. {json.dumps(example)}",
        )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise problems.error(
            keys, f"is not a URL: {exc}", fix=f"e.g. {json.dumps(example)}"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise problems.error(
            keys,
            "must be an http:// or https:// URL with a host",
            fix=f"e.g. {json.dumps(example)}",
        )
    if parts.username is not None or parts.password is not None:
        raise problems.error(
            keys,
            "holds a user name or password: it would be shown wherever the URL is",
            fix='remove it from the URL and send it in "headers" (e.g. "Authorization": '
            '"Basic ${keyring:NAME}")',
        )
    if parts.fragment:
        raise problems.error(
            keys, "holds a #fragment, which is never sent to a server", fix="remove the #…"
        )
    if parts.scheme == "http" and not _loopback(parts.hostname) and insecure is not True:
        raise problems.error(
            keys,
            f"is plain http:// to {parts.hostname}{'' if port is None else f':{port}'}: "
            "what it sends (its headers, your data) would cross the network unencrypted",
            fix='use https://, or add "allow_insecure": true for a server you trust on your '
            "own network",
        )
    return value


def check_transport(entry: Mapping[str, Any], keys: list[str | int], problems: Problems) -> Any:
    kind = entry.get("type")
    transport = entry.get("transport")
    if kind is not None and (not isinstance(kind, str) or kind not in REMOTE_TYPES):
        raise problems.error(
            [*keys, "type"],
            f"a remote server's type is one of {', '.join(REMOTE_TYPES)}, got "
            f"{problems.describe(kind)}",
            fix='remove "type" (streamable HTTP is the default), or write "transport": "sse" '
            "for a server of the older HTTP+SSE transport",
        )
    if transport is not None and (
        not isinstance(transport, str) or transport not in REMOTE_TRANSPORTS
    ):
        raise problems.error(
            [*keys, "transport"],
            f"must be one of {', '.join(REMOTE_TRANSPORTS)}, got {problems.describe(transport)}"
            + (problems.hint(transport, REMOTE_TRANSPORTS) if isinstance(transport, str) else ""),
            fix='"streamable-http" (the default) for today\'s servers; "sse" for the older '
            "HTTP+SSE ones (their URL usually ends in /sse)",
        )
    implied = REMOTE_TYPES[kind] if kind is not None else None
    if transport is not None and implied is not None and transport != implied:
        raise problems.error(
            [*keys, "transport"],
            f'says "{transport}" but "type" says "{kind}"',
            fix='keep one of them ("transport" is enough)',
        )
    return transport or implied or "streamable-http"


def _loopback(host: str) -> bool:
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
