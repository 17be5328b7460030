"""The standby spare: one more child kept started and handshaken, which takes over when
the active one dies.

Strategy: a real Supervisor runs tests/servers/echo.py (its slow tools leave a
marker holding their pid; ``write_note`` appends to a file, so the file counts
its calls) and tests/servers/slow_modern.py (seconds to start) with
``"standby": true``; the active child is killed with a real kill -9 and the
test looks at which pid answers next and how often a tool ran. The spare must
be the child that answers, in either era of the child's session and of the
client's (a real SDK client through the gateway); a call waiting at the kill
is answered once, a non-idempotent call cut by the death is answered once and
never replayed, the spare's own start and handshake are behind it, only a
spare whose session is ready takes over, and a new one follows each take-over.
"""

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.base.errors import ConfigError, ExitedMidCall
from core.base.snapshot import Event, EventKind
from core.base.states import ServerState
from core.settings.config import load_config
from core.supervision.idle import IdleWatch
from core.supervision.routing import NO_CALLER, Routing
from core.supervision.server import ManagedServer
from tests.conftest import (
    ECHO,
    SERVERS,
    ReadyFactory,
    kill_hard,
    pid_of,
    process_gone,
    python_server,
    wait_ready,
    wait_until,
)
from tests.support.fakes import FakeClock
from tests.support.gateway_support import Services, sdk_client, text

SLOW_MODERN = SERVERS / "slow_modern.py"


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def spare_pid(server: ManagedServer) -> int:
    """The pid of the spare once its session is ready (handshaken, tools listed)."""
    standby = server.runloop.standby
    await wait_until(lambda: standby.ready, what="the spare's session to be ready")
    assert standby.spare is not None and standby.spare.handshake is not None
    assert "whoami" in standby.spare.learnt.tools or "hello" in standby.spare.learnt.tools
    assert standby.spare.pid is not None
    return standby.spare.pid


