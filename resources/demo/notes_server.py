"""Demo MCP server: a tiny notebook (a healthy server with tools, a resource and a prompt)."""

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

NOTES = Path(os.environ.get("DEMO_NOTES_FILE", "/tmp/mcp-tray-demo-notes.txt"))
server = MCPServer("demo-notes")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> list[str]:
    """Every note written so far."""
    return NOTES.read_text().splitlines() if NOTES.exists() else []


@server.tool()
def add_note(text: str) -> str:
    """Append a note (not safe to replay: mcp-tray will not retry it after a crash)."""
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
