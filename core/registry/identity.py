"""Who a worker is: client-name normalisation and worker identities.

AI clients announce themselves in ``clientInfo.name`` with whatever spelling
their authors chose ("claude-ai", "cursor-vscode", "Visual Studio Code"), and
users type names into ``MCP_TRAY_CLIENT`` by hand. One alias table maps every
known spelling of one application to one canonical name, so two namespaces
of one product are one client while distinct products stay distinct. Claude
Desktop and Claude Code are different applications and never share a name.

Stdlib only; no I/O. Tested in tests/registry/test_identity.py.
"""

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Final

#: Returned for an empty or blank client name, so rows never hold "".
UNKNOWN_CLIENT: Final = "unknown"

#: Hex digits of the identity digest: 64 bits keeps collisions between the
#: few thousand workers one machine ever sees negligible and the text short.
IDENTITY_DIGEST_CHARS: Final = 16

#: Canonical name -> display name (what the user reads: "restart Cursor").
CLIENT_DISPLAY_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "claude-desktop": "Claude Desktop",
        "claude-code": "Claude Code",
        "cursor": "Cursor",
        "vscode": "VS Code",
        "windsurf": "Windsurf",
        "zed": "Zed",
        "gemini-cli": "Gemini CLI",
        "codex": "Codex",
        "continue": "Continue",
        "mcp-inspector": "MCP Inspector",
    }
)

#: Canonical name -> the spellings it is known by. The first column of each
#: row is the ``clientInfo.name`` the application sends; the rest are how
#: people write it. Spellings are folded (see ``_fold``) before lookup, so
#: "Claude Desktop", "claude_desktop" and "claude-desktop" are one entry.
_SPELLINGS: Final[Mapping[str, tuple[str, ...]]] = {
    # Claude Desktop sends "claude-ai"; bare "claude" is the desktop app, not
    # Claude Code, which always says "claude-code".
    "claude-desktop": ("claude-ai", "Claude Desktop", "claude", "Claude for Desktop"),
    "claude-code": ("claude-code", "Claude Code", "claudecode"),
    "cursor": ("cursor-vscode", "Cursor", "cursor-agent"),
    # Copilot Chat in VS Code speaks MCP as VS Code itself.
    "vscode": (
        "Visual Studio Code",
        "Visual Studio Code - Insiders",
        "vscode",
        "vscode-insiders",
        "VS Code",
        "GitHub Copilot",
        "copilot",
    ),
    "windsurf": ("windsurf-client", "Windsurf"),
    "zed": ("Zed", "zed-editor"),
    "gemini-cli": ("gemini-cli-mcp-client", "Gemini CLI", "gemini"),
    "codex": ("codex-mcp-client", "Codex", "codex-cli"),
    "continue": ("continue-client", "Continue", "continue-cli-client"),
    "mcp-inspector": ("inspector-client", "MCP Inspector", "mcp-inspector", "inspector"),
}

_NON_ALNUM: Final = re.compile(r"[^0-9a-z]+")


def _fold(name: str) -> str:
    """Lowercase, hyphen-separated ASCII-ish form used as the lookup key."""
    text = unicodedata.normalize("NFKC", name).casefold()
    return _NON_ALNUM.sub("-", text).strip("-")


def _build_aliases() -> Mapping[str, str]:
    table: dict[str, str] = {}
    for canonical, spellings in _SPELLINGS.items():
        for spelling in (canonical, *spellings):
            key = _fold(spelling)
            claimed = table.setdefault(key, canonical)
            if claimed != canonical:
                # Two applications claiming one spelling would merge them.
                raise ValueError(f"alias {spelling!r} claimed by {claimed!r} and {canonical!r}")
    return MappingProxyType(table)


#: Folded spelling -> canonical name. The one table every comparison uses.
CLIENT_ALIASES: Final = _build_aliases()


def normalize_client_name(name: str) -> str:
    """The canonical name of ``name``; unknown names fold to themselves.

    >>> normalize_client_name("Claude Desktop")
    'claude-desktop'
    >>> normalize_client_name("My Agent_2")
    'my-agent-2'
    """
    folded = _fold(name)
    if not folded:
        return UNKNOWN_CLIENT
    return CLIENT_ALIASES.get(folded, folded)


def client_display_name(name: str) -> str:
    """What to call a client in user text ("restart Claude Code ...")."""
    canonical = normalize_client_name(name)
    return CLIENT_DISPLAY_NAMES.get(canonical, canonical)


def worker_identity(client_name: str, session_id: str, started_at: datetime) -> str:
    """A stable identity derived from client, session and start time.

    The same three inputs (client compared normalised, time compared as an
    instant) always give the same identity; changing any of them gives a
    different one. The canonical client name leads so the text is readable.
    """
    if started_at.tzinfo is None:
        raise ValueError(f"started_at must be timezone-aware, got {started_at!r}")
    client = normalize_client_name(client_name)
    instant = started_at.astimezone(UTC).isoformat(timespec="microseconds")
    material = "\0".join((client, session_id, instant)).encode()
    digest = hashlib.sha256(material).hexdigest()[:IDENTITY_DIGEST_CHARS]
    return f"{client}:{digest}"
