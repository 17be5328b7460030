"""2026-07-28 clients: one session per client process, parked calls found by requestState.

Strategy: a real tray (TrayService in-process) and real children (the
hand-written 2024-11-05 server, whose ``ask`` tool samples mid-call the old
way; tests/servers/echo.py per session). 2026-07-28 requests go out as raw
HTTP, each on a connection of its own (the SDK's client drops idle ones
after 5 s), from this test process and from a second real client process;
the bridge row is a real ``mcp-tray connect``. A session's end is looked for
by calling the gateway's housekeeping directly, never by waiting for it.
"""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core.serving.service import TrayService
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.support.gateway_support import (
    Services,
    http_client,
    modern_post,
    modern_request,
    post_from_another_process,
    sdk_bridge,
    text,
    worker_rows,
)
from tests.support.isolation_support import LEGACY, Seen, heard, start_chatty

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

#: Sends one 2026-07-28 tools/call from a process of its own, prints the answer.


def sessions_of(service: TrayService, server: str) -> list[Any]:
    return [s for s in service.sessions.all() if s.server == server]


def from_another_process(service: TrayService, server: str, tool: str) -> dict[str, Any]:
    body, headers = modern_request("tools/call", {"name": tool, "arguments": {}})
    return post_from_another_process(service, server, body, headers)


async def test_one_client_process_is_one_session_and_one_child_whatever_its_connections(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    await wait_ready(service.supervisor.server("echo"))
    mine = [await modern_post(service, "echo", "tools/call", {"name": "whoami"}) for _ in range(3)]
    theirs = await asyncio.to_thread(from_another_process, service, "echo", "whoami")

    pids = [answer["result"]["content"][0]["text"] for answer in mine]
    assert len(set(pids)) == 1  # three connections, one session, one child
    assert theirs["result"]["content"][0]["text"] not in pids
    assert len(sessions_of(service, "echo")) == 2
    assert len(service.supervisor.private) == 2

    # The other process has exited: its session and its child go at the next look.
    service.gateway.stateless.expire()
    (left,) = sessions_of(service, "echo")
    await wait_until(lambda: len(service.supervisor.private) == 1, what="its child to stop")
    again = await modern_post(service, "echo", "tools/call", {"name": "whoami"})
    assert again["result"]["content"][0]["text"] == pids[0]
    assert sessions_of(service, "echo") == [left]


async def test_a_bridged_2026_07_28_clients_session_ends_with_its_bridge(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    await wait_ready(service.supervisor.server("echo"))
    async with sdk_bridge(service.paths, "echo") as client:
        assert client.protocol_version == "2026-07-28"
        assert text(await client.call_tool("echo", {"text": "via the bridge"})) == "via the bridge"
        (session,) = sessions_of(service, "echo")
        assert session.kind == "bridge" and session.worker_identity
        identity = session.worker_identity
    # The bridge exited: its worker row went with it.
    await wait_until(
        lambda: not any(r["worker_identity"] == identity for r in service.workers_json()),
        what="the bridge's row to go",
    )
    assert await worker_rows(service, session.id) == []

    service.gateway.stateless.expire()

    assert sessions_of(service, "echo") == []
    await wait_until(lambda: not service.supervisor.private, what="its child to stop")


async def test_a_retry_on_a_new_connection_finds_its_parked_call(services: Services) -> None:
    service = await services.start({"old": python_server(LEGACY)})
    await wait_ready(service.supervisor.server("old"))
    asked = await modern_post(
        service, "old", "tools/call", {"name": "ask", "arguments": {"question": "q?"}}, sampling={}
    )
    result = asked["result"]
    assert result["resultType"] == "input_required"
    (key,) = result["inputRequests"]
    answer = {"role": "assistant", "content": {"type": "text", "text": "later"}, "model": "m"}

    retried = await modern_post(
        service,
        "old",
        "tools/call",
        {
            "name": "ask",
            "arguments": {"question": "q?"},
            "requestState": result["requestState"],
            "inputResponses": {key: answer},
        },
        sampling={},
    )

    assert retried["result"]["resultType"] == "complete"
    assert "later" in retried["result"]["content"][0]["text"]


async def test_an_abandoned_parked_call_never_blocks_another_sessions_sampling(
    services: Services, tmp_path: Path
) -> None:
    service, log = await start_chatty(services, tmp_path)
    parked = await modern_post(
        service,
        "chatty",
        "tools/call",
        {"name": "ask_after", "arguments": {"question": "abandoned", "delay": 0}},
        sampling={},
    )
    assert parked["result"]["resultType"] == "input_required"  # and never answered
    b = Seen("B")
    async with http_client(service, "chatty", **b.kwargs()) as client_b:
        answered = await client_b.call_tool("ask_after", {"question": "mine", "delay": 0})

    assert text(answered) == "B answers mine"
    assert b.sampled == ["mine"]
    assert {"event": "sampled", "question": "mine", "answer": "B answers mine"} in heard(log)
