"""Demo MCP server: the time, read-only."""

from datetime import UTC, datetime

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("demo-clock")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


if __name__ == "__main__":
    server.run()
