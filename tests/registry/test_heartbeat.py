"""The heartbeat interval policy and supervisor (core/registry/heartbeat.py).

Strategy: the supervisor runs against a real registry file under
``tmp_path``; ``beat_once`` is driven by hand on a ``FakeWallClock`` so TTLs
of 900 s pass in microseconds and nothing sleeps to reach one. Transient
failures are real: another connection holds the sqlite write lock past a
short busy timeout. The real thread runs on a ``ManualTicker``
(tests/support/registry_support.py): each interval passes when the test ticks, so
no test waits for one. One test times a stop on the real ``EventTicker``,
and one runs a child interpreter to see the atexit stop happen.
"""

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from core.registry.heartbeat import (
    HeartbeatTarget,
    WorkerHeartbeatSupervisor,
    heartbeat_interval_for,
    heartbeat_settings,
)
from core.registry.identity import worker_identity
from core.registry.records import (
    BLOCKER_FENCED,
    BLOCKER_NO_ATTACHMENT,
    DEFAULT_HEARTBEAT_TTL_SECONDS,
    OWNED,
    UNOWNED,
    HeartbeatOutcome,
    Registration,
)
from core.registry.store import WorkerRegistry
from tests.support import paths
from tests.support.fakes import FakeWallClock
from tests.support.registry_support import (
    TTL,
    ManualTicker,
    alive,
    attach,
    impatient_registry,
    write_lock_held,
)

REPO = paths.REPO


@pytest.fixture
def clock() -> FakeWallClock:
    return FakeWallClock()


@pytest.fixture
def registry(tmp_path: Path, clock: FakeWallClock) -> Iterator[WorkerRegistry]:
    with WorkerRegistry(tmp_path / "registry.sqlite", wall_clock=clock) as opened:
        yield opened


@pytest.fixture
def registration(registry: WorkerRegistry, clock: FakeWallClock) -> Registration:
    """One synthetic worker, registered at the clock's start."""
    return attach(registry, clock)


def supervise(
    registry: HeartbeatTarget,
    registration: Registration,
    clock: Callable[[], datetime],
    *,
    interval: object = None,
    ticker: ManualTicker | None = None,
) -> WorkerHeartbeatSupervisor:
    """A supervisor that expects exactly what ``registration`` recorded."""
    record = registration.record
    return WorkerHeartbeatSupervisor(
        registry,
        worker_identity=registration.worker_identity,
        fencing_epoch=registration.fencing_epoch,
        ttl_seconds=record.heartbeat_ttl_seconds,
        session_id=record.session_id,
        generation_id=record.generation_id,
        client_name=record.client_name,
        pid=record.pid,
        interval_seconds=interval,
        wall_clock=clock,
        ticker=ticker,
        stop_at_exit=False,
    )


def beat_after(
    supervisor: WorkerHeartbeatSupervisor, clock: FakeWallClock, seconds: float
) -> HeartbeatOutcome:
    """``seconds`` pass on the clock, then the supervisor beats once."""
    clock.advance(seconds)
    return supervisor.beat_once()


def owned(registry: WorkerRegistry, registration: Registration) -> str:
    return registry.assess_ownership(
        registration.record.session_id,
        worker_identity=registration.worker_identity,
        fencing_epoch=registration.fencing_epoch,
        pid_probe=alive,
    ).ownership


# --- interval policy --------------------------------------------------------------


def test_the_default_interval_is_a_third_of_the_ttl() -> None:
    assert heartbeat_interval_for(900.0) == pytest.approx(300.0)


def test_an_override_above_half_the_ttl_is_capped_at_half() -> None:
    assert heartbeat_interval_for(900.0, 5000) == pytest.approx(450.0)
    assert heartbeat_interval_for(900.0, "450.5") == pytest.approx(450.0)


def test_an_override_below_the_cap_is_honoured_as_number_or_text() -> None:
    assert heartbeat_interval_for(900.0, 120) == pytest.approx(120.0)
    assert heartbeat_interval_for(900.0, " 120.5 ") == pytest.approx(120.5)


@pytest.mark.parametrize("bad", ["", "abc", "0", "-5", None, -1.0, 0, "nan", "inf", True, [3]])
def test_an_unparsable_zero_or_negative_override_falls_back_to_a_third(bad: object) -> None:
    assert heartbeat_interval_for(900.0, bad) == pytest.approx(300.0)


