"""A stdio MCP server (the SDK's MCPServer) that says what trace context reached it.

One tool, ``traceparent``: the ``traceparent`` of the request's ``_meta`` as the
server read it ("" when none came), so a test sees what mcp-tray told a child.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("traced")


@server.tool()
def traceparent(ctx: Context) -> str:
    """The W3C trace context this request came with."""
    meta = ctx.request_context.meta or {}
    value = meta.get("traceparent")
    return value if isinstance(value, str) else ""


server.run()
