"""``mcp-tray profiles [--json]`` and ``GET /api/v1/profiles``.

Strategy: a real headless tray in a subprocess (the ``headless`` fixture)
running tests/servers/echo.py under two names, one long enough that its
tool names must be shortened, asked through the real CLI; the figures are
the ones the aggregate endpoints serve (core.serving.aggregate.profile_view).
"""

import json
from typing import Any

from tests.conftest import ECHO, python_server
from tests.support.cli_support import cli

LONG = "a-server-whose-name-is-long-enough-to-overflow-tool-names-xx"


def test_profiles_lists_each_profile_with_its_tools_tokens_and_shortened_names(
    headless: Any,
) -> None:
    tray = headless(
        {
            "mcpServers": {"echo": python_server(ECHO), LONG: python_server(ECHO)},
            "profiles": {
                "coding": {"servers": ["echo"], "tools": ["echo__*"]},
                "lean": {"servers": ["echo"], "discovery": "search"},
            },
        }
    )
    tray.wait_state("echo", "ready")
    tray.wait_state(LONG, "ready")

    result = cli(tray.home, "profiles", "--json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    by_name = {profile["name"]: profile for profile in body["profiles"]}
    assert list(by_name) == ["all", "coding", "lean"]
    lean = by_name["lean"]
    # Both estimates: the full list's, and the three discovery tools' that stand for it.
    assert lean["discovery"] == "search" and by_name["all"]["discovery"] == "full"
    assert lean["tokens"] == by_name["coding"]["tokens"] > lean["discovery_tokens"] > 0
    assert by_name["all"]["discovery_tokens"] == lean["discovery_tokens"]  # the same three tools
    everything, coding = by_name["all"], by_name["coding"]
    assert (everything["path"], coding["path"]) == ("/mcp", "/mcp/@coding")
    assert everything["servers"] == ["echo", LONG] and coding["servers"] == ["echo"]
    assert everything["tools"] == 2 * coding["tools"] > 0
    assert everything["tokens"] == -(-everything["tools_bytes"] // 4)
    assert coding["renamed"] == []  # each of LONG's tools and its prompt is shortened:
    assert len(everything["renamed"]) == coding["tools"] + coding["prompts"]
    assert "/ 4" in body["estimate"]
    assert {limit["client"] for limit in body["client_limits"]} >= {"VS Code", "Cursor"}

    result = cli(tray.home, "profiles")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:5] == ["PROFILE", "ENDPOINT", "TOOLS", "≈TOKENS", "≈SEARCH"]
    (lean_line,) = [line.split() for line in lines if line.startswith("lean ")]
    assert lean_line[3:5] == [f"{lean['tokens']:,}", f"{lean['discovery_tokens']:,}*"]
    assert lines[1].split()[:3] == ["all", "/mcp", str(everything["tools"])]
    shortened = everything["renamed"][0]
    assert f"  ! '{shortened[1]}' is longer than 64 characters: clients see it as" in result.stdout
    assert any(line.split()[:2] == ["coding", "/mcp/@coding"] for line in lines)
    assert lines[-2].startswith("≈TOKENS: bytes of the profile's tools/list JSON")
    assert lines[-1].startswith("≈SEARCH: the same for the three tools")
