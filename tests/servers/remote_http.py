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
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

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
#: What clients subscribed to, through whatever stood between (the test reads it back).
subscribed: set[str] = set()


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots, asked for inside this call."""
    found = await ctx.session.list_roots()
    return " ".join(str(root.uri) for root in found.roots)


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tell subscribers the resource changed (on the session's own stream, outside the call)."""
    await ctx.session.send_resource_updated(uri)
    return f"touched; subscribed: {' '.join(sorted(subscribed)) or 'none'}"


@server.resource("remote://note")
def note() -> str:
    """A resource to subscribe to."""
    return "a note"


async def _subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def _unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


server._lowlevel_server.add_request_handler(
    "resources/subscribe", SubscribeRequestParams, _subscribe
)
server._lowlevel_server.add_request_handler(
    "resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe
)


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