@pytest.mark.parametrize("ttl", [0.003, 1.0, 30.0, 900.0, 14400.0])
@pytest.mark.parametrize("override", [None, 1e9, "1e9"])
def test_the_interval_is_always_strictly_below_the_ttl(ttl: float, override: object) -> None:
    assert 0 < heartbeat_interval_for(ttl, override) < ttl


@pytest.mark.parametrize("ttl", [0.0, -1.0, float("nan")])
def test_a_ttl_that_is_not_positive_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl_seconds"):
        heartbeat_interval_for(ttl)


def test_settings_come_from_the_environment_and_bad_values_fall_back() -> None:
    set_both = heartbeat_settings(
        {"MCP_TRAY_HEARTBEAT_TTL": "90", "MCP_TRAY_HEARTBEAT_INTERVAL": "10"}
    )
    assert (set_both.ttl_seconds, set_both.interval_seconds) == (90.0, 10.0)
    garbage = heartbeat_settings({"MCP_TRAY_HEARTBEAT_TTL": "soon"})
    assert garbage.ttl_seconds == DEFAULT_HEARTBEAT_TTL_SECONDS
    assert garbage.interval_seconds == pytest.approx(DEFAULT_HEARTBEAT_TTL_SECONDS / 3)


# --- a healthy worker stays owned ------------------------------------------------


