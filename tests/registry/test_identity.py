"""Client-name normalisation and worker identities (core/identity.py).

Strategy: pure functions, table-driven. Each application's real
``clientInfo.name`` and the spellings people type map to one canonical
name; distinct applications (above all Claude Desktop vs Claude Code) never
share one; unknown names fold to a stable form of themselves. Identities are
checked for determinism and for changing with each input.
"""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from core.registry.identity import (
    CLIENT_ALIASES,
    CLIENT_DISPLAY_NAMES,
    UNKNOWN_CLIENT,
    client_display_name,
    normalize_client_name,
    worker_identity,
)

START = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

#: (spellings of one application, its canonical name).
APPLICATIONS = [
    (
        ("claude-ai", "Claude Desktop", "claude_desktop", "claude", "CLAUDE-DESKTOP"),
        "claude-desktop",
    ),
    (("claude-code", "Claude Code", "claude_code"), "claude-code"),
    (("cursor-vscode", "Cursor", "cursor"), "cursor"),
    (("Visual Studio Code", "Visual Studio Code - Insiders", "vscode", "GitHub Copilot"), "vscode"),
    (("windsurf-client", "Windsurf"), "windsurf"),
    (("Zed", "zed"), "zed"),
    (("gemini-cli-mcp-client", "Gemini CLI", "gemini"), "gemini-cli"),
    (("codex-mcp-client", "Codex"), "codex"),
    (("continue-client", "Continue"), "continue"),
    (("inspector-client", "MCP Inspector", "mcp-inspector"), "mcp-inspector"),
]


@pytest.mark.parametrize(("spellings", "canonical"), APPLICATIONS)
def test_every_spelling_of_one_application_normalises_to_its_canonical_name(
    spellings: tuple[str, ...], canonical: str
) -> None:
    assert {normalize_client_name(s) for s in spellings} == {canonical}


def test_distinct_applications_keep_distinct_canonical_names() -> None:
    canonicals = [canonical for _, canonical in APPLICATIONS]
    assert len(set(canonicals)) == len(canonicals)
    assert set(canonicals) == set(CLIENT_DISPLAY_NAMES)


def test_claude_desktop_and_claude_code_are_different_applications() -> None:
    assert normalize_client_name("claude-ai") != normalize_client_name("claude-code")
    assert normalize_client_name("claude") != normalize_client_name("Claude Code")


def test_every_alias_points_at_a_known_application() -> None:
    assert set(CLIENT_ALIASES.values()) == set(CLIENT_DISPLAY_NAMES)


def test_an_unknown_name_folds_to_a_lowercase_hyphenated_form_of_itself() -> None:
    assert normalize_client_name("My Agent_2 ") == "my-agent-2"
    assert normalize_client_name("my-agent-2") == "my-agent-2"


def test_a_blank_name_normalises_to_unknown() -> None:
    assert normalize_client_name("   ") == UNKNOWN_CLIENT


def test_a_known_client_is_displayed_by_its_product_name() -> None:
    assert client_display_name("claude-ai") == "Claude Desktop"
    assert client_display_name("some-tool") == "some-tool"


def test_one_identity_comes_from_the_same_client_session_and_start() -> None:
    first = worker_identity("claude-code", "sess-1", START)
    assert worker_identity("Claude Code", "sess-1", START) == first
    # The same instant in another zone is the same start.
    plus_one = timezone(timedelta(hours=1))
    assert worker_identity("claude-code", "sess-1", START.astimezone(plus_one)) == first
    assert first.startswith("claude-code:")


def test_the_identity_changes_with_client_session_or_start_time() -> None:
    base = worker_identity("claude-code", "sess-1", START)
    assert worker_identity("claude-ai", "sess-1", START) != base
    assert worker_identity("claude-code", "sess-2", START) != base
    assert worker_identity("claude-code", "sess-1", START + timedelta(microseconds=1)) != base


def test_a_naive_start_time_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        worker_identity("zed", "s", datetime(2026, 1, 1))
