"""Remote entries (``"url"``) in the config: what is accepted, and each refusal's key and fix."""

import json
from pathlib import Path
from typing import Any

import pytest

from core.base.errors import ConfigError
from core.settings.config import load_config
from core.settings.config_model import ServerConfig


def load_entry(tmp_path: Path, entry: dict[str, Any]) -> ServerConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {"remote": entry}}))
    return load_config(path).servers["remote"]


def refusal(tmp_path: Path, entry: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_entry(tmp_path, entry)
    return caught.value


def test_a_url_entry_with_a_keyring_header_is_a_remote_server(tmp_path: Path) -> None:
    config = load_entry(
        tmp_path,
        {"url": "https://example.com/mcp", "headers": {"X-Api-Key": "${keyring:example}"}},
    )

    assert config.remote is not None
    assert config.remote.url == "https://example.com/mcp"
    assert config.remote.transport == "streamable-http"
    # Resolved only at connect time: the config keeps the reference, never the secret.
    assert config.secret_values == {"X-Api-Key": "${keyring:example}"}
    assert config.shown_command == "https://example.com/mcp"


@pytest.mark.parametrize(
    ("entry", "transport"),
    [
        ({"url": "https://x.example/sse", "type": "sse"}, "sse"),
        ({"url": "https://x.example/sse", "transport": "sse"}, "sse"),
        ({"url": "https://x.example/mcp", "type": "http"}, "streamable-http"),
        # Loopback needs no TLS: nothing leaves the machine.
        ({"url": "http://127.0.0.1:8123/mcp"}, "streamable-http"),
        ({"url": "http://localhost:8123/mcp"}, "streamable-http"),
        ({"url": "http://[::1]:8123/mcp"}, "streamable-http"),
        ({"url": "http://lan-box:8123/mcp", "allow_insecure": True}, "streamable-http"),
    ],
)
def test_the_entries_clients_write_are_accepted(
    tmp_path: Path, entry: dict[str, Any], transport: str
) -> None:
    config = load_entry(tmp_path, entry)
    assert config.remote is not None and config.remote.transport == transport


@pytest.mark.parametrize(
    ("entry", "key", "problem", "fix"),
    [
        (
            {"url": "http://mcp.example.com/mcp"},
            "url",
            "unencrypted",
            '"allow_insecure": true',
        ),
        ({"url": "ftp://x.example/"}, "url", "http:// or https://", "https://example.com/mcp"),
        ({"url": "https:///mcp"}, "url", "with a host", "https://"),
        ({"url": "https://x.example:99999/"}, "url", "Port out of range", "https://"),
        ({"url": "https://a b.example/"}, "url", "spaces", "https://"),
        ({"url": "https://me:pw@x.example/"}, "url", "password", '"headers"'),
        ({"url": "https://x.example/#top"}, "url", "fragment", "remove"),
        ({"url": 7}, "url", "must be the server's URL", "https://"),
        ({"url": "https://x.example/", "command": "npx"}, "command", "runs elsewhere", "remove"),
        ({"url": "https://x.example/", "env": {}}, "env", "runs elsewhere", "remove"),
        ({"url": "https://x.example/", "sandbox": {}}, "sandbox", "runs elsewhere", "remove"),
        ({"url": "https://x.example/", "type": "stdio"}, "type", "http, streamable-http", "sse"),
        ({"url": "https://x.example/", "transport": "ws"}, "transport", "one of", "sse"),
        (
            {"url": "https://x.example/", "type": "sse", "transport": "streamable-http"},
            "transport",
            'but "type" says',
            "keep one",
        ),
        ({"url": "https://x.example/", "headers": []}, "headers", "an object", "${keyring:"),
        (
            {"url": "https://x.example/", "headers": {"Bad Name": "v"}},
            "headers.Bad Name",
            "header's name",
            "documentation",
        ),
        (
            {"url": "https://x.example/", "headers": {"mcp-session-id": "v"}},
            "headers.mcp-session-id",
            "set by the transport",
            "remove",
        ),
        (
            {"url": "https://x.example/", "headers": {"A": "x\r\nInjected: 1"}},
            "headers.A",
            "line break",
            "one line",
        ),
        ({"url": "https://x.example/", "headers": {"A": 1}}, "headers.A", "a string", "quote"),
        (
            {"url": "https://x.example/", "headers": {"A": "${env:TOKEN}"}},
            "headers.A",
            "unknown placeholder",
            "${keyring:NAME}",
        ),
        (
            {"url": "https://x.example/", "allow_insecure": "yes"},
            "allow_insecure",
            "true or",
            "true",
        ),
        ({"serverUrl": "https://x.example/"}, "serverUrl", "another client's", '"url"'),
        ({"httpUrl": "https://x.example/"}, "httpUrl", "another client's", '"url"'),
        ({"type": "http"}, "", 'no "url"', '"url"'),
        ({"command": "x", "type": []}, "type", "only stdio", '"stdio"'),
        ({"url": "https://x.example/", "type": []}, "type", "http, streamable-http", "sse"),
        ({"url": "https://x.example/", "transport": {}}, "transport", "one of", "sse"),
        ({"command": "npx", "headers": {}}, "headers", "only a remote server", '"url"'),
        ({"command": "npx", "oauth": {}}, "oauth", "only a remote server", '"url"'),
        ({"url": "https://x.example/", "oauth": []}, "oauth", "an object", "client_id"),
        ({"url": "https://x.example/", "oauth": {}}, "oauth.client_id", "client id", "client_id"),
        (
            {"url": "https://x.example/", "oauth": {"client_id": "c", "clientSecret": "s"}},
            "oauth.clientSecret",
            "unknown key",
            "client_secret",
        ),
        (
            {"url": "https://x.example/", "oauth": {"client_id": "c", "scopes": "read write"}},
            "oauth.scopes",
            "list of scope names",
            '["read", "write"]',
        ),
        (
            {"url": "https://x.example/", "oauth": {"client_id": "c", "redirect_port": 80}},
            "oauth.redirect_port",
            "1024 to 65535",
            "callback",
        ),
        (
            {"url": "https://x.example/", "oauth": {"client_id": "c", "client_secret": "${x}"}},
            "oauth.client_secret",
            "unknown placeholder",
            "${keyring:NAME}",
        ),
    ],
)
def test_each_bad_remote_entry_names_its_key_and_the_fix(
    tmp_path: Path, entry: dict[str, Any], key: str, problem: str, fix: str
) -> None:
    error = refusal(tmp_path, entry)

    assert error.key == "mcpServers.remote" + (f".{key}" if key else "")
    assert problem in str(error)
    assert fix in error.fix


def test_a_header_edit_restarts_the_remote_and_a_url_edit_too(tmp_path: Path) -> None:
    base = {"url": "https://x.example/mcp", "headers": {"A": "1"}}
    key = load_entry(tmp_path, base).launch_key()

    assert load_entry(tmp_path, base).launch_key() == key
    assert load_entry(tmp_path, {**base, "headers": {"A": "2"}}).launch_key() != key
    assert load_entry(tmp_path, {**base, "url": "https://y.example/mcp"}).launch_key() != key
    assert load_entry(tmp_path, {**base, "retry": "always"}).launch_key() == key


def test_a_client_given_by_hand_is_kept_with_its_secret_as_a_keyring_reference(
    tmp_path: Path,
) -> None:
    oauth = {
        "client_id": "given",
        "client_secret": "${keyring:tracker-secret}",
        "scopes": ["read", "write"],
        "redirect_port": 8765,
    }
    config = load_entry(tmp_path, {"url": "https://x.example/mcp", "oauth": oauth})

    assert config.remote is not None and config.remote.oauth is not None
    given = config.remote.oauth
    assert (given.client_id, given.client_secret) == ("given", "${keyring:tracker-secret}")
    assert given.scopes == ("read", "write") and given.redirect_port == 8765
