"""A remote MCP server for tests: the SDK's streamable-HTTP server, on a socket the test binds.

``remote_http.py FD [--key KEY] [--sse]``: serve /mcp on the listening socket
inherited as file descriptor FD (the test bound it, so it knows the port
before the server is up, and can start a server on the same port again after
stopping one). With ``--key``, every request must carry ``X-Api-Key: KEY``
(else 401), as an API-key protected service would; with ``--sse``, the older
HTTP+SSE transport (GET /sse, POST /messages/) instead.
"""

import argparse
import socket
from typing import Any

import uvicorn
from asking import add_asking_tools
from mcp.server.mcpserver import MCPServer

server = MCPServer("remote-echo")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


@server.tool()
def big(size: int) -> str:
    """A result of ``size`` characters (a file read, a page fetched)."""
    return "x" * size


add_asking_tools(server)


def keyed(app: Any, key: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"x-api-key") != key.encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing or wrong X-Api-Key"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("fd", type=int)
    parser.add_argument("--key")
    parser.add_argument("--sse", action="store_true")
    args = parser.parse_args()
    app = server.sse_app() if args.sse else server.streamable_http_app()
    if args.key is not None:
        app = keyed(app, args.key)
    # The inherited socket taken for what it is: uvicorn's fd= opens any fd as AF_UNIX, so
    # asyncio would never set TCP_NODELAY and each answer would wait out a 40 ms delayed ACK.
    sock = socket.socket(fileno=args.fd)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
