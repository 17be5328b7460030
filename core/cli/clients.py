"""Other AI clients' config files: snippets that point them at mcp-tray, and imports.

``client_snippet`` prints, in each client's own format, either a stdio entry
that launches ``mcp-tray connect NAME`` (works with every client) or an HTTP
entry for the local gateway. ``import_servers`` reads a client's servers and
merges them into mcp-tray's config: no duplicates, remote entries and
entries that already point at mcp-tray left out, secret-looking literal env
values offered a move into the keyring.
"""

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.base.envvars import CLIENT_NAME_ENV, HOME_ENV
from core.base.errors import ConfigError, SnippetError
from core.cli import integrations
from core.cli.desktop_entry import launcher_argv
from core.platform.files import private_dirs
from core.protocol.headers import IDENTITY_HEADER
from core.settings.config import KEYRING_REF_RE, ServerConfig, parse_config
from core.settings.paths import Paths
from core.settings.profiles import client_entry_name

SECRET_KEY_RE: Final = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_PLACEHOLDER_RE: Final = re.compile(r"\$\{[^}]*\}")


def client_snippet(
    client: str,
    names: list[str],
    *,
    http_url: str | None = None,
    token: str | None = None,
    home: str | None = None,
) -> dict[str, Any]:
    """``client``'s config for ``names``: bridge entries, or HTTP ones at ``http_url``.

    A name is a server's, or a profile's (``@coding``, ``@all``): one entry
    then serves all of its servers (core.settings.profiles names it).

    ``home`` (an absolute ``MCP_TRAY_HOME``) goes into each bridge entry's
    env: the client launches the bridge without the environment this command
    ran in, and a bridge under another home finds no tray (or another one).
    An HTTP entry needs nothing of the kind: the URL names the tray.
    """
    spec = integrations.client(client)
    entries: dict[str, Any] = {}
    for name in names:
        if http_url is None:
            launcher = launcher_argv()
            env = {CLIENT_NAME_ENV: spec.registered_as}
            if home is not None:
                env[HOME_ENV] = home
            entry: dict[str, Any] = {
                "command": launcher[0],
                "args": [*launcher[1:], "connect", name],
                "env": env,
            }
            if spec.entry_types is not None:
                entry = {"type": spec.entry_types[0], **entry}
        else:
            if not spec.http:
                raise SnippetError(
                    f"{spec.label}'s config launches stdio servers only: use --bridge (the default)"
                )
            path = spec.http_path.format(name=name)
            # The identity header names the client in the tray's Sessions (core.serving.identity).
            headers = {"Authorization": f"Bearer {token}", IDENTITY_HEADER: spec.registered_as}
            entry = {"url": http_url + path, "headers": headers}
            if spec.entry_types is not None:
                entry = {"type": spec.entry_types[1], **entry}
        entries[client_entry_name(name)] = entry
    return {spec.key: entries}


def strip_jsonc(text: str) -> str:
    """VS Code's files allow comments and trailing commas; JSON does not."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(ch)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            path, f"no {client} config here", fix="pass --path with the client's config file"
        ) from None
    try:
        data = json.loads(strip_jsonc(text))
    except ValueError as exc:
        raise ConfigError(
            path, f"not valid JSON ({exc})", fix="open it in the client and save it again"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            path, "the top level is not an object", fix="point --path at the client's MCP config"
        )
    servers = data.get("mcpServers")
    if servers is None:
        servers = data.get(
            "servers",
            (data.get("mcp") or {}).get("servers") if isinstance(data.get("mcp"), dict) else None,
        )
    if not isinstance(servers, dict):
        raise ConfigError(
            path,
            "no MCP servers in it (no 'mcpServers' or 'servers' object)",
            fix="point --path at the client's MCP config",
        )
    return {name: entry for name, entry in servers.items() if isinstance(entry, dict)}


def _importable(name: str, entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if "url" in entry or entry.get("type") in ("http", "sse", "streamable-http"):
        return None, "a remote (URL) server; clients reach those directly"
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        return None, "no command"
    args = entry.get("args", [])
    if Path(command).name == "mcp-tray" and args[:1] == ["connect"]:
        return None, "already goes through mcp-tray"
    kept: dict[str, Any] = {k: entry[k] for k in ("command", "args", "env", "cwd") if k in entry}
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
    if config_path.exists():
        text = config_path.read_text(encoding="utf-8")
        parse_config(text, config_path)  # refuse to edit a broken config
        document = json.loads(text)
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
        text = json.dumps(document, indent=2) + "\n"
        parse_config(text, config_path)
        private_dirs(config_path.parent)
        tmp = config_path.with_name(f".{config_path.name}.import.tmp")
        tmp.write_text(text, encoding="utf-8")
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


def run_import(args: argparse.Namespace, paths: Paths) -> int:
    from core.base.errors import SecretStoreError
    from core.settings.secrets import set_secret

    source_path = args.path or integrations.client_config_path(args.client)
    source = read_client_servers(args.client, source_path)
    config_path = args.config or paths.config_file
    interactive = sys.stdin.isatty()

    def move_secret(name: str, value: str) -> bool:
        choice = args.move_secrets
        if choice == "ask":
            if not interactive:
                return False
            answer = (
                input(f"move the literal value of {name} into the OS keyring? [Y/n] ")
                .strip()
                .lower()
            )
            if answer not in ("", "y", "yes"):
                return False
        elif choice == "no":
            return False
        try:
            set_secret(name, value)
        except SecretStoreError as exc:
            print(f"mcp-tray: kept {name} as plain text: {exc}", file=sys.stderr)
            return False
        return True

    report = import_servers(args.client, source, config_path, move_secret=move_secret)
    print(f"importing {args.client} servers from {source_path} into {config_path}")
    for line in report.lines():
        print(f"  {line}")
    return 0
