"""The config's oversight keys, checked (docs/design.md §3.14).

``approve`` on a server entry (globs over its tool names, and the words
``destructive`` and ``any``) and on a profile (globs over ``SERVER__TOOL``),
``on_tool_change`` per server, and the top-level ``approval_timeout_s``;
a profile's ``approve`` is checked with the profile (core.settings.profiles).
Kept apart from core.settings.config_check so that module stays about the
launch of a server.
"""

from typing import Any

from core.settings.config_model import (
    APPROVE_WORDS,
    DEFAULT_APPROVAL_TIMEOUT_S,
    MAX_APPROVAL_TIMEOUT_S,
    MIN_APPROVAL_TIMEOUT_S,
    TOOL_CHANGE_MODES,
    ToolChangeMode,
)
from core.settings.profiles import Problems


def check_approve(value: Any, keys: list[str | int], problems: Problems) -> tuple[str, ...]:
    """A server's ``approve``: a list of globs over its tool names, or the words."""
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise problems.error(
            keys,
            f"must be a list of tool-name globs or the words {' and '.join(APPROVE_WORDS)}, "
            f"got {problems.describe(value)}",
            fix='write "approve": ["destructive"], "approve": ["delete_*", "write_file"] '
            'or "approve": ["any"]',
        )
    for index, item in enumerate(value):
        if item.isalpha() and item.lower() in APPROVE_WORDS and item not in APPROVE_WORDS:
            raise problems.error(
                [*keys, index],
                f"{item!r} is not one of the words {', '.join(APPROVE_WORDS)} (they are lower case)",
                fix=f'write "{item.lower()}"',
            )
    return tuple(value)


def check_on_tool_change(value: Any, keys: list[str | int], problems: Problems) -> ToolChangeMode:
    if value == "hold":
        return "hold"
    if value == "warn":
        return "warn"
    raise problems.error(
        keys,
        f"must be one of {', '.join(TOOL_CHANGE_MODES)}, got {problems.describe(value)}"
        + (problems.hint(value, TOOL_CHANGE_MODES) if isinstance(value, str) else ""),
        fix='"hold" keeps a changed tool from every client until you approve it; '
        '"warn" offers it and logs a warning',
    )


def check_approval_timeout(value: Any, problems: Problems) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not MIN_APPROVAL_TIMEOUT_S <= value <= MAX_APPROVAL_TIMEOUT_S
    ):
        raise problems.error(
            ["approval_timeout_s"],
            f"must be a number of seconds from {MIN_APPROVAL_TIMEOUT_S:g} to "
            f"{MAX_APPROVAL_TIMEOUT_S:g}, got {problems.describe(value)}",
            fix=f"use {DEFAULT_APPROVAL_TIMEOUT_S:g} (the default) or remove it",
        )
    return float(value)
