"""The gateway end to end: real SDK clients over streamable HTTP and through a real bridge process.

Strategy: a TrayService runs in the test's loop with real children from
tests/servers/; clients are the SDK's own ClientSession over its own
streamable HTTP client, or over stdio to `python -m core.cli.main connect NAME`
spawned as a subprocess. Only the OS keyring is replaced (tests/support/fake_keyring).
"""

from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from mcp.client.session import IncomingMessage
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from core.base.envvars import PLATFORM_ENV
from core.base.states import BreakerState, ServerState
from core.platform.backends import Backends
from tests.conftest import ECHO, kill_hard, process_alive, python_server, wait_ready, wait_until
from tests.support.gateway_support import (
    REPO,
    Services,
    bridge_client,
    http_client,
    text,
    worker_row,
)

FRAGILE = REPO / "resources" / "demo" / "fragile_server.py"


async def test_an_http_client_lists_and_calls_tools_and_reads_resources_and_prompts(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))

    async with http_client(service, "echo") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"text": "through the gateway"})
        resource = await client.read_resource("note://hello")
        prompt = await client.get_prompt("greet", {"name": "Ada"})

    assert {"echo", "slow_read", "crash"} <= set(tools)
    assert tools["echo"].annotations is not None and tools["echo"].annotations.read_only_hint
    assert text(result) == "through the gateway"
    assert resource.contents[0].text == "hello from echo"  # type: ignore[union-attr]
    assert "Ada" in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_a_client_through_the_bridge_lists_and_calls_tools(
    services: Services, backend: Backends
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))

    # The bridge's own stdio runs on the chosen set's pipes (threads in the portable one).
    env = {"MCP_TRAY_CLIENT": "Claude Desktop", PLATFORM_ENV: backend.name}
    async with bridge_client(service.paths, "echo", env=env) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("echo", {"text": "via the bridge"})
        sessions = service.sessions.to_json()

    assert "echo" in names
    assert text(result) == "via the bridge"
    assert [(s["kind"], s["client_name"]) for s in sessions] == [("bridge", "claude-desktop")]


