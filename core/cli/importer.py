"""A client's servers merged into mcp-tray's config (``mcp-tray import CLIENT``).

``read_client_servers`` reads the client's file through the hostile-file
reader, in its own format (JSON, or TOML for Codex); ``import_servers``
merges them into mcp-tray's config: no duplicates, entries that already
point at mcp-tray left out, secret-looking literal env values and header
values offered a move into the keyring.

A remote entry (``"url"``, Gemini CLI's ``"httpUrl"``, Windsurf's
``"serverUrl"``, or a ``"type"`` of http, sse or streamable-http) becomes
one of mcp-tray's own (core.settings.remote_check): ``"url"``, its
``"headers"``, and ``"transport": "sse"`` for the older HTTP+SSE servers.
Nothing is weakened on the way: plain ``http://`` to another machine is
left for the user to add by hand with ``"allow_insecure": true``, and what
only the client can do (fill in ``${env:X}``, sign in with OAuth, run a
headers helper) keeps the entry in the client, each with its reason.
"""

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from core.base.errors import ConfigError
from core.cli import integrations
from core.cli.client_files import JsonFile, file_of, read, strip_jsonc
from core.cli.install import is_mcp_tray_entry
from core.platform.files import line_ending, private_dirs, with_line_ending
from core.settings.config import CONFIG_FILE, KEYRING_REF_RE, ServerConfig, parse_config
from core.settings.config_model import RemoteConfig, RemoteTransport
from core.settings.filereader import read_text
from core.settings.remote_check import REMOTE_TYPES, URL_ALIASES, is_remote_entry

SECRET_KEY_RE: Final = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
#: A header whose literal value is a credential: these, or a name SECRET_KEY_RE matches.
SECRET_HEADER_RE: Final = re.compile(r"AUTHORIZATION|COOKIE", re.IGNORECASE)
_PLACEHOLDER_RE: Final = re.compile(r"\$\{[^}]*\}")
#: ``Bearer sk-…``: the scheme stays in the config, only the credential moves.
_AUTH_SCHEME_RE: Final = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+ +)(\S+)")
#: What marks an entry as a remote server: a URL key, or a "type" saying so.
_URL_KEYS: Final = ("url", *URL_ALIASES)
#: A remote's headers: "headers" (Claude Code, Cursor, VS Code, Gemini CLI, Windsurf), Codex's.
_HEADER_KEYS: Final = ("headers", "http_headers")
#: Keys by which a client signs in to a remote with OAuth (Claude Code, Gemini CLI, Cursor).
_OAUTH_KEYS: Final = ("oauth", "authProviderType", "auth")
#: Keys by which a client makes a remote's credentials itself (Claude Code, Codex).
_CLIENT_CREDENTIAL_KEYS: Final = ("headersHelper", "bearer_token_env_var", "env_http_headers")


@dataclass
class ImportReport:
    added: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    secrets_moved: list[str] = field(default_factory=list)
    secrets_kept: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"added {name}" for name in self.added]
        out += [
            f"added {new} (a different {old!r} is already configured)" for old, new in self.renamed
        ]
        out += [f"already there: {name}" for name in self.duplicates]
        out += [f"skipped {name}: {why}" for name, why in self.skipped]
        out += [f"moved to the keyring: {name}" for name in self.secrets_moved]
        out += [
            f"left as plain text (move it with mcp-tray secret set): {name}"
            for name in self.secrets_kept
        ]
        return out or ["nothing to import"]


