"""The activity ring buffer behind the Servers tab's sparklines.

Strategy: an ActivityHistory on a FakeClock (buckets are read off the
clock, so a test moves time by hand and never sleeps), fed through the same
two hooks the supervisor calls (``observe`` and ``on_event``); one test
attaches it to a real supervisor running tests/servers/echo.py and counts
real calls.
"""

from typing import Any

from core.base.snapshot import Event, EventKind
from core.base.states import ServerState
from core.serving.observe.activity import ActivityHistory, Restart, Series, attach
from tests.app.builders import server
from tests.conftest import ECHO, ReadyFactory, python_server, wait_ready
from tests.support.fakes import FakeClock

#: Bucket boundaries are multiples of 10 s of the clock; start on one.
START = 1000.0


def history(clock: FakeClock, buckets: int = 6) -> ActivityHistory:
    return ActivityHistory(clock, bucket_seconds=10.0, buckets=buckets)


def state(name: str, generation: int, now: ServerState) -> Event:
    return Event(EventKind.STATE, name, server(name, now, generation=generation))


def test_calls_and_failures_land_in_the_bucket_of_their_time() -> None:
    clock = FakeClock(START)
    activity = history(clock)
    activity.observe("echo", "tools/call", 0.01, True)
    clock.advance(10)
    activity.observe("echo", "tools/call", 0.01, True)
    activity.observe("echo", "tools/call", 0.01, False)
    clock.advance(9.9)  # still in the same bucket

    series = activity.series("echo")

    assert series.calls == (0, 0, 0, 0, 1, 2)
    assert series.failures == (0, 0, 0, 0, 0, 1)
    assert (series.total_calls, series.total_failures) == (3, 1)
    assert series.window_seconds == 60


def test_buckets_older_than_the_window_fall_out_as_it_slides() -> None:
    clock = FakeClock(START)
    activity = history(clock)
    activity.record_call("echo", ok=False)
    clock.advance(50)
    assert activity.series("echo").calls == (1, 0, 0, 0, 0, 0)
    clock.advance(10)
    assert activity.series("echo").calls == (0,) * 6
    assert activity.series("echo").failures == (0,) * 6


def test_a_silence_longer_than_the_window_clears_every_bucket_before_new_calls_count() -> None:
    clock = FakeClock(START)
    activity = history(clock)
    for _ in range(5):
        activity.record_call("echo", ok=True)
        clock.advance(10)
    clock.advance(3600)
    activity.record_call("echo", ok=True)
    assert activity.series("echo").calls == (0, 0, 0, 0, 0, 1)


def test_an_unknown_server_reads_as_a_quiet_window() -> None:
    series = history(FakeClock(START)).series("nobody")
    assert series == Series(10.0, (0,) * 6, (0,) * 6)
    assert series.quiet


def test_an_idle_series_is_equal_from_one_second_to_the_next_and_changes_only_at_a_boundary() -> (
    None
):
    """Views compare series to decide a repaint: an idle row must compare equal."""
    clock = FakeClock(START)
    activity = history(clock)
    activity.record_call("echo", ok=True)
    before = activity.series("echo")
    clock.advance(9.5)
    assert activity.series("echo") == before
    clock.advance(0.5)
    assert activity.series("echo") != before


def test_a_new_generation_after_the_first_is_a_restart_marked_when_a_crash_caused_it() -> None:
    clock = FakeClock(START)
    activity = history(clock)
    activity.on_event(state("echo", 1, ServerState.STARTING))
    activity.on_event(state("echo", 1, ServerState.READY))
    activity.on_event(state("echo", 1, ServerState.DEGRADED))
    assert activity.series("echo").restarts == ()

    clock.advance(10)
    activity.on_event(state("echo", 1, ServerState.EXITED))
    activity.on_event(state("echo", 2, ServerState.STARTING))
    activity.on_event(state("echo", 2, ServerState.READY))
    clock.advance(20)
    # A person's respawn: straight from ready to a new generation.
    activity.on_event(state("echo", 3, ServerState.STARTING))

    assert activity.series("echo").restarts == (
        Restart(bucket=3, after_crash=True),
        Restart(bucket=5, after_crash=False),
    )
    assert "2 restarts (1 after a crash)" in activity.series("echo").summary()


def test_restart_marks_leave_the_window_with_their_bucket() -> None:
    clock = FakeClock(START)
    activity = history(clock)
    activity.on_event(state("echo", 4, ServerState.STARTING))
    assert activity.series("echo").restarts == (Restart(5, False),)
    clock.advance(50)
    assert activity.series("echo").restarts == (Restart(0, False),)
    clock.advance(10)
    assert activity.series("echo").restarts == ()


def test_events_of_other_kinds_and_without_a_snapshot_are_ignored() -> None:
    activity = history(FakeClock(START))
    activity.on_event(Event(EventKind.STDERR, "echo", text="hello"))
    activity.on_event(Event(EventKind.STATE, "echo"))
    activity.on_event(
        Event(EventKind.BREAKER, "echo", server("echo", ServerState.READY, generation=9))
    )
    assert activity.series("echo").quiet


def test_rings_quiet_for_a_whole_window_are_dropped_when_a_new_server_appears() -> None:
    """Per-session servers come and go: their history must not pile up."""
    clock = FakeClock(START)
    activity = history(clock)
    for i in range(20):
        activity.record_call(f"notes@{i:08d}", ok=True)
        clock.advance(60)
    assert len(activity._rings) <= 2
    assert activity.series("notes@00000000").quiet


def test_a_series_summary_reads_as_words() -> None:
    series = Series(10.0, (1, 0, 2), (0, 0, 1), (Restart(1, True),))
    assert series.summary() == "last 0.5 min: 3 calls, 1 failed, 1 restart (1 after a crash)"


async def test_attach_counts_real_calls_and_keeps_the_hook_already_set(
    start_ready: ReadyFactory,
) -> None:
    supervisor, echo = await start_ready("echo", python_server(ECHO))
    seen: list[tuple[str, bool]] = []

    def metrics(server: str, method: str, seconds: float, ok: bool) -> Any:
        seen.append((method, ok))

    supervisor.on_call_done = metrics
    activity = attach(supervisor)

    await supervisor.call_tool("echo", "echo", {"text": "hi"})
    await supervisor.call_tool("echo", "echo", {"text": "again"})
    await echo.respawn()
    await wait_ready(echo, generation=2)

    series = activity.series("echo")
    assert series.total_calls == 2 and series.total_failures == 0
    assert seen == [("tools/call", True), ("tools/call", True)]
    assert len(series.restarts) == 1 and not series.restarts[0].after_crash
