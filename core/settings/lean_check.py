"""The config's keys for lean servers, checked (docs/design.md §3.2).

``"start"`` (``"always"`` or ``"on-demand"``) and ``"idle_stop_s"`` (how long
an on-demand server may go with nothing that needs it). Kept apart from
core.settings.config_check so that module stays about the launch of a server.
"""

from collections.abc import Mapping
from typing import Any

from core.settings.config_model import (
    DEFAULT_IDLE_STOP_S,
    MAX_IDLE_STOP_S,
    MIN_IDLE_STOP_S,
    START_MODES,
    StartMode,
)
from core.settings.profiles import Problems


def check_lean(
    entry: Mapping[str, Any], keys: list[str | int], problems: Problems
) -> tuple[StartMode, float]:
    """A server entry's ``start`` and ``idle_stop_s``."""
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
    return start, float(idle)
