"""One endpoint for many servers (``/mcp``) and profiles (``/mcp/@NAME``), over HTTP in both eras.

Strategy: a real tray in the test's loop with real echo children
(tests/servers/echo.py, several entries of it, so their tool names collide);
real SDK 2.3 clients reach the aggregate endpoints in ``mode="auto"`` (the
client speaks 2026-07-28 to the gateway) and ``mode="legacy"``
(initialize). Children are killed with real signals; a parked member is a
command that does not exist. Nothing is mocked.
"""

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, TextContent

from core.base.states import ServerState
from core.serving.aggregate.profile_view import MAX_NAME_CHARS, exposed_name
from tests.conftest import ECHO, SERVERS, kill_hard, python_server, wait_ready, wait_until
from tests.support.cli_support import run_mcp_tray
from tests.support.gateway_support import Services, sdk_client, text

BOTH_ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])
#: Several SDK servers start per test: a busy 2-core machine needs more than the default
#: (and less than the 60 s a test may take in all).
STARTING = 40.0
#: 60 characters: every ``SERVER__TOOL`` of it passes 64.
LONG = "a-server-whose-name-is-long-enough-to-overflow-tool-names-xx"
MANY_TOOLS = SERVERS / "many_tools.py"


@BOTH_ERAS
async def test_two_servers_with_the_same_tool_names_each_answer_under_their_own_prefix(
    services: Services, mode: str
) -> None:
    service = await services.start({"a": python_server(ECHO), "b": python_server(ECHO)})
    a, b = (service.supervisor.server(name) for name in ("a", "b"))
    await wait_ready(a, timeout=STARTING)
    await wait_ready(b, timeout=STARTING)

    async with sdk_client(service, "@all", mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        pid_a = int(text(await client.call_tool("a__whoami", {})))
        pid_b = int(text(await client.call_tool("b__whoami", {})))
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        greeting = await client.get_prompt("b__greet", {"name": "Ada"})
        read = await client.read_resource("note://hello")

    assert {"a__echo", "b__echo", "a__whoami", "b__whoami"} <= set(names)
    assert len(names) == len(set(names))
    assert (pid_a, pid_b) == (a.pid, b.pid)
    assert sorted(prompts) == ["a__greet", "b__greet"]
    assert "Ada" in greeting.messages[0].content.text  # type: ignore[union-attr]
    # Both offer note://hello: listed once, served by the first in the order, and said so.
    assert resources == ["note://hello"]
    assert read.contents[0].text == "hello from echo"  # type: ignore[union-attr]
    assert a.calls >= 1 and b.calls >= 1
    (everything,) = [p for p in service.profiles() if p.name == "all"]
    assert any("'note://hello' is offered by both 'a' and 'b'" in w for w in everything.warnings)


async def test_the_uri_two_servers_offer_goes_to_the_first_in_the_profiles_order(
    services: Services,
) -> None:
    service = await services.start(
        {"a": python_server(ECHO), "b": python_server(ECHO)},
        profiles={"b-first": {"servers": ["b", "a"]}},
    )
    a, b = (service.supervisor.server(name) for name in ("a", "b"))
    await wait_ready(a, timeout=STARTING)
    await wait_ready(b, timeout=STARTING)
    before = (a.calls, b.calls)

    async with sdk_client(service, "@b-first", "legacy") as client:
        await client.read_resource("note://hello")

    assert (a.calls, b.calls) == (before[0], before[1] + 1)


@BOTH_ERAS
async def test_a_name_past_64_characters_is_shortened_stably_and_still_reaches_its_tool(
    services: Services, mode: str
) -> None:
    service = await services.start({LONG: python_server(ECHO)})
    server = service.supervisor.server(LONG)
    await wait_ready(server, timeout=STARTING)

    async with sdk_client(service, "@all", mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        short = exposed_name(LONG, "whoami")
        pid = int(text(await client.call_tool(short, {})))

    assert all(len(name) <= MAX_NAME_CHARS for name in names)
    assert len(set(names)) == len(names) == len(server.catalog.tools)
    assert short in names and short != f"{LONG}__whoami"
    assert short.startswith(LONG[:40])  # still recognisable
    assert pid == server.pid
    (everything,) = service.profiles()
    assert (short, f"{LONG}__whoami") in everything.renamed
    assert any(f"clients see it as {short!r}" in w for w in everything.warnings)


@BOTH_ERAS
async def test_a_profile_offers_only_its_tools_and_refuses_another_naming_the_profile(
    services: Services, mode: str
) -> None:
    service = await services.start(
        {"a": python_server(ECHO), "b": python_server(ECHO)},
        profiles={
            "coding": {"servers": ["b"], "tools": ["b__*"], "exclude": ["*__crash", "*__write_*"]}
        },
    )
    await wait_ready(service.supervisor.server("b"), timeout=STARTING)

    async with sdk_client(service, "@coding", mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("b__echo", {"text": "in the profile"})
        with pytest.raises(MCPError) as excluded:
            await client.call_tool("b__crash", {})
        with pytest.raises(MCPError) as elsewhere:
            await client.call_tool("a__echo", {"text": "x"})

    assert "b__echo" in names and "b__whoami" in names
    assert not names & {"b__crash", "b__write_note", "a__echo"}
    assert text(echoed) == "in the profile"
    assert "not in profile 'coding'" in excluded.value.error.message
    assert "'*__crash'" in excluded.value.error.message
    assert "not in profile 'coding'" in elsewhere.value.error.message
    assert "its server 'a' is not one of the profile's servers" in elsewhere.value.error.message
    assert service.supervisor.server("b").state is ServerState.READY  # crash never reached it


async def test_an_unknown_profile_is_a_404_naming_the_configured_ones(services: Services) -> None:
    import httpx

    service = await services.start({}, profiles={})
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"{service.url}/mcp/@nope",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"authorization": f"Bearer {service.token}"},
        )
    assert reply.status_code == 404
    assert "no profile named 'nope'" in reply.json()["error"]["message"]


@BOTH_ERAS
async def test_a_member_killed_mid_call_is_respawned_and_the_call_retried_once(
    services: Services, tmp_path: Path, mode: str
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    service = await services.start(
        {"a": python_server(ECHO), "b": python_server(ECHO, ECHO_MARKER_DIR=str(markers))}
    )
    b = service.supervisor.server("b")
    await wait_ready(b, timeout=STARTING)
    await wait_ready(service.supervisor.server("a"), timeout=STARTING)
    first = b.pid

    async with sdk_client(service, "@all", mode) as client:
        call = asyncio.ensure_future(client.call_tool("b__slow_read", {"seconds": 1}))
        marker = markers / "slow_read.started"
        await wait_until(marker.exists, what="slow_read in flight")
        assert first is not None
        await kill_hard(first)
        result = await call
        other = await client.call_tool("a__echo", {"text": "unaffected"})

    assert not result.is_error, text(result)
    assert text(result) == "read after 1.0"
    # A respawn that missed its start deadline on a busy machine may be followed by another.
    assert b.generation >= 2 and b.pid != first
    assert text(other) == "unaffected"


@BOTH_ERAS
async def test_a_parked_member_answers_with_its_reason_while_the_others_keep_working(
    services: Services, mode: str
) -> None:
    service = await services.start(
        {"ghost": {"command": "mcp-tray-no-such-command"}, "echo": python_server(ECHO)}
    )
    ghost = service.supervisor.server("ghost")
    await wait_until(lambda: ghost.state is ServerState.PARKED, what="ghost parked")
    await wait_ready(service.supervisor.server("echo"), timeout=STARTING)

    async with sdk_client(service, "@all", mode) as client:
        parked = [await client.call_tool("ghost__anything", {}) for _ in range(3)]
        tripped = await client.call_tool("ghost__anything", {})
        working = await client.call_tool("echo__echo", {"text": "still here"})
        sessions = service.sessions.to_json()

    assert all(r.is_error and "is parked" in text(r) for r in parked), [text(r) for r in parked]
    # Three failures trip the client's session with ghost, not its session with echo.
    assert text(tripped).startswith("⚠️ This session has failed 3 times in a row")
    assert text(working) == "still here"
    by_server = {s["server"]: s for s in sessions}
    assert by_server["ghost"]["breaker"] == "tripped"
    assert by_server["echo"]["breaker"] != "tripped"
    assert by_server["ghost"]["via"] == by_server["echo"]["via"] == "@all"


@pytest.mark.parametrize("sharing", ["shared", "per-session"])
async def test_two_clients_of_the_aggregate_each_get_only_their_own_sampling_requests(
    services: Services, sharing: str
) -> None:
    service = await services.start(
        {"a": python_server(ECHO) | {"sharing": sharing}, "b": python_server(ECHO)}
    )
    await wait_ready(service.supervisor.server("a"), timeout=STARTING)
    asked: dict[str, list[str]] = {"one": [], "two": []}

    def sampler(name: str) -> Any:
        async def sample(context: Any, params: Any) -> CreateMessageResult:
            asked[name].append(params.messages[0].content.text)
            return CreateMessageResult(
                role="assistant", content=TextContent(type="text", text=f"{name} says"), model="m"
            )

        return sample

    async with (
        sdk_client(service, "@all", "legacy", sampling_callback=sampler("one")) as one,
        sdk_client(service, "@all", "legacy", sampling_callback=sampler("two")) as two,
    ):
        calls = (
            one.call_tool("a__ask", {"question": "from one"}),
            two.call_tool("a__ask", {"question": "from two"}),
        )
        if sharing == "per-session":  # a child each: both at once
            answers = list(await asyncio.gather(*calls))
        else:  # one child: a request is attributed while only its session calls
            answers = [await call for call in calls]
        children = sorted(service.supervisor.private)

    assert [text(a) for a in answers] == ["one says", "two says"]
    assert asked == {"one": ["from one"], "two": ["from two"]}
    # A legacy client that may be asked gets the "auto" entry's handshake-era twin.
    assert len(children) == (2 if sharing == "per-session" else 1), children


async def test_mcp_tray_sessions_names_the_aggregate_or_profile_of_each_member_session(
    services: Services,
) -> None:
    service = await services.start(
        {"a": python_server(ECHO), "b": python_server(ECHO)},
        profiles={"coding": {"servers": ["b"]}},
    )
    for name in ("a", "b"):
        await wait_ready(service.supervisor.server(name), timeout=STARTING)
    async with sdk_client(service, "@all") as every, sdk_client(service, "@coding") as coding:
        await every.call_tool("a__echo", {"text": "x"})
        await coding.call_tool("b__echo", {"text": "y"})
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
        env["MCP_TRAY_HOME"] = str(services.paths.state_dir.parent)
        listed = await asyncio.to_thread(run_mcp_tray, env, "sessions", "--json")
        table = await asyncio.to_thread(run_mcp_tray, env, "sessions")

    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted((row["server"], row["via"]) for row in rows) == [("a", "@all"), ("b", "@coding")]
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "CLIENT", "SERVER", "VIA"]
    assert sorted(line.split()[2:4] for line in lines[1:]) == [["a", "@all"], ["b", "@coding"]]


@BOTH_ERAS
async def test_a_members_tool_named_like_another_members_reaches_its_own_server_only(
    services: Services, mode: str
) -> None:
    # Issue 27: "fs" listing "remote__search_records_00" beside the server "remote".
    service = await services.start(
        {
            "fs": python_server(MANY_TOOLS, MANY_TOOLS="1", MANY_TOOLS_PREFIX="remote__"),
            "remote": python_server(MANY_TOOLS, MANY_TOOLS="1"),
        }
    )
    fs, remote = (service.supervisor.server(name) for name in ("fs", "remote"))
    await wait_ready(fs, timeout=STARTING)
    await wait_ready(remote, timeout=STARTING)

    async with sdk_client(service, "@all", mode) as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        await client.call_tool("remote__search_records_00", {"query": "real"})
        calls = (fs.calls, remote.calls)
        await client.call_tool("fs__remote__search_records_00", {"query": "impostor"})

    assert names == ["fs__remote__search_records_00", "remote__search_records_00"]
    assert calls == (0, 1)
    assert (fs.calls, remote.calls) == (1, 1)
    (everything,) = service.profiles()
    assert everything.renamed == ()