def read_client_servers(client: str, path: Path) -> dict[str, dict[str, Any]]:
    """The servers in ``client``'s file at ``path``, by name."""
    text = read(path)
    if text is None:
        raise ConfigError(
            path, f"no {client} config here", fix="pass --path with the client's config file"
        )
    spec = integrations.client(client)
    shape = file_of(spec)
    if isinstance(shape, JsonFile):
        # Comments and trailing commas (VS Code, Gemini CLI) are no reason to refuse a read.
        try:
            data = json.loads(strip_jsonc(text)) if text.strip() else {}
        except ValueError as exc:
            raise ConfigError(
                path, f"not valid JSON ({exc})", fix="open it in the client and save it again"
            ) from None
    else:
        data = shape.load(text, path, client)
    if not isinstance(data, dict):
        raise ConfigError(
            path, "the top level is not an object", fix="point --path at the client's MCP config"
        )
    servers = next(
        (data[key] for key in (spec.key, "mcpServers", "servers") if key in data),
        (data.get("mcp") or {}).get("servers") if isinstance(data.get("mcp"), dict) else None,
    )
    if not isinstance(servers, dict):
        raise ConfigError(
            path,
            f"no MCP servers in it (no {spec.key!r} or 'servers' object)",
            fix="point --path at the client's MCP config",
        )
    return {name: entry for name, entry in servers.items() if isinstance(entry, dict)}


