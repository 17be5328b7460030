"""Demo MCP server: a tiny notebook (a healthy server with tools, a resource and a prompt).

The notebook is ``demo/notes.txt`` in mcp-tray's state folder, not a file
shared by every user in the temporary folder. ``--state-dir DIR`` names that
folder; without it, the server takes mcp-tray's default one, as mcp-tray
itself does (platformdirs: ``$XDG_STATE_HOME/mcp-tray``, else
``~/.local/state/mcp-tray`` on Linux). mcp-tray removes its own
``MCP_TRAY_*`` variables from a server's environment, so this server cannot
see ``MCP_TRAY_HOME``: a config that runs it under another home passes the
folder with ``--state-dir``.
"""

import argparse
import sys
from pathlib import Path

import platformdirs
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

APP_NAME = "mcp-tray"


def default_state_dir() -> Path:
    """mcp-tray's per-user state folder when MCP_TRAY_HOME is not set (core/settings/paths.py)."""
    return Path(platformdirs.user_state_dir(APP_NAME))


def notes_file(argv: list[str]) -> Path:
    parser = argparse.ArgumentParser(description="Demo MCP server: a tiny notebook.")
    parser.add_argument(
        "--state-dir", type=Path, help="mcp-tray's state folder (default: the per-user one)"
    )
    args = parser.parse_args(argv)
    state = args.state_dir if args.state_dir is not None else default_state_dir()
    return state.expanduser().resolve() / "demo" / "notes.txt"


NOTES = notes_file(sys.argv[1:])
server = MCPServer("demo-notes")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> list[str]:
    """Every note written so far."""
    return NOTES.read_text().splitlines() if NOTES.exists() else []


@server.tool()
def add_note(text: str) -> str:
    """Append a note (not safe to replay: mcp-tray will not retry it after a crash)."""
    NOTES.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with NOTES.open("a") as notes:
        notes.write(text.replace("\n", " ") + "\n")
    return f"noted: {text}"


@server.resource("notes://all")
def all_notes() -> str:
    """The notebook as one text."""
    return NOTES.read_text() if NOTES.exists() else ""


@server.prompt()
def summarise() -> str:
    """Ask the model to summarise the notes."""
    return "Summarise these notes in three bullet points."


if __name__ == "__main__":
    server.run()
