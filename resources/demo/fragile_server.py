"""Demo MCP server whose `crash` tool kills the process: watch mcp-tray respawn it."""

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("demo-fragile")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def ping() -> str:
    """Answer with this process's pid."""
    return f"pong from pid {os.getpid()}"


@server.tool()
def crash() -> str:
    """Exit the server process at once (the tray turns amber, then green again)."""
    print("demo-fragile: crashing on request", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    server.run()
