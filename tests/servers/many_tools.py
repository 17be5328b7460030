"""A stdio MCP server with many tools (``MANY_TOOLS``, default 50), for list sizes.

``MANY_TOOLS_PREFIX`` starts every tool's name (``remote__`` makes this server
list ``remote__search_records_00``: a name that looks like another server's
tool in the aggregate).

Each tool has a description and a small input schema, about what real
servers give, so a tools/list of many of them weighs what a client's model
would read. bench/gateway.py serves ten of them through ``/mcp``.
"""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("many-tools")


def _tool(index: int) -> None:
    def tool(query: str, limit: int = 10) -> str:
        return f"{index}: {query} (at most {limit})"

    server.tool(
        name=f"{os.environ.get('MANY_TOOLS_PREFIX', '')}search_records_{index:02d}",
        description=f"Search collection number {index} for records that match the query; "
        "returns at most `limit` of them, newest first.",
    )(tool)


for number in range(int(os.environ.get("MANY_TOOLS", "50"))):
    _tool(number)


if __name__ == "__main__":
    server.run()
