"""Checking a config's JSON: every problem named with its line, key and fix.

``parse_config`` turns the text into a ``TrayConfig`` (core.settings.config_model)
or raises ``ConfigError`` for the first problem in the file: invalid JSON, a
duplicate key, nesting past ``MAX_NESTING``, a value no setting can use (NaN,
a NUL, a lone surrogate), an unknown key (with a did-you-mean), a wrong
type, or a placeholder that does not resolve. Nothing half-loads.
"""

import difflib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Final

from core.base.errors import ConfigError
from core.settings.config_model import (
    DEFAULT_APPROVAL_TIMEOUT_S,
    DEFAULT_GATEWAY_PORT,
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CHILDREN,
    GATEWAY_KEYS,
    MAX_BODY_BYTES_CEILING,
    MAX_KEEPALIVE_SECONDS,
    MAX_MAX_CHILDREN,
    MIN_KEEPALIVE_SECONDS,
    NAME_RE,
    PROTOCOL_MODES,
    RETRY_POLICIES,
    SEPARATOR_CLASH_RE,
    SERVER_KEYS,
    SHARING_MODES,
    TOP_LEVEL_KEYS,
    GatewaySettings,
    ServerConfig,
    TrayConfig,
)
from core.settings.containment_check import check_limits, check_sandbox
from core.settings.journal_check import check_journal, check_telemetry
from core.settings.lean_check import check_lean
from core.settings.oversight_check import (
    check_approval_timeout,
    check_approve,
    check_on_tool_change,
)
from core.settings.paths import default_paths
from core.settings.profiles import check_profiles
from core.settings.remote_check import REMOTE_TYPES, URL_ALIASES, check_remote, is_remote_entry

#: A config is four levels deep (mcpServers, a server, its env, a value);
#: deeper nesting is a mistake or an attack, refused before anything recurses.
MAX_NESTING: Final = 32

#: What json.loads leaves of a ``\ud800`` escape without its other half
#: (it joins a proper pair into one character).
_LONE_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
_PLACEHOLDER_RE: Final = re.compile(r"\$\{([^}]*)\}")


def parse_config(text: str, path: Path) -> TrayConfig:
    if not text.strip():
        raise ConfigError(
            path,
            "the file is empty",
            fix='write at least {"mcpServers": {}} (or paste your Claude Desktop config)',
            line=1,
        )
    try:
        data = json.loads(text, object_pairs_hook=_reject_duplicates)
    except _DuplicateKey as dup:
        raise ConfigError(
            path,
            f"the key {dup.key!r} appears twice in one object; JSON keeps only the last",
            fix="remove or rename one of them",
            line=_locate(text, [dup.key], last=True),
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            path,
            f"invalid JSON: {exc.msg} (column {exc.colno})",
            fix="correct the JSON syntax there (a missing comma or quote, or a trailing comma)",
            line=exc.lineno,
        ) from None
    except RecursionError:
        raise _too_deep(text, path) from None
    except ValueError:
        # The one other ValueError of json.loads: an integer literal past
        # Python's int_max_str_digits (4300 digits).
        match = re.search(r"[:\[,]\s*-?\d{100,}", text)
        raise ConfigError(
            path,
            "a number has thousands of digits",
            fix="write a number mcp-tray can use (ports, byte counts and seconds are small)",
            line=text.count("\n", 0, match.start()) + 1 if match else None,
        ) from None
    checker = _Checker(text, path)
    checker.values(data)
    return checker.config(data)


def _too_deep(text: str, path: Path) -> ConfigError:
    return ConfigError(
        path,
        f"the JSON is nested deeper than {MAX_NESTING} levels",
        fix="a config needs four (mcpServers, a server, its env, a value): remove the extra nesting",
        line=_deep_line(text, MAX_NESTING),
    )