def _importable(client: str, name: str, entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if is_mcp_tray_entry(name, entry):
        return None, "already goes through mcp-tray"
    kind = entry.get("type")
    if any(key in entry for key in _URL_KEYS) or (isinstance(kind, str) and kind in REMOTE_TYPES):
        return _importable_remote(client, entry)
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        return None, "no command"
    args = entry.get("args", [])
    kept: dict[str, Any] = {k: entry[k] for k in ("command", "args", "env", "cwd") if k in entry}
    if entry.get("enabled") is False:  # switched off in Codex: imported, and off here too
        kept["disabled"] = True
    for value in [command, *(a for a in args if isinstance(a, str)), entry.get("cwd") or ""]:
        placeholder = _PLACEHOLDER_RE.search(value)
        if placeholder is not None:
            return (
                None,
                f"uses {placeholder.group(0)}, which only the client can fill in; add it by hand",
            )
    return kept, ""


def _importable_remote(client: str, entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A client's remote entry as mcp-tray's own (core.settings.remote_check), or why not."""
    if any(key in entry for key in _OAUTH_KEYS):
        return (
            None,
            "names an OAuth client or provider of its own, which mcp-tray cannot use yet "
            "(it signs in with dynamic registration only); keep it in the client",
        )
    helper = next((key for key in _CLIENT_CREDENTIAL_KEYS if key in entry), None)
    if helper is not None:
        return (
            None,
            f'gets its credentials through "{helper}", which only the client reads; add it '
            'by hand with its "headers"',
        )
    if "command" in entry:
        return None, "has both a URL and a command; add it by hand as the one the client runs"
    urls = {key: entry[key] for key in _URL_KEYS if key in entry}
    if not urls:
        return None, f'has "type": {_shown(entry["type"])} but no URL'
    if len({_shown(url) for url in urls.values()}) > 1:
        return (
            None,
            f"gives more than one URL ({', '.join(urls)}); add it by hand with the one the "
            "client uses",
        )
    url_key, url = next(iter(urls.items()))
    said: set[str] = {"streamable-http"} if "httpUrl" in urls else set()
    for key in ("type", "transport"):
        if key in entry:
            kind = entry[key]
            if not isinstance(kind, str) or kind not in REMOTE_TYPES:
                return (
                    None,
                    f'has "{key}": {_shown(kind)}, not a transport mcp-tray knows '
                    f"({', '.join(REMOTE_TYPES)}); add it by hand",
                )
            said.add(REMOTE_TYPES[kind])
    if len(said) > 1:
        return (
            None,
            "names two transports (streamable HTTP and SSE); add it by hand with the one the "
            "server speaks",
        )
    if said:
        transport = said.pop()
    elif client == "gemini" and url_key == "url":
        transport = "sse"  # Gemini CLI reaches a bare "url" over SSE, "httpUrl" over HTTP
    else:
        transport = "sse" if _path_of(url).rstrip("/").endswith("/sse") else "streamable-http"
    headers: object = next((entry[key] for key in _HEADER_KEYS if key in entry), {})
    if not isinstance(headers, dict):
        return None, f"its headers are not an object (got {_shown(headers)}); add it by hand"
    for header, value in headers.items():
        if not isinstance(value, str):
            return (
                None,
                f"its {header} header is not text (got {_shown(value)}); add it by hand with "
                "the value quoted",
            )
    for value in [url if isinstance(url, str) else "", *headers.values()]:
        placeholder = _client_placeholder(value)
        if placeholder is not None:
            return None, f"uses {placeholder}, which only the client can fill in; add it by hand"
    kept: dict[str, Any] = {"url": url}
    if headers:
        kept["headers"] = dict(headers)
    if transport == "sse":
        kept["transport"] = "sse"
    if entry.get("enabled") is False:
        kept["disabled"] = True
    refused = _refusal(kept)
    if refused is not None and _refusal({**kept, "allow_insecure": True}) != refused:
        # Only "allow_insecure" would make it acceptable: never written on the user's behalf.
        return (
            None,
            f"is plain http:// to {urlsplit(url).netloc}: its headers and your data would cross "
            "the network unencrypted; if you trust that network, add it by hand with "
            '"allow_insecure": true',
        )
    if refused is not None:
        return None, refused
    return kept, ""


def _client_placeholder(value: str) -> str | None:
    """The first ``${…}`` in ``value`` that only the client fills in (``${keyring:NAME}`` is ours)."""
    for match in _PLACEHOLDER_RE.finditer(value):
        if KEYRING_REF_RE.fullmatch(match.group(0)) is None:
            return match.group(0)
    return None


def _refusal(entry: dict[str, Any]) -> str | None:
    """Why mcp-tray's config would refuse ``entry``, or None when it takes it."""
    try:
        parse_config(json.dumps({"mcpServers": {"x": entry}}, default=str), Path("config.json"))
    except ConfigError as exc:
        where = (exc.key or "").removeprefix("mcpServers.x").lstrip(".") or "entry"
        return f"mcp-tray refuses its {where}: {exc.problem}; add it by hand ({exc.fix})"
    return None


def _shown(value: object) -> str:
    return json.dumps(value, default=str)


def _path_of(url: object) -> str:
    try:
        return urlsplit(url).path if isinstance(url, str) else ""
    except ValueError:
        return ""


@dataclass(frozen=True)
class _Secret:
    """A literal secret in an entry: where it is, and the part of its value that would move."""

    section: str  # "env" or "headers"
    key: str
    #: What stays in the config before the keyring reference: an Authorization's scheme.
    scheme: str
    value: str


def _literal_secrets(entry: dict[str, Any]) -> list[_Secret]:
    """The secret-looking literal values of ``entry``'s env and headers."""
    found: list[_Secret] = []
    for section in ("env", "headers"):
        values = entry.get(section)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            looks_secret = SECRET_KEY_RE.search(key) or (
                section == "headers" and SECRET_HEADER_RE.search(key)
            )
            if not (isinstance(value, str) and value and looks_secret):
                continue
            if KEYRING_REF_RE.search(value):
                continue
            scheme = (
                _AUTH_SCHEME_RE.fullmatch(value)
                if section == "headers" and key.lower().endswith("authorization")
                else None
            )
            if scheme is not None:
                found.append(_Secret(section, key, scheme.group(1), scheme.group(2)))
            else:
                found.append(_Secret(section, key, "", value))
    return found


def _secret_name(server: str, key: str) -> str:
    """The keyring entry of a secret moved from ``server``'s env variable or header ``key``."""
    return f"{server}.{key}"


def _reference(server: str, secret: _Secret) -> str:
    """What the config holds for ``secret`` once moved: ``Bearer ${keyring:NAME}``."""
    return f"{secret.scheme}${{keyring:{_secret_name(server, secret.key)}}}"


def _with_keyring_ref(entry: dict[str, Any], server: str, secret: _Secret) -> dict[str, Any]:
    """``entry`` with ``secret`` read from the keyring entry named for ``server``."""
    return {
        **entry,
        secret.section: {**entry[secret.section], secret.key: _reference(server, secret)},
    }


def import_servers(
    client: str,
    source: dict[str, dict[str, Any]],
    config_path: Path,
    *,
    move_secret: Callable[[str, str], bool],
) -> ImportReport:
    """Merge ``source`` into the config at ``config_path`` (created if absent)."""
    report = ImportReport()
    original = read_text(config_path, CONFIG_FILE) if config_path.exists() else None
    if original is not None:
        parse_config(original, config_path)  # refuse to edit a broken config
        document = json.loads(original)
    else:
        document = {"mcpServers": {}}
    servers: dict[str, Any] = document.setdefault("mcpServers", {})
    for name, entry in source.items():
        kept, why = _importable(client, name, entry)
        if kept is None:
            report.skipped.append((name, why))
            continue
        secrets = _literal_secrets(kept)
        existing = _configured_as(name, kept, secrets, servers, config_path)
        if existing:
            report.duplicates.append(name if name in existing else f"{name} (as {existing[0]})")
            continue
        target = name
        if target in servers:
            target = f"{name}-{client}"
            suffix = 2
            while target in servers:
                target = f"{name}-{client}-{suffix}"
                suffix += 1
            report.renamed.append((name, target))
        else:
            report.added.append(name)
        for secret in secrets:
            label = f"{target} {secret.key}"
            if move_secret(_secret_name(target, secret.key), secret.value):
                kept = _with_keyring_ref(kept, target, secret)
                report.secrets_moved.append(label)
            else:
                report.secrets_kept.append(label)
        servers[target] = kept
    if report.added or report.renamed:
        text = with_line_ending(json.dumps(document, indent=2) + "\n", line_ending(original))
        parse_config(text, config_path)
        private_dirs(config_path.parent)
        tmp = config_path.with_name(f".{config_path.name}.import.tmp")
        tmp.write_bytes(text.encode("utf-8"))  # bytes: the ending chosen here, on every OS
        os.replace(tmp, config_path)
    return report


def _configured_as(
    name: str,
    kept: dict[str, Any],
    secrets: list[_Secret],
    servers: dict[str, Any],
    path: Path,
) -> list[str]:
    """The configured servers that launch ``kept`` already: as it is, or as an earlier
    import wrote it (any of its literal secrets moved to the keyring under that server's
    name, so the same entry imported twice is "already there" whatever was moved)."""
    candidate = _as_config(name, kept, path).launch_key()
    return [
        other
        for other, entry in servers.items()
        if _as_config(other, _with_literals(entry, other, secrets), path).launch_key() == candidate
    ]


def _with_literals(entry: dict[str, Any], server: str, secrets: list[_Secret]) -> dict[str, Any]:
    """``entry``, configured as ``server``, with the keyring references an import of
    ``secrets`` would have written there put back to their literal values."""
    out = dict(entry)
    for secret in secrets:
        values = out.get(secret.section)
        if isinstance(values, dict) and values.get(secret.key) == _reference(server, secret):
            out[secret.section] = {**values, secret.key: secret.scheme + secret.value}
    return out


def _as_config(name: str, entry: dict[str, Any], path: Path) -> ServerConfig:
    """An entry as mcp-tray would launch it (for duplicate detection)."""
    try:
        return parse_config(json.dumps({"mcpServers": {"x": entry}}), path).servers["x"]
    except ConfigError:
        if is_remote_entry(entry):
            headers = entry.get("headers")
            said = entry.get("transport", entry.get("type"))
            transport: RemoteTransport = "sse" if said == "sse" else "streamable-http"
            remote = RemoteConfig(
                url=str(entry["url"]),
                headers={str(k): str(v) for k, v in headers.items()}
                if isinstance(headers, dict)
                else {},
                transport=transport,
            )
            return ServerConfig(name=name, command="", remote=remote)
        return ServerConfig(
            name=name,
            command=str(entry.get("command")),
            args=tuple(map(str, entry.get("args", []))),
        )
