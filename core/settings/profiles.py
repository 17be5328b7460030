"""Profiles: the servers and tools one client gets through a single endpoint.

A profile (``"profiles": {"coding": {...}}`` in the config) names servers in
an order and filters their tools with globs over the prefixed names
(``SERVER__TOOL``). ``all``, every enabled server with every tool, needs no
entry. A client reaches a profile as ``@NAME``: ``/mcp/@NAME`` (or
``/@NAME/mcp``) over HTTP, ``mcp-tray connect @NAME`` through the bridge;
``all`` also as plain ``/mcp``. This module holds the model and those
names; core.serving.profile_view builds what a profile offers, and
core.serving.aggregate serves it.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

#: The profile every config has: every enabled server, every tool.
ALL_PROFILE: Final = "all"
#: What marks a profile where a server name would stand (``@coding``).
PROFILE_MARK: Final = "@"
#: Between a server's name and its tool's or prompt's (``github__create_issue``).
NAME_SEPARATOR: Final = "__"
#: A profile's keys.
PROFILE_KEYS: Final = ("servers", "tools", "exclude")


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


#: ``all``, as if it were configured.
EVERYTHING: Final = ProfileConfig(ALL_PROFILE)


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


def find_profile(profiles: Mapping[str, ProfileConfig], name: str) -> ProfileConfig | None:
    """A configured profile, or ``all``; None when there is no such profile."""
    if name == ALL_PROFILE:
        return EVERYTHING
    return profiles.get(name)
