"""A client's servers merged into mcp-tray's config (``mcp-tray import CLIENT``).

``read_client_servers`` reads the client's file through the hostile-file
reader, in its own format (JSON, or TOML for Codex); ``import_servers``
merges them into mcp-tray's config: no duplicates, remote entries and
entries that already point at mcp-tray left out, secret-looking literal env
values offered a move into the keyring.
"""

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.base.errors import ConfigError
from core.cli import integrations
from core.cli.client_files import JsonFile, file_of, read, strip_jsonc
from core.cli.install import is_mcp_tray_entry
from core.platform.files import line_ending, private_dirs, with_line_ending
from core.settings.config import CONFIG_FILE, KEYRING_REF_RE, ServerConfig, parse_config
from core.settings.filereader import read_text

SECRET_KEY_RE: Final = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_PLACEHOLDER_RE: Final = re.compile(r"\$\{[^}]*\}")
#: What marks an entry as a remote server: a URL key, or a "type" saying so.
_URL_KEYS: Final = ("url", "httpUrl", "serverUrl")
_REMOTE_TYPES: Final = ("http", "sse", "streamable-http")


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


def _importable(name: str, entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if is_mcp_tray_entry(name, entry):
        return None, "already goes through mcp-tray"
    if any(key in entry for key in _URL_KEYS) or entry.get("type") in _REMOTE_TYPES:
        return None, "a remote (URL) server; clients reach those directly"
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
        kept, why = _importable(name, entry)
        if kept is None:
            report.skipped.append((name, why))
            continue
        candidate = _as_config(name, kept, config_path)
        existing = [
            n
            for n, e in servers.items()
            if _as_config(n, e, config_path).launch_key() == candidate.launch_key()
        ]
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
        env = dict(kept.get("env") or {})
        for key, value in env.items():
            if (
                isinstance(value, str)
                and SECRET_KEY_RE.search(key)
                and not KEYRING_REF_RE.search(value)
                and value
            ):
                secret_name = f"{target}.{key}"
                if move_secret(secret_name, value):
                    env[key] = f"${{keyring:{secret_name}}}"
                    report.secrets_moved.append(f"{target} {key}")
                else:
                    report.secrets_kept.append(f"{target} {key}")
        if env:
            kept["env"] = env
        servers[target] = kept
    if report.added or report.renamed:
        text = with_line_ending(json.dumps(document, indent=2) + "\n", line_ending(original))
        parse_config(text, config_path)
        private_dirs(config_path.parent)
        tmp = config_path.with_name(f".{config_path.name}.import.tmp")
        tmp.write_bytes(text.encode("utf-8"))  # bytes: the ending chosen here, on every OS
        os.replace(tmp, config_path)
    return report


def _as_config(name: str, entry: dict[str, Any], path: Path) -> ServerConfig:
    """An entry as mcp-tray would launch it (for duplicate detection)."""
    try:
        return parse_config(json.dumps({"mcpServers": {"x": entry}}), path).servers["x"]
    except ConfigError:
        return ServerConfig(
            name=name,
            command=str(entry.get("command")),
            args=tuple(map(str, entry.get("args", []))),
        )
