"""Identity that cannot be borrowed: a worker header or a requestState works only for its own process.

Strategy: a real tray (TrayService in-process) with real children (tests/servers/echo.py
per session; the hand-written 2024-11-05 server, whose ``ask`` samples mid-call the
old way, so a 2026-07-28 client's call is parked). Two real client processes: this
test's own, and a second one started for the request (raw 2026-07-28 HTTP, as
tests/serving/test_stateless_clients.py sends it), each on connections of its own, so
the tray finds each request's process from its connection (psutil). A real bridge
(``mcp-tray connect``) shows its own header keeps working.
"""

import asyncio
from typing import Any

import httpx2
import pytest

from core.protocol.headers import WORKER_HEADER
from core.serving.calls.translate import OTHER_SESSION
from core.serving.eras.identity import BORROWED
from core.serving.service import TrayService
from tests.conftest import ECHO, python_server, wait_ready
from tests.support.gateway_support import (
    Services,
    modern_request,
    post_from_another_process,
    sdk_bridge,
    text,
)
from tests.support.isolation_support import LEGACY

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

#: Sends one 2026-07-28 request from a process of its own, prints the answer.
ANSWER = {"role": "assistant", "content": {"type": "text", "text": "A's answer"}, "model": "m"}


def request(method: str, params: dict[str, Any], worker: str | None, **envelope: Any) -> Any:
    body, headers = modern_request(method, params, **envelope)
    if worker is not None:
        headers[WORKER_HEADER] = worker
    return body, headers


async def from_here(service: TrayService, server: str, body: Any, headers: Any) -> dict[str, Any]:
    """This process's request, on a connection of its own."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        reply = await http.post(
            f"{service.url}/mcp/{server}",
            json=body,
            headers={**headers, "authorization": f"Bearer {service.token}"},
        )
    answer: dict[str, Any] = reply.json()
    return answer


async def test_a_worker_header_sent_by_another_living_process_is_refused_and_borrows_nothing(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    await wait_ready(service.supervisor.server("echo"))
    whoami = request("tools/call", {"name": "whoami", "arguments": {}}, "w-of-a")

    mine = await from_here(service, "echo", *whoami)
    theirs = await asyncio.to_thread(post_from_another_process, service, "echo", *whoami)
    again = await from_here(service, "echo", *whoami)

    assert "error" in theirs, theirs
    assert theirs["error"]["data"]["reason"] == BORROWED
    assert "'w-of-a' belongs to another process" in theirs["error"]["message"]
    child = mine["result"]["content"][0]["text"]
    assert again["result"]["content"][0]["text"] == child  # A's session and child, untouched
    assert len(service.supervisor.private) == 1  # nothing was made for the other process


async def test_a_worker_header_whose_process_is_gone_starts_a_session_of_its_own(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    await wait_ready(service.supervisor.server("echo"))
    whoami = request("tools/call", {"name": "whoami", "arguments": {}}, "w-reused")

    first = await asyncio.to_thread(post_from_another_process, service, "echo", *whoami)
    second = await asyncio.to_thread(post_from_another_process, service, "echo", *whoami)

    # The first process had exited: the second is served, by a child of its own session.
    assert "result" in first and "result" in second, (first, second)
    sessions = [s for s in service.sessions.all() if s.server == "echo"]
    assert len(sessions) == 1 and sessions[0].worker_identity == "w-reused"


async def test_a_bridges_own_header_keeps_working_across_its_connections(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    await wait_ready(service.supervisor.server("echo"))
    async with sdk_bridge(service.paths, "echo") as client:
        assert client.protocol_version == "2026-07-28"
        pids = {text(await client.call_tool("whoami", {})) for _ in range(3)}
    assert len(pids) == 1


async def test_a_requeststate_retried_by_another_process_is_refused_and_its_owner_still_gets_it(
    services: Services,
) -> None:
    service = await services.start({"old": python_server(LEGACY)})
    await wait_ready(service.supervisor.server("old"))
    ask = {"name": "ask", "arguments": {"question": "q?"}}
    asked = await from_here(service, "old", *request("tools/call", ask, None, sampling={}))
    parked = asked["result"]
    assert parked["resultType"] == "input_required"
    (key,) = parked["inputRequests"]
    retry = {**ask, "requestState": parked["requestState"], "inputResponses": {key: ANSWER}}
    stolen = {
        **retry,
        "inputResponses": {key: {**ANSWER, "content": {"type": "text", "text": "B"}}},
    }

    theirs = await asyncio.to_thread(
        post_from_another_process, service, "old", *request("tools/call", stolen, None, sampling={})
    )
    mine = await from_here(service, "old", *request("tools/call", retry, None, sampling={}))

    assert "error" in theirs, theirs
    assert theirs["error"]["data"]["reason"] == OTHER_SESSION
    assert "belongs to another client session" in theirs["error"]["message"]
    assert mine["result"]["resultType"] == "complete"
    assert "A's answer" in mine["result"]["content"][0]["text"]
