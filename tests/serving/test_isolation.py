"""Isolation on shared servers: what one client session sends or receives never reaches another.

Strategy: a real tray (TrayService in-process) shares one real child,
tests/servers/chatty.py, between two real SDK clients over streamable HTTP.
Each client records what reached it (sampling and roots requests, log
messages, notifications); chatty records, one JSON line each, what reached
the server. "Nothing arrived" is shown with a marker sent after the fact on
the same FIFO stream, never by waiting: a message the gateway had passed on
would have arrived before the marker.
"""

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession, MCPError

from core.serving.service import TrayService
from tests.conftest import python_server, wait_ready, wait_until
from tests.support.gateway_support import Services, http_client, text
from tests.support.isolation_support import LEGACY, Seen, heard, slow_call_in_flight, start_chatty

# Subscriptions, logging levels and roots are the handshake era's: the SDK
# warns that 2026-07-28 removed them, which is why these tests exist.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@contextlib.asynccontextmanager
async def chatty_pair(
    services: Services, tmp_path: Path, *, b_sampling: bool = True, **entry: str
) -> AsyncIterator[tuple[TrayService, Path, ClientSession, Seen, ClientSession, Seen]]:
    service, log = await start_chatty(services, tmp_path, **entry)
    a, b = Seen("A", roots=["file:///a"]), Seen("B", roots=["file:///b"])
    async with http_client(service, "chatty", **a.kwargs()) as client_a:
        async with http_client(service, "chatty", **b.kwargs(sampling=b_sampling)) as client_b:
            await wait_until(lambda: len(service.gateway.connections) == 2, what="two sessions")
            yield service, log, client_a, a, client_b, b


async def test_a_delayed_sampling_request_reaches_only_the_session_whose_call_made_it(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path) as (_, log, client_a, a, _, b):
        result = await client_a.call_tool("ask_after", {"question": "q1", "delay": 0.2})

    assert text(result) == "A answers q1"
    assert a.sampled == ["q1"] and b.sampled == []
    assert {"event": "sampled", "question": "q1", "answer": "A answers q1"} in heard(log)


async def test_a_server_request_during_calls_of_two_sessions_fails_closed_and_warns_once(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path) as (service, log, client_a, a, client_b, b):
        # B's call is in flight when A's call asks the client's model.
        b_task = await slow_call_in_flight(service, client_b)
        with pytest.raises(MCPError) as refused_call:
            await client_a.call_tool("ask_after", {"question": "q2", "delay": 0.05})
        assert text(await b_task) == "slept 1.0"
        second = await client_a.call_tool("ask_after", {"question": "q3", "delay": 0.0})

    # The child's tool saw its sampling request refused, and said so to its caller.
    assert '"sharing": "per-session"' in str(refused_call.value)
    assert "cannot tell which client session" in str(refused_call.value)
    assert a.sampled == ["q3"] and b.sampled == []  # q2 reached nobody; q3 had no rival
    assert text(second) == "A answers q3"
    refused = [e for e in heard(log) if e["event"] == "sampling-failed"]
    assert [e["question"] for e in refused] == ["q2"]
    warnings = [w for w in service.warnings_json() if w["family"] == "ambiguous-request"]
    assert len(warnings) == 1 and warnings[0]["subject"] == "chatty"


async def test_a_request_made_after_its_call_returned_never_reaches_another_sessions_call(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path) as (service, log, client_a, a, client_b, b):
        b_task = await slow_call_in_flight(service, client_b)
        # A's tool returns at once and asks the client's model later, outside any call,
        # while B's call is in flight: it is not B's, and B must not be asked.
        assert text(await client_a.call_tool("ask_later", {"question": "A's", "delay": 0.3}))
        await wait_until(
            lambda: any(e["event"] == "sampling-failed" for e in heard(log)), what="the refusal"
        )
        assert text(await b_task) == "slept 1.0"

    assert a.sampled == [] and b.sampled == []
    refusal = next(e for e in heard(log) if e["event"] == "sampling-failed")
    assert refusal["question"] == "A's" and "cannot tell which client session" in refusal["error"]


async def test_an_idle_session_receives_none_of_another_sessions_logs_or_resource_updates(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path) as (_, _, client_a, a, client_b, b):
        await client_a.subscribe_resource("chatty://a")
        await client_b.subscribe_resource("chatty://b")
        await client_a.call_tool("log", {"level": "info", "text": "secret of A"})
        await client_a.call_tool("touch", {"uri": "chatty://a"})
        # The marker: B's own update, on B's stream after everything above.
        await client_a.call_tool("touch", {"uri": "chatty://b"})
        await wait_until(lambda: b.updated() == ["chatty://b"], what="B's marker")
        await wait_until(lambda: a.updated() == ["chatty://a"], what="A's update")

    assert a.logs == ["secret of A"]
    assert b.logs == []
    assert b.updated() == ["chatty://b"]


async def test_subscriptions_are_per_session_and_reference_counted_upstream(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path) as (_, log, client_a, a, client_b, b):
        await client_a.subscribe_resource("chatty://a")
        await client_b.subscribe_resource("chatty://a")
        await client_a.unsubscribe_resource("chatty://a")
        subscriptions = [e for e in heard(log) if e["event"] in ("subscribe", "unsubscribe")]
        assert subscriptions == [{"event": "subscribe", "uri": "chatty://a"}]
        await client_a.call_tool("touch", {"uri": "chatty://a"})
        await wait_until(lambda: b.updated() == ["chatty://a"], what="B's update")
        await client_b.unsubscribe_resource("chatty://a")
        assert heard(log)[-1] == {"event": "unsubscribe", "uri": "chatty://a"}

    assert a.updated() == []