async def test_kill_9_between_two_calls_of_one_session_is_invisible_to_the_client(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    server = service.supervisor.server("echo")
    await wait_ready(server)

    async with http_client(service, "echo") as client:
        first = await client.call_tool("whoami", {})
        pid = server.pid
        assert pid is not None and int(text(first)) == pid
        await kill_hard(pid)
        second = await client.call_tool("whoami", {})

    assert not second.is_error, text(second)
    assert int(text(second)) != pid
    assert server.generation == 2
    assert server.respawn_requests == 1


async def test_list_changed_after_a_respawn_reaches_http_and_bridge_clients(
    services: Services, tmp_path: Path
) -> None:
    marker = tmp_path / "extra"
    service = await services.start({"echo": python_server(ECHO, ECHO_EXTRA_TOOL_FILE=str(marker))})
    server = service.supervisor.server("echo")
    await wait_ready(server)
    seen: dict[str, list[str]] = {"http": [], "bridge": []}

    def collector(kind: str) -> Any:
        async def handler(message: IncomingMessage) -> None:
            method = getattr(getattr(message, "root", message), "method", None)
            if isinstance(method, str):
                seen[kind].append(method)

        return handler

    async with http_client(service, "echo", message_handler=collector("http")) as http:
        async with bridge_client(
            service.paths, "echo", session_kwargs={"message_handler": collector("bridge")}
        ) as bridge:
            assert "extra_tool" not in [t.name for t in (await http.list_tools()).tools]
            await wait_until(
                lambda: (
                    len(service.gateway.connections) == 2
                    and all(c.http.streaming for c in service.gateway.connections.values())
                ),
                what="two sessions, each with its GET stream open",
            )
            marker.write_text("1")
            await service.supervisor.respawn("echo")
            await wait_ready(server, generation=2)
            await wait_until(
                lambda: all(
                    "notifications/tools/list_changed" in methods for methods in seen.values()
                ),
                what=f"list_changed on both clients (seen {seen})",
            )
            assert "extra_tool" in [t.name for t in (await http.list_tools()).tools]
            assert "extra_tool" in [t.name for t in (await bridge.list_tools()).tools]


async def test_a_parked_servers_session_trips_after_three_failures_and_reset_clears_it(
    services: Services,
) -> None:
    service = await services.start(
        {"ghost": {"command": "mcp-tray-no-such-command"}, "echo": python_server(ECHO)}
    )
    ghost = service.supervisor.server("ghost")
    await wait_until(lambda: ghost.state is ServerState.PARKED, what="ghost parked")

    async with http_client(service, "ghost") as first, http_client(service, "ghost") as second:
        for _ in range(3):
            result = await first.call_tool("anything", {})
            assert result.is_error and "is parked" in text(result)
        calls_before = ghost.calls
        tripped = await first.call_tool("anything", {})
        assert tripped.is_error
        message = text(tripped)
        assert message.startswith(
            "⚠️ This session has failed 3 times in a row with a non-retryable error."
        )
        session_id = next(s["id"] for s in service.sessions.to_json() if s["breaker"] == "tripped")
        assert f"mcp-tray reset {session_id}" in message
        assert ghost.calls == calls_before  # answered at once: nothing reached the server
        assert ghost.generation == 1  # nothing was spawned

        other = await second.call_tool("anything", {})
        assert "is parked" in text(other) and "⚠️" not in text(other)

        service.sessions.reset(session_id)
        calls_before = ghost.calls
        after_reset = await first.call_tool("anything", {})
        assert "is parked" in text(after_reset)
        assert ghost.calls == calls_before + 1


async def test_a_session_that_keeps_crashing_its_server_trips_through_the_bridge(
    services: Services,
) -> None:
    """The first ten minutes' walkthrough: demo-fragile's crash, three times, through a bridge."""
    service = await services.start({"fragile": python_server(FRAGILE)})
    fragile = service.supervisor.server("fragile")
    async with bridge_client(service.paths, "fragile") as client:
        for attempt in range(3):
            await wait_ready(fragile, generation=attempt + 1)
            crashed = await client.call_tool("crash", {})
            assert crashed.is_error and "exited mid-call" in text(crashed)
        tripped = await client.call_tool("ping", {})
        (session,) = [s for s in service.sessions.to_json() if s["server"] == "fragile"]

    assert text(tripped).startswith("⚠️ This session has failed 3 times in a row")
    assert session["breaker"] == "tripped"


async def test_reset_after_three_crashes_makes_the_session_work_again_at_once(
    services: Services,
) -> None:
    """README's step 4: the crashes that trip the session open the server's breaker
    too; Reset closes both, and the child that is back answers the next call."""
    service = await services.start({"fragile": python_server(FRAGILE)})
    fragile = service.supervisor.server("fragile")
    async with http_client(service, "fragile") as client:
        for attempt in range(3):
            await wait_ready(fragile, generation=attempt + 1)
            assert (await client.call_tool("crash", {})).is_error
        opened = fragile.breaker.state
        assert opened is BreakerState.OPEN
        assert text(await client.call_tool("ping", {})).startswith("⚠️ This session has failed")
        (session,) = [s for s in service.sessions.all() if s.tripped]

        service.sessions.reset(session.id)

        closed = fragile.breaker.state
        assert closed is BreakerState.CLOSED
        answered = await client.call_tool("ping", {})
        assert not answered.is_error, text(answered)
        assert text(answered) == f"pong from pid {fragile.pid}"
    assert "breaker closed: session" in fragile.log_path.read_text()


async def test_a_success_between_failures_resets_the_session_count(
    services: Services, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("1")
    service = await services.start({"echo": python_server(ECHO, ECHO_FAIL_WHILE=str(broken))})
    server = service.supervisor.server("echo")

    async with http_client(service, "echo") as client:
        await wait_until(lambda: server.state is ServerState.PARKED, timeout=60, what="parked")
        for _ in range(2):
            assert (await client.call_tool("echo", {"text": "x"})).is_error
        session = service.sessions.all()[0]
        assert session.breaker.consecutive_failures == 2
        broken.unlink()
        await service.supervisor.respawn("echo")
        await wait_ready(server)
        assert not (await client.call_tool("echo", {"text": "x"})).is_error
        assert session.breaker.consecutive_failures == 0


async def test_the_bridge_worker_row_lives_while_it_runs_and_goes_when_it_exits(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    env = {
        "MCP_TRAY_CLIENT": "cursor",
        "MCP_TRAY_CLIENT_SESSION": "sess-1",
        "MCP_TRAY_HEARTBEAT_TTL": "3",
        "MCP_TRAY_HEARTBEAT_INTERVAL": "0.2",
    }

    async with bridge_client(service.paths, "echo", env=env) as client:
        await client.call_tool("echo", {"text": "x"})
        await service.workers.refresh()  # type: ignore[union-attr]
        rows = [r for r in service.workers_json() if r["session_id"] == "sess-1"]
        assert len(rows) == 1
        row = rows[0]
        assert row["client_name"] == "cursor" and row["live"] and row["server"] == "echo"
        first_beat = row["last_heartbeat_at"]

        async def beat_seen() -> bool:
            return bool(
                (await worker_row(service, "sess-1")).get("last_heartbeat_at") != first_beat
            )

        await wait_until(beat_seen, what="a heartbeat", timeout=10)

    assert await worker_row(service, "sess-1") == {}


async def test_requests_without_the_token_or_from_foreign_origins_are_refused(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"},
        },
    }
    url = f"{service.url}/mcp/echo"
    async with httpx.AsyncClient() as http:
        assert (await http.post(url, json=body)).status_code == 401
        assert (
            await http.post(url, json=body, headers={"Authorization": "Bearer wrong"})
        ).status_code == 401
        good = {
            "Authorization": f"Bearer {service.token}",
            "Accept": "application/json, text/event-stream",
        }
        evil = await http.post(url, json=body, headers={**good, "Origin": "https://evil.example"})
        assert evil.status_code == 403
        rebound = await http.post(url, json=body, headers={**good, "Host": "attacker.example:80"})
        assert rebound.status_code == 403
        assert (await http.get(f"{service.url}/api/v1/status")).status_code == 401
        ok = await http.post(url, json=body, headers={**good, "Origin": "http://localhost:3000"})
        assert ok.status_code == 200


def test_nothing_listens_on_a_non_loopback_address_in_a_running_tray(tmp_path: Path) -> None:
    from tests.support.cli_support import Headless

    tray = Headless(tmp_path / "home", {"mcpServers": {}})
    try:
        tray.wait_for(lambda: tray.paths.runtime_file.exists(), "runtime file")
        import psutil

        listening = [
            c.laddr
            for c in psutil.Process(tray.proc.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening, "the tray listens somewhere"
        assert all(address.ip == "127.0.0.1" for address in listening), listening
    finally:
        tray.stop()


async def test_a_sampling_request_reaches_the_session_whose_call_is_in_flight(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    asked: dict[str, list[str]] = {"a": [], "b": []}

    def sampler(name: str) -> Any:
        async def sample(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
            question = params.messages[0].content.text  # type: ignore[union-attr]
            asked[name].append(question)
            return CreateMessageResult(
                role="assistant",
                content=TextContent(type="text", text=f"{name} says 42"),
                model="test",
            )

        return sample

    async with (
        http_client(service, "echo", sampling_callback=sampler("a")) as a,
        http_client(service, "echo", sampling_callback=sampler("b")) as b,
    ):
        answer_b = await b.call_tool("ask", {"question": "from b"})
        answer_a = await a.call_tool("ask", {"question": "from a"})

    assert text(answer_a) == "a says 42"
    assert text(answer_b) == "b says 42"
    assert asked == {"a": ["from a"], "b": ["from b"]}


async def test_progress_of_a_call_reaches_its_client(services: Services) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    progress: list[tuple[float, float | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async with http_client(service, "echo") as client:
        result = await client.call_tool(
            "count", {"steps": 3}, progress_callback=cast(Any, on_progress)
        )

    assert text(result) == "counted 3"
    assert progress == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]


async def test_per_session_sharing_gives_each_session_its_own_child(services: Services) -> None:
    service = await services.start({"echo": python_server(ECHO) | {"sharing": "per-session"}})
    async with http_client(service, "echo") as a, http_client(service, "echo") as b:
        pid_a = int(text(await a.call_tool("whoami", {})))
        pid_b = int(text(await b.call_tool("whoami", {})))
        assert pid_a != pid_b
        assert len(service.supervisor.private) == 2
    await wait_until(lambda: not service.supervisor.private, what="private children stopped")
    await wait_until(
        lambda: not process_alive(pid_a) and not process_alive(pid_b), what="both children gone"
    )


@pytest.mark.usefixtures("fake_keyring")
async def test_a_keyring_secret_reaches_the_child_and_a_missing_one_parks_naming_it(
    services: Services,
) -> None:
    from core.settings.secrets import set_secret

    set_secret("echo-token", "s3cr3t")
    service = await services.start(
        {
            "echo": python_server(ECHO) | {"env": {"API_TOKEN": "${keyring:echo-token}"}},
            "needy": python_server(ECHO) | {"env": {"API_TOKEN": "${keyring:absent}"}},
        }
    )
    echo = service.supervisor.server("echo")
    needy = service.supervisor.server("needy")
    await wait_ready(echo)
    result = await service.supervisor.call_tool("echo", "getenv", {"name": "API_TOKEN"})
    assert result["content"][0]["text"] == "s3cr3t"
    assert "s3cr3t" not in echo.log_path.read_text()

    await wait_until(lambda: needy.state is ServerState.PARKED, what="needy parked")
    assert "'absent'" in (needy.parked_reason or "")
    assert "mcp-tray secret set absent" in (needy.parked_reason or "")


@pytest.mark.usefixtures("fake_keyring")
async def test_the_api_token_lives_in_the_keyring_when_one_is_usable(services: Services) -> None:
    service = await services.start({})
    from core.settings.secrets import read_token

    assert read_token(service.paths.token_file) == service.token
    assert not service.paths.token_file.exists()
    assert not any(w["family"] == "token-storage" for w in service.warnings_json())


async def test_without_a_keyring_the_token_falls_back_to_a_private_file_with_a_warning(
    services: Services,
) -> None:
    service = await services.start({})
    token_file = service.paths.token_file
    assert token_file.read_text().strip() == service.token
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert any(w["family"] == "token-storage" for w in service.warnings_json())


async def test_metrics_expose_server_state_calls_and_sessions(services: Services) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    async with http_client(service, "echo") as client:
        await client.call_tool("echo", {"text": "x"})
        async with httpx.AsyncClient() as http:
            reply = await http.get(
                f"{service.url}/metrics", headers={"Authorization": f"Bearer {service.token}"}
            )
    body = reply.text
    assert 'mcp_tray_server_state{server="echo",state="ready"} 1.0' in body
    assert 'mcp_tray_calls_total{server="echo"} 1.0' in body
    assert 'mcp_tray_respawns_requested_total{server="echo"} 0.0' in body
    assert 'mcp_tray_call_seconds_count{method="tools/call",server="echo"} 1.0' in body
    assert "mcp_tray_session_tripped{" in body
