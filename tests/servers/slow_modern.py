"""A 2026-07-28 server (the SDK's MCPServer) that is slow to start, as one started
through ``uvx`` or a cold Python on a busy machine is.

It sleeps ``SLOW_START_SECONDS`` (default 10) before it reads its stdin, so it
answers ``server/discover`` only that late. The SDK's stdio loop settles the
era with the first request it reads: discover came first, so it then refuses
``initialize`` (-32022, naming the versions it serves), as real SDK 2.x
servers do. One tool, ``hello``.
"""

import os
import sys
import time

delay = float(os.environ.get("SLOW_START_SECONDS", "10"))
print(f"slow_modern: starting in {delay:g} s", file=sys.stderr, flush=True)
time.sleep(delay)

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("slow-modern")


@server.tool()
def hello() -> str:
    """Says hello, once it is up."""
    return "hello from a slow start"


print("slow_modern: serving", file=sys.stderr, flush=True)
server.run()
