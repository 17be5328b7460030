"""When a request cut in flight may be sent again: one rule for every place that resends.

A request can be cut twice over: the child dies under it (the call path
replays it on the respawned child, docs/design.md §3.3), or the tray goes away under
a bridge's request (the bridge sends it to the next tray). Either way it is
sent again only when taking it twice does no harm: a method that changes
nothing (or nothing twice), or a ``tools/call`` of a tool that says so
(``readOnlyHint`` or ``idempotentHint``); a server's ``"retry"`` config
(``"always"``, ``"never"``) overrides the hints. The window and ``mcp-tray
tools`` show the same verdict per tool (core.supervision.offer).

Kept here, below the bridge and supervision alike: the bridge process may
not import supervision.
"""

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

#: Methods that change nothing on the server, or change it idempotently.
REPEATABLE_METHODS: Final = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)
#: The ``retry`` config values (core.settings.config checks them).
RETRY_SAFE: Final = "safe"
RETRY_ALWAYS: Final = "always"
RETRY_NEVER: Final = "never"


class Verdict(NamedTuple):
    """Whether a cut request is sent again, and why (or why not), in words."""

    again: bool
    why: str


def replay_verdict(
    method: str,
    params: Mapping[str, Any] | None,
    annotations: Mapping[str, Any],
    retry: str = RETRY_SAFE,
) -> Verdict:
    """The rule. ``annotations`` are the called tool's (``{}`` when unknown or not a tool call)."""
    if retry == RETRY_ALWAYS:
        return Verdict(True, 'the server\'s config says "retry": "always"')
    if retry == RETRY_NEVER:
        return Verdict(False, 'the server\'s config says "retry": "never"')
    if method in REPEATABLE_METHODS:
        return Verdict(True, f"{method!r} changes nothing on the server")
    if method != "tools/call":
        return Verdict(False, f"{method!r} is not known to be safe to repeat")
    if annotations.get("readOnlyHint"):
        return Verdict(True, "the tool is marked readOnlyHint")
    if annotations.get("idempotentHint"):
        return Verdict(True, "the tool is marked idempotentHint")
    name = (params or {}).get("name")
    return Verdict(
        False,
        f"the tool {name!r} is not marked readOnlyHint or idempotentHint"
        if name is not None
        else "the tool is not marked readOnlyHint or idempotentHint",
    )


def tool_annotations(tool: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A tool's annotations from its listing (``{}`` when it has none)."""
    annotations = (tool or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}
