"""Opens take turns (core.protocol.turns): one waiter per turn of the loop, in arrival order.

Strategy: a real event loop; a ticker callback that re-schedules itself
counts the loop's turns, and each waiter notes the turn it was let through
in, so "one per turn" and "what was ready meanwhile went first" are seen
directly, with no clock and no sleeps.
"""

import asyncio
import itertools

from core.protocol.turns import LoopTurns


class Ticker:
    """Counts turns of the running loop until stopped."""

    def __init__(self) -> None:
        self.turn = 0
        self._running = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.turn += 1
        if self._running:
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._running = False


async def test_waiters_go_through_one_per_turn_in_the_order_they_came() -> None:
    turns, ticker = LoopTurns(), Ticker()
    let_through: list[tuple[str, int]] = []

    async def opener(name: str) -> None:
        await turns.wait()
        let_through.append((name, ticker.turn))

    await asyncio.gather(*(opener(name) for name in "abcd"))
    ticker.stop()
    assert [name for name, _ in let_through] == list("abcd")
    seen = [turn for _, turn in let_through]
    assert all(later > earlier for earlier, later in itertools.pairwise(seen))


async def test_what_became_ready_meanwhile_runs_before_the_next_waiter() -> None:
    turns = LoopTurns()
    order: list[str] = []

    async def opener(name: str) -> None:
        await turns.wait()
        order.append(name)

    async def call() -> None:
        order.append("call")

    openers = [asyncio.ensure_future(opener(name)) for name in ("open 1", "open 2", "open 3")]
    await asyncio.sleep(0)  # the openers are waiting now
    await asyncio.ensure_future(call())
    await asyncio.gather(*openers)
    # The call came after every open but did not wait for all of them.
    assert order.index("call") < order.index("open 3")
    assert [o for o in order if o != "call"] == ["open 1", "open 2", "open 3"]


async def test_a_waiter_cancelled_before_its_turn_gives_it_up() -> None:
    turns = LoopTurns()
    done: list[str] = []

    async def opener(name: str) -> None:
        await turns.wait()
        done.append(name)

    first, second, third = (asyncio.ensure_future(opener(n)) for n in ("1", "2", "3"))
    await asyncio.sleep(0)
    second.cancel()
    await asyncio.wait_for(asyncio.gather(first, third), 5)
    assert done == ["1", "3"]
    assert second.cancelled()
    # Nothing left waiting: a later waiter goes through at once.
    await asyncio.wait_for(turns.wait(), 5)
