"""A kill storm: kill -9 again and again while several callers keep calling.

Strategy: one real echo server under a real Supervisor; four tasks call its
read-only ``echo`` tool in a loop while the test SIGKILLs the child three
times, each time only once every caller has been answered by the current
generation (so a retried call is never cut twice, which would rightly fail
it). Every call must be answered with its own text, each dead child
gone, and the server ready at the last generation. Runs under the
native and the portable backend sets (the bench with more load is
bench/killstorm.py).
"""

import asyncio
import functools

import pytest

from core.base.states import ServerState
from tests.conftest import (
    ECHO,
    ReadyFactory,
    kill_now,
    pid_of,
    process_gone,
    python_server,
    wait_ready,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("backend")

CALLERS = 4
KILLS = 3


async def test_every_read_only_call_is_answered_through_a_kill_storm(
    start_ready: ReadyFactory,
) -> None:
    supervisor, server = await start_ready("echo", python_server(ECHO))
    answered = [0] * CALLERS
    done = False

    async def caller(n: int) -> None:
        while not done:
            text = f"caller {n} call {answered[n]}"
            result = await supervisor.call_tool("echo", "echo", {"text": text})
            assert result["isError"] is False
            assert result["content"][0]["text"] == text
            answered[n] += 1

    def all_answered_since(before: list[int]) -> bool:
        return all(now > then for now, then in zip(answered, before, strict=True))

    tasks = [asyncio.create_task(caller(n)) for n in range(CALLERS)]
    killed: list[int] = []
    try:
        for generation in range(1, KILLS + 1):
            await wait_ready(server, generation=generation)
            before = list(answered)
            await wait_until(
                functools.partial(all_answered_since, before),
                what=f"every caller answered by generation {generation}",
            )
            killed.append(pid_of(server))
            kill_now(killed[-1])
        await wait_ready(server, generation=KILLS + 1)
        last = list(answered)
        await wait_until(
            lambda: all_answered_since(last), what="every caller answered by the last generation"
        )
    finally:
        done = True
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [r for r in results if r is not None] == []
    assert server.state is ServerState.READY
    assert all(process_gone(pid) for pid in killed)
