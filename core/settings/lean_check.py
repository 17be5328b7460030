"""The config's keys for lean servers, checked (docs/design.md §3.2).

``"start"`` (``"always"`` or ``"on-demand"``), ``"idle_stop_s"`` (how long
an on-demand server may go with nothing that needs it) and ``"standby"`` (a
spare child kept started beside the active one; shared entries only). Kept apart from
core.settings.config_check so that module stays about the launch of a server.
"""

from collections.abc import Mapping
from typing import Any

from core.settings.config_model import (
    DEFAULT_IDLE_STOP_S,
    MAX_IDLE_STOP_S,
    MIN_IDLE_STOP_S,
    START_MODES,
    Sharing,
    StartMode,
)
from core.settings.profiles import Problems


def check_lean(
    entry: Mapping[str, Any], keys: list[str | int], sharing: Sharing, problems: Problems
) -> tuple[StartMode, float, bool]:
    """A server entry's ``start``, ``idle_stop_s`` and ``standby``."""
    start = entry.get("start", "always")
    if start not in START_MODES:
        raise problems.error(
            [*keys, "start"],
            f"must be one of {', '.join(START_MODES)}, got {problems.describe(start)}"
            + (problems.hint(start, START_MODES) if isinstance(start, str) else ""),
            fix='"always" starts it with mcp-tray; "on-demand" starts it at the first call '
            "and stops it when idle (its tools are listed from what its last run said)",
        )
    idle = entry.get("idle_stop_s", DEFAULT_IDLE_STOP_S)
    if (
        isinstance(idle, bool)
        or not isinstance(idle, int | float)
        or not MIN_IDLE_STOP_S <= idle <= MAX_IDLE_STOP_S
    ):
        raise problems.error(
            [*keys, "idle_stop_s"],
            f"must be a number of seconds from {MIN_IDLE_STOP_S:g} to {MAX_IDLE_STOP_S:g}, "
            f"got {problems.describe(idle)}",
            fix=f"use {DEFAULT_IDLE_STOP_S:g} (the default) or remove it",
        )
    if "idle_stop_s" in entry and start != "on-demand":
        raise problems.error(
            [*keys, "idle_stop_s"],
            f'only an on-demand server stops when idle, and this entry has "start": "{start}"',
            fix='add "start": "on-demand" or remove "idle_stop_s"',
        )
    standby = entry.get("standby", False)
    if not isinstance(standby, bool):
        raise problems.error(
            [*keys, "standby"],
            f"must be true or false, got {problems.describe(standby)}",
            fix='write "standby": true',
        )
    if standby and sharing != "shared":
        raise problems.error(
            [*keys, "standby"],
            f'a "{sharing}" entry takes no standby: a spare child cannot know the session '
            "or workspace it would be made for",
            fix='remove "standby", or use it on a stateless "shared" server',
        )
    if standby and start == "on-demand":
        raise problems.error(
            [*keys, "standby"],
            "an on-demand server takes no standby: the spare would keep a child running "
            "while it sleeps",
            fix='remove "standby" or "start": "on-demand"',
        )
    return start, float(idle), standby
