"""The worker watch keeps its copy of the registry incrementally
(core/registry/worker_watch.py, registry_copy.py): opening a session costs the
same with many sessions open as with one, and the timer reads the file only
when someone else wrote to it.

Strategy: a WorkerWatch on a real registry file, fed the gateway's own
``ClientSession`` objects: HTTP sessions, whose rows the watch registers
itself, and bridge sessions naming a row another connection registered, as a
bridge process does. Work is counted, never timed, through two seams: the
registry is a ``WorkerRegistry`` that counts the rows its reads hand back,
and the pid probe, asked once per row or claim judged, counts judgements.
Time moves by hand: a ``FakeWallClock`` for row ages, a ``FakeClock`` for
the watch's timers. One test runs the whole path instead: a real TrayService,
SDK clients over streamable HTTP, a real echo child.
"""

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.base.snapshot import Event, EventKind
from core.registry.identity import worker_identity
from core.registry.records import ROLE_BRIDGE, WorkerRecord
from core.registry.store import WorkerRegistry
from core.registry.worker_watch import (
    ROWS_MIN_INTERVAL_SECONDS,
    ROWS_REJUDGE_SECONDS,
    WorkerWatch,
)
from core.serving.sessions.sessions import ClientSession
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.support.fakes import FakeClock, FakeWallClock
from tests.support.gateway_support import Services, http_client


class CountingRegistry(WorkerRegistry):
    """A real registry that counts the rows its reads hand back."""

    rows_read = 0

    def list_workers(self, *, session_id: str | None = None) -> tuple[WorkerRecord, ...]:
        found = super().list_workers(session_id=session_id)
        self.rows_read += len(found)
        return found

    def get(self, worker_identity: str) -> WorkerRecord | None:
        found = super().get(worker_identity)
        self.rows_read += found is not None
        return found


