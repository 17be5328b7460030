"""A remote MCP server for tests: the SDK's streamable-HTTP server, on a socket the test binds.

``remote_http.py FD``: serve /mcp on the listening socket inherited as file
descriptor FD (the test bound it, so it knows the port before the server is
up, and can start a server on the same port again after stopping one).
"""

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("remote-echo")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


if __name__ == "__main__":
    uvicorn.run(server.streamable_http_app(), fd=int(sys.argv[1]), log_level="warning")
