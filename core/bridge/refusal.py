"""A bridge that cannot relay at all still answers: every request gets an error saying why.

A client that launched ``mcp-tray connect NAME`` waits for the answer to its
``initialize``; a bridge that exits without one (its home is a file, its
name cannot be a server's) leaves the client to its own timeout (Claude
Code: 30 s per entry) and tells it nothing. So a bridge that gives up
before relaying reads its input to the end and answers each request (each
of a batch) with the reason, as the relay does when it gives up later
(core.bridge.replies.given_up).
"""

import asyncio
from typing import Any

from core.bridge.replies import error_reply, given_up
from core.protocol.jsonrpc import PARSE_ERROR, loads, unparsable_reason


async def refuse_all(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter | Any, why: str
) -> None:
    """Answer each request read from ``reader`` with ``why`` until the input ends."""
    while line := await reader.readline():
        if not line.strip():
            continue
        try:
            answer = given_up(loads(line), why)
        except (ValueError, RecursionError) as exc:
            answer = error_reply(None, PARSE_ERROR, f"Parse error: {unparsable_reason(exc)}; {why}")
        if answer is not None:
            writer.write(answer + b"\n")
            await writer.drain()