class Judgements:
    """A pid probe that says every pid runs, and counts how often it was asked."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _pid: int) -> bool:
        self.count += 1
        return True


@dataclass
class Rig:
    watch: WorkerWatch
    registry: CountingRegistry
    judgements: Judgements
    wall: FakeWallClock
    clock: FakeClock
    events: list[Event]

    def cost(self) -> tuple[int, int]:
        return self.registry.rows_read, self.judgements.count

    async def open_http(self, count: int) -> list[ClientSession]:
        sessions = [
            ClientSession(id=f"http-{uuid.uuid4().hex}", server="echo", kind="http")
            for _ in range(count)
        ]
        for session in sessions:
            self.watch.session_opened(session)
        await self.watch.settled()
        return sessions

    def bridge(self, session_id: str) -> ClientSession:
        """A bridge process registers its row; the gateway then sees its session."""
        with WorkerRegistry(self.registry.path, wall_clock=self.wall) as other:
            row = other.register(
                worker_identity=worker_identity("cursor", session_id, self.wall()),
                client_name="cursor",
                session_id=f"client-{session_id}",
                role=ROLE_BRIDGE,
                server="echo",
                pid=os.getppid(),
                heartbeat_ttl_seconds=60,
            )
        session = ClientSession(
            id=session_id, server="echo", kind="bridge", worker_identity=row.worker_identity
        )
        self.watch.session_opened(session)
        return session

    def statuses(self) -> dict[str, str]:
        return {k: v.status for k, v in self.watch.session_ownership.items()}


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    wall, clock, judgements = FakeWallClock(), FakeClock(), Judgements()
    events: list[Event] = []
    registry = CountingRegistry(tmp_path / "registry.sqlite", wall_clock=wall)
    watch = WorkerWatch(
        registry, events.append, servers_env=dict, pid_probe=judgements, clock=clock
    )
    try:
        yield Rig(watch, registry, judgements, wall, clock, events)
    finally:
        await watch.aclose()


def spent(before: tuple[int, int], after: tuple[int, int]) -> tuple[int, int]:
    return after[0] - before[0], after[1] - before[1]


async def test_opening_a_session_reads_no_row_and_judges_only_its_own_however_many_are_open(
    rig: Rig,
) -> None:
    await rig.watch.refresh()
    before = rig.cost()
    await rig.open_http(1)
    first = spent(before, rig.cost())

    await rig.open_http(60)
    before = rig.cost()
    [latest] = await rig.open_http(1)
    last = spent(before, rig.cost())

    rows_read, judged = last
    assert last == first
    assert rows_read == 0
    assert 1 <= judged <= 2  # its row, and its claim on that row
    assert rig.statuses()[latest.id] == "owned"
    assert latest.worker_identity in [row["worker_identity"] for row in rig.watch.rows]
    assert len(rig.watch.rows) == 62


async def test_the_timer_reads_nothing_after_the_trays_own_writes_and_every_row_once_after_anothers(
    rig: Rig,
) -> None:
    await rig.watch.refresh()
    await rig.open_http(20)
    rig.wall.advance(30)
    await rig.watch.beat()
    rig.clock.advance(ROWS_MIN_INTERVAL_SECONDS)
    before = rig.cost()
    await rig.watch.refresh(force=False)
    assert spent(before, rig.cost())[0] == 0

    bridge = rig.bridge("gw-bridge")
    rig.clock.advance(ROWS_MIN_INTERVAL_SECONDS)
    before = rig.cost()
    await rig.watch.refresh(force=False)

    assert spent(before, rig.cost())[0] == 21 == len(rig.watch.rows)
    assert rig.statuses()[bridge.id] == "owned"


async def test_a_bridge_session_waits_for_the_read_that_brings_its_row_rather_than_flip(
    rig: Rig,
) -> None:
    await rig.watch.refresh()
    # Written right after a read: the next one is not due yet.
    bridge = rig.bridge("gw-bridge")
    rig.clock.advance(ROWS_MIN_INTERVAL_SECONDS / 2)
    await rig.watch.refresh(force=False)
    assert bridge.id not in rig.statuses()

    rig.clock.advance(ROWS_MIN_INTERVAL_SECONDS / 2)
    await rig.watch.refresh(force=False)
    assert rig.statuses() == {bridge.id: "owned"}
    sessions_events = [e for e in rig.events if e.kind is EventKind.SESSIONS]
    assert len(sessions_events) == 1


async def test_rows_and_verdicts_follow_the_clock_from_the_copy_without_reading_the_file(
    rig: Rig,
) -> None:
    [http] = await rig.open_http(1)
    bridge = rig.bridge("gw-bridge")
    await rig.watch.refresh()
    assert rig.statuses() == {http.id: "owned", bridge.id: "owned"}

    # The bridge goes silent past its TTL; the tray keeps beating its own row.
    rig.wall.advance(61)
    await rig.watch.beat()
    rig.events.clear()
    rig.clock.advance(ROWS_REJUDGE_SECONDS)
    before = rig.cost()
    await rig.watch.refresh(force=False)

    assert spent(before, rig.cost())[0] == 0
    assert rig.statuses() == {http.id: "owned", bridge.id: "missing"}
    rows = {row["worker_identity"]: row["status"] for row in rig.watch.rows}
    assert rows == {http.worker_identity: "live", bridge.worker_identity: "stale"}
    assert {e.kind for e in rig.events} == {EventKind.WORKERS, EventKind.SESSIONS}


async def test_one_beat_renews_every_http_session_row_in_the_file_and_the_copy(rig: Rig) -> None:
    sessions = await rig.open_http(5)
    rig.wall.advance(50)
    before = rig.cost()
    await rig.watch.beat()
    assert spent(before, rig.cost())[0] == 0

    beats = {row["worker_identity"]: row["last_heartbeat_at"] for row in rig.watch.rows}
    assert set(beats.values()) == {rig.wall.now.isoformat()}
    for session in sessions:
        assert session.worker_identity is not None
        record = rig.registry.get(session.worker_identity)
        assert record is not None and record.last_heartbeat_at == rig.wall.now


async def test_closing_an_http_session_removes_its_row_from_the_file_and_the_copy(
    rig: Rig,
) -> None:
    [kept, closed] = await rig.open_http(2)
    closed.closed = True
    rig.watch.session_closed(closed)
    await rig.watch.settled()

    assert closed.worker_identity is not None
    assert rig.registry.get(closed.worker_identity) is None
    assert [row["worker_identity"] for row in rig.watch.rows] == [kept.worker_identity]
    assert rig.statuses() == {kept.id: "owned"}
    assert rig.watch.http_sessions == 1


async def test_a_registry_deleted_while_running_gets_every_http_sessions_row_again(
    rig: Rig,
) -> None:
    sessions = await rig.open_http(3)
    path = rig.registry.path
    path.unlink()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)

    await rig.watch.refresh()

    with WorkerRegistry(path) as fresh:
        identities = {record.worker_identity for record in fresh.list_workers()}
    assert identities == {session.worker_identity for session in sessions}
    assert set(rig.statuses().values()) == {"owned"}
    assert rig.watch.http_sessions == 3


async def test_judging_again_for_the_clock_skips_the_trays_own_live_rows(rig: Rig) -> None:
    await rig.open_http(50)
    bridge = rig.bridge("gw-bridge")
    await rig.watch.refresh()
    rig.clock.advance(ROWS_REJUDGE_SECONDS)
    before = rig.cost()
    await rig.watch.refresh(force=False)

    # Only the bridge's row and its claim: its pid may have died; ours cannot.
    assert spent(before, rig.cost()) == (0, 2)
    assert rig.statuses()[bridge.id] == "owned"


async def test_closing_the_watch_removes_every_row_the_tray_wrote_and_no_other(
    rig: Rig, tmp_path: Path
) -> None:
    await rig.open_http(5)
    bridge = rig.bridge("gw-bridge")
    await rig.watch.aclose()

    with WorkerRegistry(tmp_path / "registry.sqlite") as after:
        left = [record.worker_identity for record in after.list_workers()]
    assert left == [bridge.worker_identity]


async def test_direct_http_sessions_get_their_rows_and_verdicts_and_lose_them_when_they_end(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))

    def owned() -> list[dict[str, object]]:
        sessions = [s for s in service.sessions_json() if s["kind"] == "http"]
        return sessions if [s["ownership"] for s in sessions] == ["owned"] * 3 else []

    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(http_client(service, "echo"))
        sessions = await wait_until(owned, what="three HTTP sessions held by their rows")
        rows = {row["worker_identity"] for row in service.workers_json()}
        assert {session["worker_identity"] for session in sessions} == rows

    await wait_until(lambda: not service.workers_json(), what="the sessions' rows gone")