async def test_the_server_logs_at_the_most_verbose_level_a_live_session_asked_for(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path) as (_, log, client_a, a, client_b, b):
        await client_a.subscribe_resource("chatty://a")
        await client_a.set_logging_level("warning")
        await client_b.set_logging_level("debug")
        await client_a.set_logging_level("error")  # B still wants debug: nothing to tell
        levels = [e["level"] for e in heard(log) if e["event"] == "setLevel"]
        assert levels == ["warning", "debug"]
        await client_b.call_tool("log", {"level": "info", "text": "info of B"})
        await client_b.call_tool("log", {"level": "critical", "text": "critical of B"})
        # The marker on A's stream, after anything of B's that could have reached it.
        await client_b.call_tool("touch", {"uri": "chatty://a"})
        await wait_until(lambda: a.updated() == ["chatty://a"], what="A's marker")

    assert b.logs == ["info of B", "critical of B"]
    # A set a level: no licence to hear B's logs, at any level.
    assert a.logs == []


async def test_a_pinned_shared_child_gets_no_sessions_roots_while_two_share_it_and_warns_once(
    services: Services, tmp_path: Path
) -> None:
    pinned = chatty_pair(services, tmp_path, sharing="shared")
    async with pinned as (service, _, client_a, _, client_b, _):
        with pytest.raises(MCPError) as refused_a:
            await client_a.call_tool("roots", {})
        with pytest.raises(MCPError) as refused_b:
            await client_b.call_tool("roots", {})

    for refused in (refused_a, refused_b):
        assert '"sharing": "per-workspace"' in str(refused.value)
        assert '"sharing": "per-session"' in str(refused.value)
    warnings = [w for w in service.warnings_json() if w["subject"] == "chatty"]
    assert [w["family"] for w in warnings] == ["shared-roots"]
    assert "per-workspace" in warnings[0]["fix"]


async def test_a_server_request_outside_any_call_goes_to_the_only_session_else_fails_closed(
    services: Services, tmp_path: Path
) -> None:
    service, log = await start_chatty(services, tmp_path)
    a, b = Seen("A"), Seen("B")
    async with http_client(service, "chatty", **a.kwargs()) as client_a:
        await client_a.call_tool("ask_later", {"question": "alone", "delay": 0.0})
        await wait_until(lambda: a.sampled == ["alone"], what="the only session to be asked")
        async with http_client(service, "chatty", **b.kwargs()) as client_b:
            await wait_until(lambda: len(service.gateway.connections) == 2, what="two sessions")
            await client_b.call_tool("ask_later", {"question": "whose", "delay": 0.0})
            await wait_until(
                lambda: any(e["event"] == "sampling-failed" for e in heard(log)),
                what="the refusal",
            )

    assert a.sampled == ["alone"] and b.sampled == []
    refusal = next(e for e in heard(log) if e["event"] == "sampling-failed")
    assert refusal["question"] == "whose" and "per-session" in refusal["error"]


async def test_a_server_request_the_client_never_declared_gets_method_not_found(
    services: Services, tmp_path: Path
) -> None:
    async with chatty_pair(services, tmp_path, b_sampling=False) as (_, _, _, a, client_b, b):
        with pytest.raises(MCPError) as refused:
            await client_b.call_tool("ask_after", {"question": "q", "delay": 0.0})

    assert refused.value.code == -32601
    assert "did not declare the 'sampling' capability" in str(refused.value)
    assert a.sampled == [] and b.sampled == []


async def test_a_pinned_shared_child_is_given_each_new_sessions_roots_and_its_only_ones_changes(
    services: Services, tmp_path: Path
) -> None:
    service, log = await start_chatty(services, tmp_path, sharing="shared")
    a, b = Seen("A", roots=["file:///a"]), Seen("B", roots=["file:///b"])
    async with http_client(service, "chatty", **a.kwargs()) as client_a:
        await client_a.send_roots_list_changed()
        await wait_until(
            lambda: {"event": "roots", "uris": ["file:///a"]} in heard(log),
            what="the server to list A's roots again",
        )
        async with http_client(service, "chatty", **b.kwargs()) as client_b:
            # B joined: the server is told its roots changed, asks, and is given B's.
            assert text(await client_b.call_tool("known_roots", {})) == "file:///b"
            before = len(heard(log))
            await client_b.send_roots_list_changed()  # not passed on: two sessions share it
            # A round trip through the same pipe: a passed-on notification came first.
            await client_b.call_tool("slow", {"seconds": 0})
            assert [e for e in heard(log)[before:] if e["event"].startswith("roots")] == []
        # B left: A is the only one again, and the server gets A's roots once more.
        await wait_until(
            lambda: heard(log)[-1] == {"event": "roots", "uris": ["file:///a"]},
            what="the server to list A's roots after B left",
        )

    assert b.roots_asked >= 1


async def test_a_child_that_speaks_only_2024_11_05_is_presented_as_2024_11_05(
    services: Services,
) -> None:
    service = await services.start({"old": python_server(LEGACY)})
    await wait_ready(service.supervisor.server("old"))
    async with http_client(service, "old") as client:
        result = await client.call_tool("hello", {})
        version = client.protocol_version

    assert text(result) == "hello from 2024-11-05"
    assert version == "2024-11-05"


@pytest.mark.parametrize("asked", ["2024-11-05", "2025-03-26", "2025-11-25"])
async def test_the_version_a_client_is_told_is_one_it_and_the_child_both_speak(
    services: Services, asked: str
) -> None:
    service = await services.start({"old": python_server(LEGACY)})
    await wait_ready(service.supervisor.server("old"))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": asked,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"{service.url}/mcp/old",
            json=body,
            headers={
                "Authorization": f"Bearer {service.token}",
                "Accept": "application/json, text/event-stream",
            },
        )
    assert reply.json()["result"]["protocolVersion"] == "2024-11-05"
