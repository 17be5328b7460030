"""A stdio MCP server whose tools grow while it runs, for list caches.

``grow(name)`` adds a tool named ``name`` (its description says so) and
tells its client ``notifications/tools/list_changed``, as a server does
when what it offers changes at run time. ``flaky_read`` is read-only and
kills the server the first time it is called while GROWING_CRASH_FILE does
not exist yet (it creates it first): a call cut by a crash, safe to repeat.
"""

import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("growing")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def base(text: str) -> str:
    """The tool it always has."""
    return text


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool named `name`, and say the list changed."""

    def added() -> str:
        return f"{name} was grown"

    server.add_tool(added, name=name, description=f"A grown tool called {name}.")
    await ctx.request_context.session.send_tool_list_changed()
    return f"grew {name}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def flaky_read(key: str) -> str:
    """Read a key; the first call ever (see GROWING_CRASH_FILE) kills the server."""
    marker = os.environ.get("GROWING_CRASH_FILE")
    if marker and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os._exit(9)
    return f"{key} read by {os.getpid()}"


if __name__ == "__main__":
    server.run()