def notes(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_on_kill_9_the_spare_answers_the_next_call_and_a_new_spare_starts(
    start_ready: ReadyFactory,
) -> None:
    supervisor, server = await start_ready("echo", {**python_server(ECHO), "standby": True})
    active = pid_of(server)
    spare = await spare_pid(server)
    assert spare != active

    await kill_hard(active)
    result = await supervisor.call_tool("echo", "whoami", {})

    assert int(text_of(result)) == spare
    assert server.generation == 2
    next_spare = await spare_pid(server)
    assert next_spare not in (active, spare)


async def test_a_non_idempotent_call_cut_by_kill_9_is_answered_once_and_never_replayed(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    entry = {**python_server(ECHO, ECHO_MARKER_DIR=str(tmp_path)), "standby": True}
    supervisor, server = await start_ready("echo", entry)
    active = pid_of(server)
    spare = await spare_pid(server)
    call = asyncio.ensure_future(supervisor.call_tool("echo", "slow_write", {"seconds": 5}))
    marker = tmp_path / "slow_write.started"
    await wait_until(marker.exists, what="slow_write to start")
    marker.unlink()

    await kill_hard(active)
    with pytest.raises(ExitedMidCall) as caught:
        await asyncio.wait_for(call, 10)

    assert "may or may not have taken effect" in str(caught.value)
    await wait_ready(server, generation=2)
    assert pid_of(server) == spare
    # Not replayed on the spare: the tool ran once, in the child that died.
    assert not marker.exists()


async def test_a_read_only_call_cut_by_kill_9_is_replayed_once_on_the_spare(
    start_ready: ReadyFactory, tmp_path: Path
) -> None:
    entry = {**python_server(ECHO, ECHO_MARKER_DIR=str(tmp_path)), "standby": True}
    supervisor, server = await start_ready("echo", entry)
    active = pid_of(server)
    spare = await spare_pid(server)
    call = asyncio.ensure_future(supervisor.call_tool("echo", "slow_read", {"seconds": 0.2}))
    marker = tmp_path / "slow_read.started"
    await wait_until(marker.exists, what="slow_read to start")
    marker.unlink()

    await kill_hard(active)
    result = await asyncio.wait_for(call, 10)

    assert text_of(result) == "read after 0.2"
    assert marker.read_text() == str(spare)
    assert server.respawn_requests == 1


async def test_a_slow_starting_server_is_answered_after_kill_9_without_its_start_again(
    start_ready: ReadyFactory,
) -> None:
    # Its one tool has no safety hints: a call racing the kill may be replayed.
    entry = {
        **python_server(SLOW_MODERN, SLOW_START_SECONDS="3"),
        "standby": True,
        "retry": "always",
    }
    supervisor, server = await start_ready("slow", entry)
    active = pid_of(server)
    await spare_pid(server)
    # Past its own start: it said so on stderr (kept in the server's log).
    await wait_until(
        lambda: "[standby] slow_modern: serving" in server.log_path.read_text(),
        what="the spare past its start",
    )

    await kill_hard(active)
    loop = asyncio.get_running_loop()
    began = loop.time()
    result = await supervisor.call_tool("slow", "hello", {})
    took = loop.time() - began

    assert text_of(result) == "hello from a slow start"
    # Its own start takes 3 s; the spare had it behind it.
    assert took < 3.0


async def test_stopping_the_server_ends_its_spare_too(start_ready: ReadyFactory) -> None:
    supervisor, server = await start_ready("echo", {**python_server(ECHO), "standby": True})
    spare = await spare_pid(server)

    await supervisor.stop_server("echo")

    assert process_gone(spare)
    assert server.runloop.standby.spare is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["auto", "handshake"])
async def test_calls_waiting_at_kill_9_go_to_the_spare_and_each_runs_exactly_once(
    start_ready: ReadyFactory, tmp_path: Path, protocol: str
) -> None:
    # "auto": echo answers server/discover (2026-07-28); "handshake": initialize.
    notes_file = tmp_path / "notes.txt"
    entry = {
        **python_server(ECHO, ECHO_NOTES_FILE=str(notes_file)),
        "standby": True,
        "protocol": protocol,
    }
    supervisor, server = await start_ready("echo", entry)
    active = pid_of(server)
    spare = await spare_pid(server)
    era = server.catalog.version

    calls: list[asyncio.Future[dict[str, Any]]] = []

    def on_event(event: Event) -> None:
        # Made the moment the death is known, before the run loop can take the spare:
        # each finds the child dead (the pre-call gate) and waits for the fresh session.
        snapshot = event.snapshot
        if event.kind is EventKind.STATE and snapshot and snapshot.state is ServerState.EXITED:
            calls.extend(
                asyncio.ensure_future(
                    supervisor.call_tool("echo", "write_note", {"text": f"note {i}"})
                )
                for i in range(3)
            )

    supervisor.subscribe(on_event)
    await kill_hard(active)
    await wait_until(lambda: calls, what="the death to be seen")
    answers = await asyncio.wait_for(asyncio.gather(*calls), 15)

    assert [text_of(answer) for answer in answers] == ["noted"] * 3
    # write_note is not safe to repeat: each ran once, all on the spare.
    assert sorted(notes(notes_file)) == ["note 0", "note 1", "note 2"]
    assert (pid_of(server), server.generation) == (spare, 2)
    assert server.catalog.version == era
    assert server.respawn_requests == 3  # one per waiting call, all met by the take-over
    assert f"standby: spare pid {spare} takes over" in server.log_path.read_text()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_of_either_era_is_answered_by_the_spare_after_kill_9(
    services: Services, tmp_path: Path, mode: str
) -> None:
    # "auto": the SDK client speaks 2026-07-28 to the gateway; "legacy": initialize (2025).
    notes_file = tmp_path / "notes.txt"
    entry = {**python_server(ECHO, ECHO_NOTES_FILE=str(notes_file)), "standby": True}
    service = await services.start({"echo": entry})
    server = service.supervisor.server("echo")
    await wait_ready(server)
    spare = await spare_pid(server)
    async with sdk_client(service, "echo", mode) as client:
        active = int(text(await client.call_tool("whoami", {})))
        assert active == pid_of(server)

        await kill_hard(active)
        # Past the take-over: a call racing the kill could find the dead child not yet
        # reaped and be cut, which is the mid-call rule's business, not this test's.
        await wait_ready(server, generation=2)
        noted = await asyncio.wait_for(client.call_tool("write_note", {"text": mode}), 15)
        answered_by = int(text(await client.call_tool("whoami", {})))

    assert text(noted) == "noted"
    assert notes(notes_file) == [mode]
    assert answered_by == spare
    assert server.generation == 2


@pytest.mark.timeout(60)
async def test_after_each_take_over_a_new_spare_starts_and_takes_the_next_kill(
    start_ready: ReadyFactory,
) -> None:
    supervisor, server = await start_ready("echo", {**python_server(ECHO), "standby": True})
    seen = [pid_of(server)]
    for generation in (2, 3):
        spare = await spare_pid(server)
        assert spare not in seen
        await kill_hard(seen[-1])
        answered_by = int(text_of(await supervisor.call_tool("echo", "whoami", {})))
        assert (answered_by, server.generation) == (spare, generation)
        seen.append(spare)

    assert await spare_pid(server) not in seen


@pytest.mark.timeout(60)
async def test_a_spare_still_in_its_own_start_is_not_handed_over(
    start_ready: ReadyFactory,
) -> None:
    entry = {**python_server(SLOW_MODERN, SLOW_START_SECONDS="1.5"), "standby": True}
    _supervisor, server = await start_ready("slow", entry)
    active = pid_of(server)
    standby = server.runloop.standby
    log = server.log_path
    starting = await wait_until(
        lambda: next(
            (
                int(line.split("spare pid ")[1].split()[0])
                for line in log.read_text().splitlines()
                if "standby: spare pid" in line and line.endswith("started")
            ),
            None,
        ),
        what="the spare to be spawned",
    )
    assert not standby.ready  # it sleeps 1.5 s before it reads its stdin

    await kill_hard(active)
    await wait_ready(server, generation=2, timeout=20)

    # The active child is a fresh one; the one on its way became the spare, once ready.
    assert pid_of(server) not in (active, starting)
    assert await spare_pid(server) == starting
    assert "takes over" not in log.read_text()


@pytest.mark.parametrize("sharing", ["per-session", "per-workspace"])
def test_standby_on_an_entry_made_per_session_or_workspace_is_a_config_error(
    tmp_path: Path, sharing: str
) -> None:
    path = tmp_path / "config.json"
    entry = {"command": "x", "sharing": sharing, "standby": True}
    path.write_text(json.dumps({"mcpServers": {"a": entry}}, indent=1))

    with pytest.raises(ConfigError) as caught:
        load_config(path)

    error, said = caught.value, str(caught.value)
    assert (error.file, error.key) == (str(path), "mcpServers.a.standby")
    assert said.startswith(f"{path}:{error.line}: mcpServers.a.standby: ")
    assert error.line is not None and '"standby"' in path.read_text().splitlines()[error.line - 1]
    assert f'a "{sharing}" entry takes no standby' in said
    assert 'Fix: remove "standby", or use it on a stateless "shared" server' in said


async def test_a_new_spare_waits_for_the_calls_in_flight_then_starts(fake_clock: FakeClock) -> None:
    # Its start would compete with their answers for the CPU (bench/recovery.py --standby).
    routing = Routing("echo")
    idle = IdleWatch(fake_clock, routing)
    first, second = routing.open_call(NO_CALLER), routing.open_call(NO_CALLER)
    waiting = asyncio.ensure_future(idle.until_no_call())
    await asyncio.sleep(0)  # it waits now

    routing.close_call(first)
    for _ in range(5):  # let it look again: one call is still in flight
        await asyncio.sleep(0)
    assert not waiting.done()
    routing.close_call(second)

    await asyncio.wait_for(waiting, 5)
