"""A remote MCP server for tests: the SDK's streamable-HTTP server, on a socket the test binds.

``remote_http.py FD [KEY]``: serve /mcp on the listening socket inherited as
file descriptor FD (the test bound it, so it knows the port before the server
is up, and can start a server on the same port again after stopping one).
With KEY, every request must carry ``X-Api-Key: KEY`` (else 401), as an
API-key protected service would.
"""

import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("remote-echo")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


def keyed(app: Any, key: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"x-api-key") != key.encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing or wrong X-Api-Key"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    app = server.streamable_http_app()
    if len(sys.argv) > 2:
        app = keyed(app, sys.argv[2])
    uvicorn.run(app, fd=int(sys.argv[1]), log_level="warning")
