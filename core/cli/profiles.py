"""``mcp-tray profiles``: what each profile (and ``all``) offers a client, and what it costs.

The figures come from the running tray (``/api/v1/profiles``): only it
knows what each server last listed. Per profile: its endpoint, its servers,
its tool count, an estimate of the tokens its tools/list takes in a model's
context (how it is estimated is printed with it), the sessions connected,
and warnings where it passes a client's documented tool limit or where a
name had to be shortened (with the full name).
"""

import argparse
import json
from typing import Any

from core.base.errors import CommandError
from core.base.exitcodes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from core.cli.control_client import ControlClient
from core.settings.config import TrayConfig
from core.settings.paths import Paths
from core.settings.profiles import ALL_PROFILE, find_profile, target, valid_profile_name

#: The table's columns: (header, what each row shows).
#: ≈TOKENS is the full list's estimate, ≈SEARCH that of the three discovery tools; the one a
#: profile's clients read is marked with "*".
COLUMNS = ("PROFILE", "ENDPOINT", "TOOLS", "≈TOKENS", "≈SEARCH", "CONNECTED", "SERVERS")


def cmd_profiles(args: argparse.Namespace, paths: Paths) -> int:
    """Print every profile's figures (``--json``: as the tray gives them)."""
    reply = ControlClient.connect(paths).request("GET", "/api/v1/profiles")
    if not reply.ok:
        raise CommandError(reply.error, EXIT_FAILED)
    if args.json:
        print(json.dumps(reply.body, indent=2))
    else:
        print(render(reply.body), end="")
    return EXIT_OK


def render(body: dict[str, Any]) -> str:
    """The profiles as a table, each followed by its warnings and shortened names."""
    profiles: list[dict[str, Any]] = body.get("profiles", [])
    rows = [
        (
            profile["name"],
            profile["path"],
            str(profile["tools"]),
            f"{profile['tokens']:,}" + ("" if searched(profile) else "*"),
            f"{profile.get('discovery_tokens', 0):,}" + ("*" if searched(profile) else ""),
            str(len(profile["sessions"])),
            ", ".join(profile["servers"]) or "-",
        )
        for profile in profiles
    ]
    widths = [max(map(len, column)) for column in zip(COLUMNS, *rows, strict=True)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))

    lines = [line(COLUMNS).rstrip()]
    for profile, row in zip(profiles, rows, strict=True):
        lines.append(line(row).rstrip())
        lines += [f"  ! {warning}" for warning in profile["warnings"]]
    lines.append(f"≈TOKENS: {body.get('estimate', '')}.")
    lines.append(
        '≈SEARCH: the same for the three tools of "discovery": "search" (search_tools, '
        "describe_tools, call_tool); * marks what the profile's clients read."
    )
    return "\n".join(lines) + "\n"


def searched(profile: dict[str, Any]) -> bool:
    return bool(profile.get("discovery") == "search")


def profile_target(name: str, config: TrayConfig | None) -> str:
    """``@NAME`` for ``client-config --profile NAME``: a profile of ``config`` (or ``all``);
    without a config, any name a profile could have (the tray checks it when connected)."""
    if not valid_profile_name(name):
        raise CommandError(f"{name!r} is not a profile name", EXIT_USAGE)
    if config is not None and find_profile(config.profiles, name) is None:
        known = ", ".join([ALL_PROFILE, *config.profiles])
        raise CommandError(
            f"there is no profile {name!r} in {config.path} (profiles: {known}); add it under "
            '"profiles", or pass --config with the file that has it',
            EXIT_USAGE,
        )
    return target(name)