def _deep_line(text: str, limit: int) -> int | None:
    """Line where brackets first nest deeper than ``limit`` (only on the error path: slow)."""
    depth = 0
    in_string = escaped = False
    line = 1
    for char in text:
        if char == "\n":
            line += 1
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        elif char in "]}":
            depth -= 1
    return None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _locate(text: str, keys: list[str | int], *, last: bool = False) -> int | None:
    """Line of the last key in ``keys``, found by walking each quoted key in turn.

    JSON parsers forget positions; real configs have unique enough keys that
    a forward search along the key path finds the right line. List indexes
    (ints) are skipped: the search lands on the list's key.
    """
    names = [key for key in keys if isinstance(key, str)]
    position = 0
    for index, key in enumerate(names):
        is_last = index == len(names) - 1
        found = -1
        # A key may be written as the characters themselves or as \u escapes.
        for needle in dict.fromkeys((json.dumps(key, ensure_ascii=False), json.dumps(key))):
            at = text.rfind(needle) if (last and is_last) else text.find(needle, position)
            if at >= 0:
                found, position = at, at + len(needle)
                break
        if found < 0:
            return None
    return text.count("\n", 0, position) + 1 if names else None


def key_path(keys: list[str | int]) -> str:
    """``mcpServers.name.env.KEY``, ``args[2]``: keys that are not plain
    printable text are shown JSON-quoted, so no key can break the line."""
    shown = ""
    for key in keys:
        if isinstance(key, int):
            shown += f"[{key}]"
            continue
        plain = key.isprintable() and key.strip() == key and key != ""
        part = key if plain else json.dumps(key)
        shown += f".{part}" if shown else part
    return shown


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


