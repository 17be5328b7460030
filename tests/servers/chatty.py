"""A stdio MCP server that talks back: for tests of isolation on shared servers.

Everything it hears from its one client (mcp-tray) and every answer it gets
to its own requests is appended, one JSON object a line, to $CHATTY_LOG, so
a test reads exactly what reached the server.

Tools: ``ask_after`` (sleep, then ask the client's model: sampling inside a
call), ``slow`` (sleep), ``log`` (a notifications/message during the call),
``touch`` (notifications/resources/updated for a URI), ``roots`` (roots/list
inside the call), ``ask_later`` (returns at once, then asks the client's
model outside any call), ``known_roots`` (the roots it last got, the way
server-filesystem keeps its allowed folders), ``whoami`` (its pid). It also records
logging/setLevel, subscribe and unsubscribe, and on
notifications/roots/list_changed lists the roots again; with
``CHATTY_ROOTS_AT_START=1`` it lists them as soon as it is initialized, as
server-filesystem does.
"""

import asyncio
import json
import os
import sys
import warnings
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    EmptyResult,
    NotificationParams,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)

# Sampling, logging and roots are deprecated at 2026-07-28; this server speaks the handshake era.
warnings.simplefilter("ignore")

server = MCPServer("chatty")
_background: set[asyncio.Task[Any]] = set()
#: The roots it got last (None: it never got any).
_roots: list[str] | None = None


def record(**event: Any) -> None:
    path = os.environ.get("CHATTY_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps(event) + "\n")


async def _sample(session: Any, question: str) -> str:
    result = await session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=20,
    )
    content = result.content
    return content.text if isinstance(content, TextContent) else str(content)


@server.tool()
async def ask_after(question: str, delay: float, ctx: Context) -> str:
    """Wait, then ask the client's model (sampling inside this call)."""
    await asyncio.sleep(delay)
    try:
        answer = await _sample(ctx.session, question)
    except Exception as exc:
        record(event="sampling-failed", question=question, error=str(exc))
        raise
    record(event="sampled", question=question, answer=answer)
    return answer


@server.tool()
async def slow(seconds: float) -> str:
    """Just take a while."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def log(level: str, text: str, ctx: Context) -> str:
    """Send one log message during this call."""
    await ctx.log(level, text)  # type: ignore[arg-type]
    return "logged"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tell the client the resource changed."""
    await ctx.session.send_resource_updated(uri)
    return "touched"


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots, asked for inside this call."""
    found = await ctx.session.list_roots()
    return " ".join(str(root.uri) for root in found.roots)


@server.tool()
async def ask_later(question: str, delay: float, ctx: Context) -> str:
    """Return at once; ask the client's model after the call has ended."""
    session = ctx.session

    async def later() -> None:
        await asyncio.sleep(delay)
        try:
            answer = await _sample(session, question)
        except Exception as exc:
            record(event="sampling-failed", question=question, error=str(exc))
            return
        record(event="sampled", question=question, answer=answer)

    task = asyncio.get_running_loop().create_task(later())
    _background.add(task)
    task.add_done_callback(_background.discard)
    return "will ask"


@server.tool()
def whoami() -> str:
    """This server's pid (which child answered)."""
    return str(os.getpid())


@server.tool()
def known_roots() -> str:
    """The roots this server got last (it works in these folders)."""
    return "none" if _roots is None else " ".join(_roots) or "empty"


@server.resource("chatty://a")
def resource_a() -> str:
    """A resource clients may subscribe to."""
    return "a"


@server.resource("chatty://b")
def resource_b() -> str:
    """Another one."""
    return "b"


async def _set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    record(event="setLevel", level=params.level)
    return EmptyResult()


async def _subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    record(event="subscribe", uri=str(params.uri))
    return EmptyResult()


async def _unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    record(event="unsubscribe", uri=str(params.uri))
    return EmptyResult()


async def _roots_changed(ctx: Any, params: NotificationParams) -> None:
    async def relist() -> None:
        global _roots
        try:
            found = await ctx.session.list_roots()
        except Exception as exc:
            record(event="roots-failed", error=str(exc))
            return
        _roots = [str(root.uri) for root in found.roots]
        record(event="roots", uris=_roots)

    task = asyncio.get_running_loop().create_task(relist())
    _background.add(task)
    task.add_done_callback(_background.discard)


async def _initialized(ctx: Any, params: NotificationParams) -> None:
    if os.environ.get("CHATTY_ROOTS_AT_START") == "1":
        await _roots_changed(ctx, params)


_lowlevel = server._lowlevel_server
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)
_lowlevel.add_notification_handler(
    "notifications/roots/list_changed", NotificationParams, _roots_changed
)
_lowlevel.add_notification_handler("notifications/initialized", NotificationParams, _initialized)

if __name__ == "__main__":
    print(f"chatty: started pid {os.getpid()}", file=sys.stderr, flush=True)
    server.run()
