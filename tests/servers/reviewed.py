"""A stdio MCP server whose tools a test can change between runs, for approvals and reviews.

- ``greet``: its description is read at start from REVIEWED_DESCRIPTION_FILE
  (a fixed text without it), so a test changes a tool between two runs;
- ``delete_thing``: no annotations, so MCP reads it as destructive; it
  appends to REVIEWED_EFFECTS_FILE, so a test sees whether a call reached it;
- ``peek``: read-only;
- ``extra``: only while REVIEWED_EXTRA_TOOL_FILE exists at start (a new tool).
"""

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

description_file = os.environ.get("REVIEWED_DESCRIPTION_FILE")
description = (
    Path(description_file).read_text(encoding="utf-8").strip()
    if description_file and Path(description_file).exists()
    else "Say hello to someone."
)
server = MCPServer("reviewed")
print(
    f"reviewed: started pid {os.getpid()}, greet says {description!r}", file=sys.stderr, flush=True
)


@server.tool(description=description)
def greet(name: str) -> str:
    return f"hello {name}"


@server.tool()
def delete_thing(thing: str) -> str:
    """Delete a thing (it leaves a line in the effects file)."""
    effects = os.environ.get("REVIEWED_EFFECTS_FILE")
    if effects:
        with open(effects, "a", encoding="utf-8") as out:
            out.write(f"deleted {thing}\n")
    return f"deleted {thing}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peek(thing: str) -> str:
    """Look at a thing."""
    return f"{thing} is there"


extra_file = os.environ.get("REVIEWED_EXTRA_TOOL_FILE")
if extra_file and Path(extra_file).exists():

    @server.tool()
    def extra() -> str:
        """A tool that came with an update."""
        return "extra"


if __name__ == "__main__":
    server.run()