_TYPE_NAMES: Final = {
    str: "a string",
    bool: "true or false",
    dict: "an object",
    list: "a list",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def _printable(text: str) -> str:
    """``text`` for a one-line message: escaped when it holds a newline or
    another character that is not printable."""
    return text if text.isprintable() else json.dumps(text)[1:-1]


def _describe(value: object) -> str:
    shown = json.dumps(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{_TYPE_NAMES.get(type(value), type(value).__name__)} ({shown})"


class _Checker:
    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.path = path

    def error(self, keys: list[str | int], problem: str, fix: str) -> ConfigError:
        return ConfigError(
            self.path, problem, fix=fix, key=key_path(keys), line=_locate(self.text, keys)
        )

    hint = staticmethod(did_you_mean)
    describe = staticmethod(_describe)

    def values(self, data: object) -> None:
        """Refuse, anywhere in the document, what no setting can use: nesting
        past ``MAX_NESTING``, NaN and infinities (Python's json accepts them;
        a NaN keepalive would busy-loop), and strings with a NUL or a lone
        surrogate (no argv, env or path can carry them). Iterative, so a deep
        document cannot exhaust the stack here either."""
        stack: list[tuple[object, list[str | int]]] = [(data, [])]
        while stack:
            value, keys = stack.pop()
            if len(keys) > MAX_NESTING:
                raise _too_deep(self.text, self.path)
            if isinstance(value, str):
                self.text_value(keys, value)
            elif isinstance(value, float) and not math.isfinite(value):
                shown = "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "Infinity"
                raise self.error(
                    keys,
                    f"{shown} is not a usable number: every setting takes a finite one",
                    fix="write a finite number (standard JSON has no NaN or Infinity; "
                    "a number past 1.8e308 reads as Infinity)",
                )
            elif isinstance(value, dict):
                items = list(value.items())
                for key, _ in items:
                    self.text_value([*keys, key], key, what="key")
                # Reversed onto the stack: the first problem in the file is reported.
                stack.extend(((item, [*keys, key]) for key, item in reversed(items)))
            elif isinstance(value, list):
                stack.extend(
                    ((item, [*keys, index]) for index, item in reversed(list(enumerate(value))))
                )

    def text_value(self, keys: list[str | int], text: str, *, what: str = "value") -> None:
        if "\x00" in text:
            raise self.error(
                keys,
                f"this {what} holds a NUL character (\\u0000), which no command, argument, "
                "environment variable or path can carry",
                fix="remove the \\u0000",
            )
        surrogate = _LONE_SURROGATE_RE.search(text)
        if surrogate is not None:
            raise self.error(
                keys,
                f"this {what} holds a lone surrogate (\\u{ord(surrogate.group()):04x}): half "
                "of a UTF-16 pair, not a character",
                fix="write the character itself, or both halves of its \\u escape pair",
            )

    def config(self, data: object) -> TrayConfig:
        if not isinstance(data, dict):
            raise ConfigError(
                self.path,
                f"the top level must be an object, got {_describe(data)}",
                fix='wrap the servers as {"mcpServers": {"name": {"command": ...}}}',
                line=1,
            )
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                hint = did_you_mean(key, TOP_LEVEL_KEYS)
                raise self.error(
                    [key],
                    f"unknown top-level key{hint}",
                    fix=f"use one of {', '.join(TOP_LEVEL_KEYS)}, or remove it",
                )
        if "mcpServers" not in data:
            raise ConfigError(
                self.path,
                "there is no 'mcpServers' object",
                fix='add "mcpServers": {} and put one entry per server in it',
                line=1,
            )
        servers_raw = data["mcpServers"]
        if not isinstance(servers_raw, dict):
            raise self.error(
                ["mcpServers"],
                f"must be an object of servers, got {_describe(servers_raw)}",
                fix='write "mcpServers": {"name": {"command": "...", "args": []}}',
            )
        servers = {name: self.server(name, entry) for name, entry in servers_raw.items()}
        profiles = check_profiles(data.get("profiles", {}), servers, self)
        timeout = check_approval_timeout(
            data.get("approval_timeout_s", DEFAULT_APPROVAL_TIMEOUT_S), self
        )
        journal = check_journal(data.get("journal", {}), self)
        endpoint = check_telemetry(data.get("telemetry", {}), self)
        return TrayConfig(
            self.path, servers, self.gateway(data), profiles, timeout, journal, endpoint
        )

    def gateway(self, data: dict[str, Any]) -> GatewaySettings:
        raw = data.get("gateway", {})
        if not isinstance(raw, dict):
            raise self.error(
                ["gateway"],
                f"must be an object, got {_describe(raw)}",
                fix=f'write "gateway": {{"port": {DEFAULT_GATEWAY_PORT}}}',
            )
        for key in raw:
            if key not in GATEWAY_KEYS:
                raise self.error(
                    ["gateway", key],
                    f"unknown key{did_you_mean(key, GATEWAY_KEYS)}",
                    fix="the gateway takes 'port' and 'max_body_bytes'",
                )
        port = raw.get("port", DEFAULT_GATEWAY_PORT)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise self.error(
                ["gateway", "port"],
                f"must be a port number 0-65535, got {_describe(port)}",
                fix=f"leave it out for the default ({DEFAULT_GATEWAY_PORT}), or use 0 for any "
                "free port (clients reached over HTTP then need a new snippet after each restart)",
            )
        limit = raw.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        if (
            not isinstance(limit, int)
            or isinstance(limit, bool)
            or not 1024 <= limit <= MAX_BODY_BYTES_CEILING
        ):
            raise self.error(
                ["gateway", "max_body_bytes"],
                f"must be a number of bytes from 1024 to {MAX_BODY_BYTES_CEILING}, "
                f"got {_describe(limit)}",
                fix=f"leave it out for the default ({DEFAULT_MAX_BODY_BYTES})",
            )
        return GatewaySettings(port=port, max_body_bytes=limit)

    def server(self, name: str, entry: object) -> ServerConfig:
        keys: list[str | int] = ["mcpServers", name]
        if NAME_RE.fullmatch(name) is None:
            suggestion = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64]
            raise self.error(
                keys,
                "a server name may hold only letters, digits, '.', '_' and '-' (at most 64), "
                "and starts with a letter or digit",
                fix="rename the entry, e.g. " + json.dumps(suggestion or "server"),
            )
        if SEPARATOR_CLASH_RE.search(name) is not None:
            suggestion = re.sub(r"_{2,}", "_", name).rstrip("_")
            raise self.error(
                keys,
                "a server name may not hold '__' nor end in '_': the aggregate endpoint names "
                "each tool SERVER__TOOL, and such a name could stand for another server's tool",
                fix="rename the entry, e.g. " + json.dumps(suggestion),
            )
        if not isinstance(entry, dict):
            raise self.error(
                keys,
                f"must be an object, got {_describe(entry)}",
                fix='write {"command": "...", "args": [...]}',
            )
        for key in entry:
            if key not in SERVER_KEYS:
                hint = did_you_mean(key, SERVER_KEYS)
                if key in URL_ALIASES:
                    raise self.error(
                        [*keys, key],
                        "is another client's name for a remote server's URL",
                        fix=f'write it as "url": {json.dumps(entry[key])}',
                    )
                raise self.error(
                    [*keys, key],
                    f"unknown key{hint}",
                    fix=f"use one of {', '.join(SERVER_KEYS)}, or remove it",
                )
        remote = None
        if is_remote_entry(entry):
            remote = check_remote(entry, keys, self, self.check_env_value)
        elif entry.get("type", "stdio") != "stdio":
            if isinstance(entry["type"], str) and entry["type"] in REMOTE_TYPES:
                raise self.error(
                    keys,
                    f'has "type": {json.dumps(entry["type"])} but no "url"',
                    fix='add "url": "https://…" (the server\'s address)',
                )
            raise self.error(
                [*keys, "type"],
                f"only stdio servers can be supervised, got {_describe(entry['type'])}",
                fix='remove "type" or set it to "stdio"',
            )
        elif any(k in entry for k in ("headers", "transport", "allow_insecure", "oauth")):
            key = next(k for k in ("headers", "transport", "allow_insecure", "oauth") if k in entry)
            raise self.error(
                [*keys, key],
                f'only a remote server (one with "url") takes "{key}"',
                fix=f'remove "{key}", or give the server\'s "url"',
            )
        if remote is None and "command" not in entry:
            raise self.error(
                keys, "has no 'command'", fix='add "command": "the program to run" (e.g. "npx")'
            )
        command = entry.get("command", "")
        if remote is None and (not isinstance(command, str) or not command.strip()):
            raise self.error(
                [*keys, "command"],
                f"must be a non-empty string, got {_describe(command)}",
                fix='put the program in "command" and its arguments in "args"',
            )
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            example = json.dumps(args.split() if isinstance(args, str) else ["--flag", "value"])
            raise self.error(
                [*keys, "args"],
                f"must be a list of strings, got {_describe(args)}",
                fix=f'write "args": {example}',
            )
        env = entry.get("env", {})
        if not isinstance(env, dict):
            raise self.error(
                [*keys, "env"],
                f"must be an object, got {_describe(env)}",
                fix='write "env": {"NAME": "value"}',
            )
        for env_key, value in env.items():
            if not env_key or "=" in env_key:
                variable, _, rest = env_key.partition("=")
                raise self.error(
                    [*keys, "env", env_key],
                    "an environment variable's name must be non-empty and hold no '='",
                    fix=f"write it as {json.dumps(variable)}: {json.dumps(rest)}"
                    if variable
                    else "give the variable a name (letters, digits and '_' are safe)",
                )
            if not isinstance(value, str):
                raise self.error(
                    [*keys, "env", env_key],
                    f"environment values must be strings, got {_describe(value)}",
                    fix=f'quote it: "{env_key}": {json.dumps(json.dumps(value))}',
                )
        cwd = entry.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise self.error(
                [*keys, "cwd"],
                f"must be a folder path, got {_describe(cwd)}",
                fix="give an absolute folder path or remove it",
            )
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            raise self.error(
                [*keys, "disabled"],
                f"must be true or false, got {_describe(disabled)}",
                fix='write "disabled": true',
            )
        retry = entry.get("retry", "safe")
        if retry not in RETRY_POLICIES:
            raise self.error(
                [*keys, "retry"],
                f"must be one of {', '.join(RETRY_POLICIES)}, got {_describe(retry)}"
                + (did_you_mean(retry, RETRY_POLICIES) if isinstance(retry, str) else ""),
                fix='"safe" replays only readOnly/idempotent tools after a crash; "always" replays any call',
            )
        keepalive = entry.get("keepalive_seconds", DEFAULT_KEEPALIVE_SECONDS)
        if (
            isinstance(keepalive, bool)
            or not isinstance(keepalive, int | float)
            or not MIN_KEEPALIVE_SECONDS <= keepalive <= MAX_KEEPALIVE_SECONDS
        ):
            raise self.error(
                [*keys, "keepalive_seconds"],
                f"must be a number of seconds from {MIN_KEEPALIVE_SECONDS:g} to "
                f"{MAX_KEEPALIVE_SECONDS:g}, got {_describe(keepalive)}",
                fix=f"use {DEFAULT_KEEPALIVE_SECONDS:g} (the default) or remove it",
            )
        sharing = entry.get("sharing", "shared")
        if sharing not in SHARING_MODES:
            raise self.error(
                [*keys, "sharing"],
                f"must be one of {', '.join(SHARING_MODES)}, got {_describe(sharing)}",
                fix=(
                    '"shared" runs one child for all clients; "per-session" one per client '
                    'session; "per-workspace" one per project (the folders a client works in)'
                ),
            )
        protocol = entry.get("protocol", "auto")
        if protocol not in PROTOCOL_MODES:
            raise self.error(
                [*keys, "protocol"],
                f"must be one of {', '.join(PROTOCOL_MODES)}, got {_describe(protocol)}",
                fix='"auto" asks the server which era it speaks; "handshake" pins initialize '
                "(for servers whose tools send requests the old way)",
            )
        max_children = entry.get("max_children", DEFAULT_MAX_CHILDREN)
        if type(max_children) is not int or not 1 <= max_children <= MAX_MAX_CHILDREN:
            raise self.error(
                [*keys, "max_children"],
                f"must be a whole number from 1 to {MAX_MAX_CHILDREN}, got {_describe(max_children)}",
                fix=f"use {DEFAULT_MAX_CHILDREN} (the default) or remove it; it caps the children "
                'made for sessions or workspaces ("sharing": "per-session" or "per-workspace")',
            )
        start, idle_stop_s, standby = check_lean(entry, keys, sharing, self)
        expand = self.expander(keys)
        return ServerConfig(
            name=name,
            command=expand("command", command) if remote is None else "",
            args=tuple(expand(f"args[{i}]", a, key="args") for i, a in enumerate(args)),
            env={k: self.check_env_value([*keys, "env", k], v) for k, v in env.items()},
            cwd=expand("cwd", cwd) if cwd is not None else None,
            disabled=disabled,
            retry=retry,
            keepalive_seconds=float(keepalive),
            sharing=sharing,
            sharing_pinned="sharing" in entry,
            protocol=protocol,
            approve=check_approve(entry.get("approve", []), [*keys, "approve"], self),
            on_tool_change=check_on_tool_change(
                entry.get("on_tool_change", "hold"), [*keys, "on_tool_change"], self
            ),
            max_children=max_children,
            start=start,
            idle_stop_s=idle_stop_s,
            standby=standby,
            sandbox=check_sandbox(entry["sandbox"], [*keys, "sandbox"], self, sharing=sharing)
            if "sandbox" in entry
            else None,
            limits=check_limits(entry.get("limits", {}), [*keys, "limits"], self),
            remote=remote,
        )

    def expander(self, keys: list[str | int]) -> "_Expander":
        return _Expander(self, keys)

    def check_env_value(self, keys: list[str | int], value: str) -> str:
        for match in _PLACEHOLDER_RE.finditer(value):
            inner = match.group(1)
            if not (inner.startswith("keyring:") and inner[len("keyring:") :].strip()):
                what = "env" if "env" in keys else "header" if "headers" in keys else "oauth"
                raise self.error(
                    keys,
                    f"unknown placeholder ${{{_printable(inner)}}} in {what} values",
                    fix=f"{what} values may hold ${{keyring:NAME}} (a secret from the OS keyring) "
                    "or plain text",
                )
        return value


class _Expander:
    def __init__(self, checker: _Checker, keys: list[str | int]) -> None:
        self.checker = checker
        self.keys = keys

    def __call__(self, label: str, value: str, *, key: str | None = None) -> str:
        def replace(match: re.Match[str]) -> str:
            inner = match.group(1)
            if inner == "python":
                return sys.executable
            if inner == "configDir":
                return str(self.checker.path.resolve().parent)
            if inner == "stateDir":
                return str(default_paths().state_dir)
            if inner.startswith("env:"):
                name = inner[4:]
                if name not in os.environ:
                    raise self.checker.error(
                        [*self.keys, key or label],
                        f"${{env:{_printable(name)}}} is used but {_printable(name)} is not set",
                        fix=f"set {_printable(name)} before starting mcp-tray, or write the value itself",
                    )
                return os.environ[name]
            hint = did_you_mean(inner, ["python", "configDir", "stateDir", "env:NAME"])
            raise self.checker.error(
                [*self.keys, key or label],
                f"unknown placeholder ${{{_printable(inner)}}}{hint}",
                fix="use ${python}, ${configDir}, ${stateDir} or ${env:NAME}",
            )

        return _PLACEHOLDER_RE.sub(replace, value)
