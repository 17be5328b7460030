"""Profiles: the servers and tools one client gets through a single endpoint.

A profile (``"profiles": {"coding": {...}}`` in the config) names servers in
an order and filters their tools with globs over the prefixed names
(``SERVER__TOOL``). ``all``, every enabled server with every tool, needs no
entry. A client reaches a profile as ``@NAME``: ``/mcp/@NAME`` (or
``/@NAME/mcp``) over HTTP, ``mcp-tray connect @NAME`` through the bridge;
``all`` also as plain ``/mcp``. This module holds the model and those
names; core.serving.aggregate.profile_view builds what a profile offers, and
core.serving.aggregate.aggregate serves it.
"""

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from core.base.errors import ConfigError

#: The profile every config has: every enabled server, every tool.
ALL_PROFILE: Final = "all"
#: What marks a profile where a server name would stand (``@coding``).
PROFILE_MARK: Final = "@"
#: Between a server's name and its tool's or prompt's (``github__create_issue``).
NAME_SEPARATOR: Final = "__"
#: A profile's keys.
#: The words of a server's ``approve`` (core.settings.config_model), which a profile's refuses.
PROFILE_APPROVE_WORDS: Final = ("destructive", "any")
PROFILE_KEYS: Final = ("servers", "tools", "exclude", "approve", "discovery")
#: How a profile offers its tools: ``full`` lists every one; ``search`` lists three
#: meta-tools that find, describe and call them (core.serving.aggregate.discovery).
DISCOVERY_MODES: Final = ("full", "search")
#: Profile names become URL paths (``/mcp/@NAME``), like server names.
_PROFILE_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class ProfileConfig:
    name: str
    #: In this order (the first server offering a resource URI serves it);
    #: None: every enabled server, in the config's order.
    servers: tuple[str, ...] | None = None
    #: Globs over ``SERVER__TOOL``: a tool is in when one matches...
    tools: tuple[str, ...] = ("*",)
    #: ...and none of these does.
    exclude: tuple[str, ...] = ()
    #: Calls through this profile held for the person's approval: globs over ``SERVER__TOOL``.
    approve: tuple[str, ...] = ()
    #: One of ``DISCOVERY_MODES``.
    discovery: str = "full"

    @property
    def searched(self) -> bool:
        """Its clients find tools through ``search_tools`` instead of a full list."""
        return self.discovery == "search"


#: ``all``, as if it were configured.
EVERYTHING: Final = ProfileConfig(ALL_PROFILE)


def valid_profile_name(name: str) -> bool:
    """Whether ``name`` can be a profile's (it becomes a URL path, ``/mcp/@NAME``)."""
    return _PROFILE_NAME_RE.fullmatch(name) is not None


def is_target(name: str) -> bool:
    """``@NAME``: a profile where a server name would stand."""
    return name.startswith(PROFILE_MARK)


def target(profile: str) -> str:
    """How a client names a profile: ``@coding``, ``@all``."""
    return f"{PROFILE_MARK}{profile}"


def profile_name(name: str) -> str:
    """The profile a target names (``@coding`` -> ``coding``; ``""``, plain ``/mcp``, is ``all``)."""
    return name[len(PROFILE_MARK) :] if is_target(name) else (name or ALL_PROFILE)


def endpoint_path(name: str) -> str:
    """The gateway path of a server (``/mcp/github``) or a profile (``/mcp/@coding``;
    ``all`` is plain ``/mcp``)."""
    if is_target(name) and profile_name(name) == ALL_PROFILE:
        return "/mcp"
    return f"/mcp/{name}"


def client_entry_name(name: str) -> str:
    """The key of a client's config entry: a server's name, or for a profile
    ``mcp-tray`` (``@all``) and ``mcp-tray-coding`` (``@coding``)."""
    if not is_target(name):
        return name
    profile = profile_name(name)
    return "mcp-tray" if profile == ALL_PROFILE else f"mcp-tray-{profile}"


def path_target(path: str) -> str | None:
    """The profile a gateway path serves (``/mcp`` -> ``@all``, ``/mcp/@coding`` and
    ``/@coding/mcp`` -> ``@coding``); None for any other path."""
    if path == "/mcp":
        return target(ALL_PROFILE)
    for prefix, suffix in ((f"/mcp/{PROFILE_MARK}", ""), (f"/{PROFILE_MARK}", "/mcp")):
        if path.startswith(prefix) and path.endswith(suffix):
            name = path[len(prefix) : len(path) - len(suffix)]
            if valid_profile_name(name):
                return target(name)
    return None