def test_an_unsupervised_worker_goes_unowned_right_after_its_ttl(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    record = registration.record
    assert record.started_at == record.last_heartbeat_at
    clock.advance(TTL)
    assert owned(registry, registration) == OWNED
    clock.advance(1)
    assessment = registry.assess_ownership(
        "sess-0001", worker_identity=registration.worker_identity, pid_probe=alive
    )
    assert assessment.ownership == UNOWNED
    assert assessment.blocker_kind == BLOCKER_NO_ATTACHMENT


def test_a_supervised_worker_stays_owned_past_two_full_ttls(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock)
    elapsed = 0.0
    while elapsed <= 2 * TTL + supervisor.interval_seconds:
        clock.advance(supervisor.interval_seconds)
        elapsed += supervisor.interval_seconds
        outcome = supervisor.beat_once()
        assert outcome.renewed, outcome.reasons
        assert owned(registry, registration) == OWNED, f"lost after {elapsed:.0f}s"
    assert elapsed > 2 * TTL


def test_the_last_heartbeat_advances_and_diverges_from_started_at(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock)
    beat_after(supervisor, clock, 300)
    after = registry.get(registration.worker_identity)
    assert after is not None
    assert after.started_at == registration.record.started_at
    assert after.last_heartbeat_at == clock.now
    assert after.last_heartbeat_at > after.started_at


def test_repeated_beats_create_no_further_rows(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock)
    for _ in range(5):
        assert beat_after(supervisor, clock, 300).renewed
    [row] = registry.list_workers()
    assert row.worker_identity == registration.worker_identity
    assert row.beats == 5
    assert supervisor.status().beats_renewed == 5


# --- refusals stop the supervisor for good ----------------------------------------


def test_a_fenced_supervisor_stops_permanently_and_never_beats_again(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock)
    registry.claim_generation(registration.worker_identity)
    first = beat_after(supervisor, clock, 300)
    assert not first.renewed
    assert first.blocker_kind == BLOCKER_FENCED
    reason = supervisor.stopped_reason
    assert reason is not None
    assert reason.startswith(BLOCKER_FENCED)
    assert "fencing_epoch" in reason
    second = supervisor.beat_once()
    assert not second.renewed
    assert not second.beat_attempted
    status = supervisor.status()
    assert status.beats_attempted == 1
    assert status.stopped_reason == reason
    assert not supervisor.start().started


def test_a_supervisor_whose_expectations_drift_is_fenced_with_the_drift_named(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = WorkerHeartbeatSupervisor(
        registry,
        worker_identity=registration.worker_identity,
        fencing_epoch=registration.fencing_epoch,
        ttl_seconds=TTL,
        session_id="sess-impostor",
        wall_clock=clock,
        stop_at_exit=False,
    )
    outcome = supervisor.beat_once()
    assert outcome.blocker_kind == BLOCKER_FENCED
    assert [d.field for d in outcome.expectation_drift] == ["session_id"]
    assert "session_id" in (supervisor.stopped_reason or "")


def test_a_missing_row_stops_the_supervisor(registry: WorkerRegistry, clock: FakeWallClock) -> None:
    supervisor = WorkerHeartbeatSupervisor(
        registry,
        worker_identity=worker_identity("codex", "sess-gone", clock.now),
        fencing_epoch=1,
        ttl_seconds=TTL,
        wall_clock=clock,
        stop_at_exit=False,
    )
    outcome = supervisor.beat_once()
    assert outcome.blocker_kind == BLOCKER_NO_ATTACHMENT
    assert (supervisor.stopped_reason or "").startswith(BLOCKER_NO_ATTACHMENT)
    assert not supervisor.beat_once().beat_attempted


# --- stopping and expiry ------------------------------------------------------------


def test_stop_ends_the_heartbeat(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock)
    assert beat_after(supervisor, clock, 300).renewed
    supervisor.stop("orderly shutdown")
    assert not supervisor.status().running
    assert supervisor.stopped_reason == "orderly shutdown"
    after = beat_after(supervisor, clock, 300)
    assert not after.renewed
    assert not after.beat_attempted
    assert "orderly shutdown" in after.reasons[0]


def test_stop_is_idempotent_and_keeps_the_first_reason(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    supervisor = supervise(registry, attach(registry, clock), clock)
    supervisor.stop("orderly shutdown")
    supervisor.stop("second call")
    assert supervisor.stopped_reason == "orderly shutdown"


def test_a_stopped_worker_goes_unowned_once_the_ttl_elapses(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock)
    beat_after(supervisor, clock, 300)
    supervisor.stop("orderly shutdown")
    clock.advance(TTL + 1)
    record = registry.get(registration.worker_identity)
    assert record is not None
    state = registry.is_live(record, pid_alive=True)
    assert not state.live
    assert state.heartbeat_age_seconds > TTL
    assert owned(registry, registration) == UNOWNED


def test_one_expiring_worker_leaves_a_supervised_one_live(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    healthy = attach(registry, clock, session="sess-live")
    abandoned = attach(registry, clock, client="gemini", session="sess-dead")
    supervisor = supervise(registry, healthy, clock)
    elapsed = 0.0
    while elapsed < TTL + 300:
        clock.advance(supervisor.interval_seconds)
        elapsed += supervisor.interval_seconds
        assert supervisor.beat_once().renewed
    assert owned(registry, healthy) == OWNED
    assert owned(registry, abandoned) == UNOWNED


# --- transient failures and status ---------------------------------------------------


def test_a_transient_database_lock_is_counted_and_beating_continues(
    tmp_path: Path, clock: FakeWallClock
) -> None:
    path = tmp_path / "registry.sqlite"
    with impatient_registry(path, clock) as (registry, registration):
        supervisor = supervise(registry, registration, clock)
        with write_lock_held(path):
            first = beat_after(supervisor, clock, 300)
        assert not first.renewed
        assert first.transient
        assert first.beat_attempted
        assert "database is locked" in first.reasons[0]
        assert supervisor.stopped_reason is None
        second = beat_after(supervisor, clock, 300)
        assert second.renewed, second.reasons
        status = supervisor.status()
    assert (status.beats_attempted, status.beats_renewed, status.transient_failures) == (2, 1, 1)
    assert status.supervised


class Flaky:
    """A registry whose first heartbeat raises something unexpected."""

    def __init__(self, registry: WorkerRegistry) -> None:
        self.registry = registry
        self.calls = 0

    def heartbeat(self, worker_identity: str, fencing_epoch: int, **kw: object) -> HeartbeatOutcome:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("disk hiccup")
        return self.registry.heartbeat(worker_identity, fencing_epoch, **kw)  # type: ignore[arg-type]


def test_any_other_exception_from_the_registry_is_transient_too(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(Flaky(registry), registration, clock)
    assert supervisor.beat_once().transient
    assert supervisor.beat_once().renewed
    assert supervisor.status().transient_failures == 1


def test_the_status_of_an_unstarted_supervisor_is_honest(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    status = supervise(registry, registration, clock).status()
    assert status.supervised
    assert not status.started
    assert not status.running
    assert (status.beats_attempted, status.beats_renewed, status.transient_failures) == (0, 0, 0)
    assert status.stopped_reason is None
    assert status.worker_identity == registration.worker_identity
    assert status.ttl_seconds == TTL
    assert status.interval_seconds == pytest.approx(TTL / 3)


# --- the real thread -------------------------------------------------------------


def test_the_thread_beats_once_per_interval_that_passes(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    ticker = ManualTicker()
    supervisor = supervise(registry, registration, clock, ticker=ticker)
    try:
        started = supervisor.start()
        assert started.started and not started.already_running
        assert supervisor.status().running
        for beat in range(1, 4):
            clock.advance(supervisor.interval_seconds)
            ticker.tick()
            record = registry.get(registration.worker_identity)
            assert record is not None
            assert (record.beats, record.last_heartbeat_at) == (beat, clock.now)
        assert supervisor.status().beats_renewed == 3
    finally:
        supervisor.stop("test teardown")
    status = supervisor.status()
    assert status.started and not status.running
    assert supervisor._thread is not None and not supervisor._thread.is_alive()


def test_stop_interrupts_a_long_interval_at_once(tmp_path: Path) -> None:
    with WorkerRegistry(tmp_path / "registry.sqlite") as registry:
        registration = registry.register(
            worker_identity="zed:thread",
            client_name="zed",
            session_id="sess-thread",
            role="bridge",
            heartbeat_ttl_seconds=TTL,
        )
        # The real EventTicker, mid-way through a 300 s wait.
        supervisor = supervise(registry, registration, registry.wall_clock)
        supervisor.start()
        assert supervisor.status().running
        began = time.monotonic()
        supervisor.stop("test teardown")
        stopped_in = time.monotonic() - began
    # Stop sets the Event the thread waits on: no interval is waited out.
    assert stopped_in < 1.0
    assert supervisor._thread is not None and not supervisor._thread.is_alive()
    assert supervisor.status().beats_attempted == 0


def test_start_is_idempotent_and_refused_after_a_stop(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    supervisor = supervise(registry, registration, clock, ticker=ManualTicker())
    try:
        first = supervisor.start()
        second = supervisor.start()
        assert (first.started, first.already_running) == (True, False)
        assert (second.started, second.already_running) == (True, True)
    finally:
        supervisor.stop("orderly shutdown")
    refused = supervisor.start()
    assert not refused.started
    assert "orderly shutdown" in (refused.reason or "")


def test_the_thread_stops_itself_when_its_worker_is_fenced(
    registry: WorkerRegistry, clock: FakeWallClock, registration: Registration
) -> None:
    ticker = ManualTicker()
    refusals: list[HeartbeatOutcome] = []
    supervisor = supervise(registry, registration, clock, ticker=ticker)
    supervisor.on_refused = refusals.append
    supervisor.start()
    try:
        registry.claim_generation(registration.worker_identity)
        clock.advance(supervisor.interval_seconds)
        ticker.tick()
        assert supervisor._thread is not None
        supervisor._thread.join(10)
        assert not supervisor._thread.is_alive()
        assert not supervisor.status().running
    finally:
        supervisor.stop("test teardown")
    assert (supervisor.stopped_reason or "").startswith(BLOCKER_FENCED)
    assert [r.blocker_kind for r in refusals] == [BLOCKER_FENCED]


def test_a_started_supervisor_is_stopped_at_interpreter_exit(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import atexit
        from core.registry.heartbeat import WorkerHeartbeatSupervisor
        from core.registry.store import WorkerRegistry

        registry = WorkerRegistry({str(tmp_path / "registry.sqlite")!r})
        registration = registry.register(
            worker_identity="zed:exit", client_name="zed", session_id="s", role="bridge"
        )
        supervisor = WorkerHeartbeatSupervisor(
            registry,
            worker_identity=registration.worker_identity,
            fencing_epoch=registration.fencing_epoch,
            ttl_seconds=registration.record.heartbeat_ttl_seconds,
        )
        # atexit runs last-in first-out: this report runs after the stop.
        atexit.register(lambda: print("stopped:", supervisor.stopped_reason))
        supervisor.start()
        atexit.register(lambda: print("running:", supervisor.status().running))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert result.stdout.splitlines() == ["running: True", "stopped: process exiting"]
