"""A notification for a client between two of its GET streams waits for the next one.

Strategy: a real tray serving tests/servers/chatty.py, driven by a plain
HTTP client (httpx) that decides exactly when its session's GET stream is
open: a subscribed resource changes while none is, then the client opens
one and reads its first event. The backlog's bound is shown on the
session object itself (plain Python, no I/O), as its cap is a count.
"""

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from core.protocol.headers import SESSION_HEADER
from core.protocol.http_session import STREAM_BACKLOG, HttpSession
from tests.conftest import wait_ready
from tests.support.gateway_support import Raw, Services, call
from tests.support.isolation_support import chatty


async def first_event(raw: Raw) -> dict[str, Any]:
    """The first message of a newly opened GET stream (the stream is then left)."""
    headers = raw.headers(accept="text/event-stream")
    async with raw.http.stream("GET", raw.url, headers=headers) as reply:
        assert reply.status_code == 200
        async for line in reply.aiter_lines():
            if line.startswith("data: ") and line[6:].strip():
                message: dict[str, Any] = json.loads(line[6:])
                return message
    raise AssertionError("the GET stream ended without an event")


async def test_a_resource_updated_while_the_client_had_no_get_stream_reaches_its_next_one(
    services: Services, tmp_path: Path
) -> None:
    service = await services.start({"chatty": chatty(tmp_path / "chatty.jsonl")})
    await wait_ready(service.supervisor.server("chatty"))
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(http, service, "/mcp/chatty")
        await raw.open()
        subscribed = await raw.post(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "resources/subscribe",
                "params": {"uri": "chatty://a"},
            }
        )
        assert subscribed.status_code == 200, subscribed.text
        touched = await raw.post(call(3, "touch", {"uri": "chatty://a"}))
        assert touched.status_code == 200 and "touched" in touched.text
        assert touched.headers[SESSION_HEADER] == raw.session

        # Nothing was open to carry it when it came; the stream opened now does.
        assert await asyncio.wait_for(first_event(raw), 10) == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "chatty://a"},
        }


def test_the_backlog_keeps_the_newest_notifications_in_order_and_no_requests() -> None:
    session = HttpSession("s", "2025-06-18")
    for n in range(STREAM_BACKLOG + 5):
        assert not session.post({"jsonrpc": "2.0", "method": "m", "params": {"n": n}})
    # A request is the caller's to wait with (it waits for a stream): never kept here.
    assert not session.post({"jsonrpc": "2.0", "id": "mcp-tray-1", "method": "roots/list"})

    stream = session.open_stream()
    kept = [stream.get_nowait() for _ in range(stream.qsize())]
    assert [m["params"]["n"] for m in kept if m] == list(range(5, STREAM_BACKLOG + 5))
    assert session.post({"jsonrpc": "2.0", "method": "after"})

    # What the stream had not sent when it ended goes to the next one.
    session.stream_closed(stream)
    assert not session.streaming
    assert [m and m["method"] for m in [session.open_stream().get_nowait()]] == ["after"]