def find_profile(profiles: Mapping[str, ProfileConfig], name: str) -> ProfileConfig | None:
    """A configured profile, or ``all``; None when there is no such profile."""
    if name == ALL_PROFILE:
        return EVERYTHING
    return profiles.get(name)


class Problems(Protocol):
    """How the config's checker (core.settings.config) reports a problem."""

    def error(self, keys: list[str | int], problem: str, fix: str) -> ConfigError: ...

    def hint(self, word: str, choices: list[str] | tuple[str, ...]) -> str: ...

    def describe(self, value: object) -> str: ...


def check_profiles(
    raw: object, servers: Collection[str], problems: Problems
) -> dict[str, ProfileConfig]:
    """The config's ``profiles``, checked: each names known servers and lists globs."""
    if not isinstance(raw, dict):
        raise problems.error(
            ["profiles"],
            f"must be an object of profiles, got {problems.describe(raw)}",
            fix='write "profiles": {"coding": {"servers": ["github", "fs"]}}',
        )
    return {name: _check_profile(name, entry, servers, problems) for name, entry in raw.items()}


def _check_profile(
    name: str, entry: object, servers: Collection[str], problems: Problems
) -> ProfileConfig:
    keys: list[str | int] = ["profiles", name]
    if name == ALL_PROFILE:
        raise problems.error(
            keys,
            f"{ALL_PROFILE!r} is every enabled server with every tool, and needs no entry",
            fix="give this profile another name",
        )
    if not valid_profile_name(name):
        raise problems.error(
            keys,
            "a profile name becomes a URL path (/mcp/@NAME): letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 64 characters",
            fix="rename the profile",
        )
    if not isinstance(entry, dict):
        raise problems.error(
            keys,
            f"must be an object, got {problems.describe(entry)}",
            fix='write {"servers": ["SERVER", ...], "tools": ["SERVER__*"]}',
        )
    for key in entry:
        if key not in PROFILE_KEYS:
            raise problems.error(
                [*keys, key],
                f"unknown key{problems.hint(key, PROFILE_KEYS)}",
                fix=f"a profile takes {', '.join(map(repr, PROFILE_KEYS))}",
            )
    members = None
    if "servers" in entry:
        members = _strings(entry["servers"], [*keys, "servers"], problems)
        for index, server in enumerate(members):
            if server not in servers:
                raise problems.error(
                    [*keys, "servers", index],
                    f"there is no server {server!r} in mcpServers"
                    f"{problems.hint(server, tuple(servers))}",
                    fix="name a server of mcpServers, or remove this one",
                )
        if len(set(members)) != len(members):
            raise problems.error(
                [*keys, "servers"], "names a server twice", fix="name each server once"
            )
    tools = _strings(entry.get("tools", ["*"]), [*keys, "tools"], problems)
    exclude = _strings(entry.get("exclude", []), [*keys, "exclude"], problems)
    approve = check_profile_approve(entry.get("approve", []), [*keys, "approve"], problems)
    discovery = entry.get("discovery", "full")
    if discovery not in DISCOVERY_MODES:
        hint = problems.hint(discovery, DISCOVERY_MODES) if isinstance(discovery, str) else ""
        raise problems.error(
            [*keys, "discovery"],
            f'must be "full" or "search", got {problems.describe(discovery)}{hint}',
            fix='write "discovery": "search" (three tools that find, describe and call the '
            "profile's tools) or remove the key (every tool listed)",
        )
    return ProfileConfig(name, members, tools, exclude, approve, discovery)


def check_profile_approve(value: Any, keys: list[str | int], problems: Problems) -> tuple[str, ...]:
    """A profile's ``approve``: globs over ``SERVER__TOOL`` (a profile has no words)."""
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise problems.error(
            keys,
            f"must be a list of globs over SERVER__TOOL, got {problems.describe(value)}",
            fix='write "approve": ["github__delete_*", "fs__write_*"]',
        )
    for index, item in enumerate(value):
        if item in PROFILE_APPROVE_WORDS:
            raise problems.error(
                [*keys, index],
                f"{item!r} is a word of a server's \"approve\"; a profile's approve takes globs "
                "over SERVER__TOOL",
                fix=f'write "*__*" for every call, or put "approve": ["{item}"] on the server entry',
            )
    return tuple(value)


def _strings(value: Any, keys: list[str | int], problems: Problems) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise problems.error(
            keys,
            f"must be a list of non-empty strings, got {problems.describe(value)}",
            fix=f'write "{keys[-1]}": ["github__*", "fs__read_*"] (globs over SERVER__NAME)'
            if keys[-1] != "servers"
            else 'write "servers": ["github", "fs"]',
        )
    return tuple(value)
