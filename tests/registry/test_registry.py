"""The worker registry (core/registry/store.py, schema.py, records.py) and
its rows as shown (core/registry/workers_view.py).

Strategy: a real sqlite file under ``tmp_path`` per test, a ``FakeWallClock``
for every timestamp, and explicit ``now=`` where a test moves time, so no
test waits for a TTL. Pid liveness is injected (``pid_alive=`` or a probe)
because the synthetic pids are not real processes. Refusals are asserted
as outcomes (blocker kind, drift) rather than exceptions. Bad files are
checked byte for byte to prove nothing was overwritten. Cross-process
writing lives in tests/registry/test_registry_multiprocess.py.
"""

import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.base.errors import RegistryFileError
from core.registry import schema as schema_module
from core.registry.records import (
    BLOCKER_FENCED,
    BLOCKER_NO_ATTACHMENT,
    OWNED,
    UNOWNED,
    NewWorker,
    Registration,
)
from core.registry.schema import SCHEMA_VERSION
from core.registry.store import INITIAL_FENCING_EPOCH, WorkerRegistry
from core.registry.workers_view import (
    STATUS_FENCED,
    STATUS_LIVE,
    STATUS_STALE,
    format_workers_table,
    worker_rows,
)
from tests.support.fakes import FakeWallClock
from tests.support.registry_support import (
    TTL,
    WORKER_FIELDS,
    alive,
    attach,
    impatient_registry,
    write_lock_held,
)

#: The fields of one ``mcp-tray workers --json`` row, in order.
WORKER_ROW_FIELDS = [*WORKER_FIELDS, "status"]


def user_version(path: Path) -> int:
    """The schema version the file says it is at."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def dead(_pid: int) -> bool:
    return False


@pytest.fixture
def clock() -> FakeWallClock:
    return FakeWallClock()


@pytest.fixture
def registry(tmp_path: Path, clock: FakeWallClock) -> Iterator[WorkerRegistry]:
    with WorkerRegistry(tmp_path / "state" / "registry.sqlite", wall_clock=clock) as opened:
        yield opened


# --- opening the file -------------------------------------------------------


def test_a_new_registry_is_a_wal_file_at_the_current_schema(registry: WorkerRegistry) -> None:
    assert user_version(registry.path) == SCHEMA_VERSION
    with sqlite3.connect(registry.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_reopening_a_registry_keeps_its_rows(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    with WorkerRegistry(registry.path, wall_clock=clock) as again:
        assert again.get(outcome.worker_identity) == outcome.record


def test_a_file_that_is_not_sqlite_is_refused_by_name_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "registry.sqlite"
    content = b"this is a text file, not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(RegistryFileError) as caught:
        WorkerRegistry(path)
    message = str(caught.value)
    assert str(path) in message
    assert "not a sqlite database" in message
    assert "move it aside" in message
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.sqlite"]


def test_a_file_from_a_newer_schema_is_refused_by_name_and_left_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "registry.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE workers (worker_identity TEXT PRIMARY KEY, future TEXT)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(RegistryFileError) as caught:
        WorkerRegistry(path)
    message = str(caught.value)
    assert str(path) in message
    assert f"registry schema {SCHEMA_VERSION + 1}" in message
    assert "move it aside" in message
    assert path.read_bytes() == before


def test_a_sqlite_file_of_another_program_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "registry.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(RegistryFileError, match="not an mcp-tray registry"):
        WorkerRegistry(path)
    assert path.read_bytes() == before


def test_an_older_schema_is_migrated_forward_on_open_keeping_its_rows(
    tmp_path: Path, clock: FakeWallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "registry.sqlite"
    with WorkerRegistry(path, wall_clock=clock) as old:
        outcome = attach(old, clock)
    # Pretend a later mcp-tray added a column in schema SCHEMA_VERSION + 1.
    monkeypatch.setattr(schema_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(
        schema_module,
        "_MIGRATIONS",
        (*schema_module._MIGRATIONS, ("ALTER TABLE workers ADD COLUMN note TEXT",)),
    )
    with WorkerRegistry(path, wall_clock=clock) as newer:
        assert newer.get(outcome.worker_identity) == outcome.record
    assert user_version(path) == SCHEMA_VERSION + 1
    conn = sqlite3.connect(path)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(workers)")]
    conn.close()
    assert "note" in columns


# --- register, heartbeat, rows ------------------------------------------------


def test_register_stamps_started_at_as_the_first_heartbeat_and_hands_out_an_epoch(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock, client="Claude Code")
    record = outcome.record
    assert outcome.created
    assert outcome.fencing_epoch == INITIAL_FENCING_EPOCH
    assert record.started_at == record.last_heartbeat_at == clock.now
    assert record.client_name == "claude-code"
    assert (record.session_id, record.generation_id, record.pid) == ("sess-0001", "gen-0001", 4242)
    assert (record.role, record.server, record.client_instance) == (
        "bridge",
        "files",
        "inst-sess-0001",
    )
    assert record.heartbeat_ttl_seconds == TTL
    assert record.runtime_version is not None
    assert record.beats == 0


def test_registering_again_updates_the_one_row_and_keeps_start_and_epoch(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    first = attach(registry, clock, pid=1)
    started = clock.now
    clock.advance(60)
    again = registry.register(
        worker_identity=first.worker_identity,
        client_name="claude-code",
        session_id="sess-0001",
        role="bridge",
        pid=2,
        heartbeat_ttl_seconds=TTL,
    )
    assert not again.created
    assert again.fencing_epoch == first.fencing_epoch
    assert again.record.started_at == started
    assert again.record.last_heartbeat_at == clock.now
    assert again.record.pid == 2
    assert len(registry.list_workers()) == 1


def test_a_heartbeat_advances_last_heartbeat_and_leaves_started_at(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    clock.advance(300)
    result = registry.heartbeat(outcome.worker_identity, outcome.fencing_epoch)
    after = registry.get(outcome.worker_identity)
    assert result.renewed
    assert after is not None
    assert after.started_at == outcome.record.started_at
    assert after.last_heartbeat_at == clock.now > after.started_at
    assert after.beats == 1


def test_register_many_writes_each_row_as_register_would_keeping_an_existing_ones_epoch(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    known = attach(registry, clock, client="cursor", session="sess-a")
    registry.claim_generation(known.worker_identity)
    clock.advance(10)
    again, new = registry.register_many(
        [
            NewWorker(known.worker_identity, "cursor", "sess-a", "bridge", pid=7),
            NewWorker("zed:0001", "Zed", "sess-b", "http-session", server="files"),
        ]
    )
    assert not again.created and again.fencing_epoch == known.fencing_epoch + 1
    assert again.record.pid == 7 and again.record.last_heartbeat_at == clock.now
    assert new.created and new.fencing_epoch == INITIAL_FENCING_EPOCH
    assert new.record.client_name == "zed" and new.record.started_at == clock.now
    assert len(registry.list_workers()) == 2


def test_remove_many_deletes_the_rows_it_names_and_counts_those_that_were_there(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    gone = attach(registry, clock, client="cursor", session="sess-a")
    kept = attach(registry, clock, client="zed", session="sess-b")
    assert registry.remove_many([gone.worker_identity, "nobody:0000"]) == 1
    assert [w.worker_identity for w in registry.list_workers()] == [kept.worker_identity]
    assert not registry.remove(gone.worker_identity)


def test_heartbeat_many_renews_each_row_it_may_and_refuses_the_others_as_heartbeat_would(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    first = attach(registry, clock, client="cursor", session="sess-a")
    second = attach(registry, clock, client="zed", session="sess-b")
    clock.advance(30)
    outcomes = registry.heartbeat_many(
        [
            (first.worker_identity, first.fencing_epoch),
            (second.worker_identity, second.fencing_epoch + 1),
            ("nobody:0000", 1),
        ]
    )
    assert [o.renewed for o in outcomes] == [True, False, False]
    assert outcomes[0].last_heartbeat_at == clock.now
    assert outcomes[1].blocker_kind == BLOCKER_FENCED
    assert outcomes[2].blocker_kind == BLOCKER_NO_ATTACHMENT
    renewed, refused = registry.get(first.worker_identity), registry.get(second.worker_identity)
    assert renewed is not None and renewed.last_heartbeat_at == clock.now and renewed.beats == 1
    assert refused is not None and refused.refused_since_renewal and refused.beats == 0


def test_others_version_moves_for_another_connections_commit_and_not_for_its_own(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    before = registry.others_version()
    attach(registry, clock, client="cursor", session="sess-a")
    assert registry.others_version() == before
    with WorkerRegistry(registry.path, wall_clock=clock) as other:
        attach(other, clock, client="zed", session="sess-b")
    assert registry.others_version() != before


def test_two_clients_are_two_rows_with_distinct_identities(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    first = attach(registry, clock, client="claude-code", session="sess-a")
    second = attach(registry, clock, client="gemini-cli-mcp-client", session="sess-b")
    assert first.worker_identity != second.worker_identity
    rows = {w.worker_identity: w for w in registry.list_workers()}
    assert len(rows) == 2
    assert rows[first.worker_identity].client_name == "claude-code"
    assert rows[second.worker_identity].client_name == "gemini-cli"
    assert [w.worker_identity for w in registry.list_workers(session_id="sess-b")] == [
        second.worker_identity
    ]


def test_a_heartbeat_for_an_unregistered_worker_is_refused_as_attachment_missing(
    registry: WorkerRegistry,
) -> None:
    result = registry.heartbeat("nobody:0000", 1)
    assert not result.renewed
    assert result.blocker_kind == BLOCKER_NO_ATTACHMENT
    assert result.reasons
    assert not result.transient


# --- fencing and expectations -------------------------------------------------


@pytest.mark.parametrize(
    ("expectation", "presented", "field", "recorded"),
    [
        ({"expected_session_id": "sess-impostor"}, "sess-impostor", "session_id", "sess-0001"),
        ({"expected_generation_id": "gen-other"}, "gen-other", "generation_id", "gen-0001"),
        ({"expected_client_name": "Gemini CLI"}, "gemini-cli", "client_name", "claude-code"),
        ({"expected_pid": 9999}, 9999, "pid", 4242),
    ],
    ids=["session", "generation", "client", "pid"],
)
def test_a_wrong_expectation_is_refused_as_fenced_with_the_drift_named(
    registry: WorkerRegistry,
    clock: FakeWallClock,
    expectation: dict[str, str | int],
    presented: str | int,
    field: str,
    recorded: str | int,
) -> None:
    outcome = attach(registry, clock)
    clock.advance(10)
    result = registry.heartbeat(
        outcome.worker_identity,
        outcome.fencing_epoch,
        **expectation,  # type: ignore[arg-type]
    )
    assert not result.renewed
    assert result.blocker_kind == BLOCKER_FENCED
    assert [(d.field, d.recorded, d.presented) for d in result.expectation_drift] == [
        (field, recorded, presented)
    ]
    assert field in " ".join(result.reasons)
    after = registry.get(outcome.worker_identity)
    assert after is not None
    assert after.last_heartbeat_at == outcome.record.last_heartbeat_at
    assert after.fenced_at == clock.now


def test_spellings_of_one_application_renew_as_the_same_client(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock, client="claude-ai")
    assert outcome.record.client_name == "claude-desktop"
    for spelling in ("Claude Desktop", "claude_desktop", "claude"):
        result = registry.heartbeat(
            outcome.worker_identity, outcome.fencing_epoch, expected_client_name=spelling
        )
        assert result.renewed, result.reasons


def test_claude_code_cannot_renew_a_claude_desktop_row(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock, client="claude-ai")
    result = registry.heartbeat(
        outcome.worker_identity, outcome.fencing_epoch, expected_client_name="claude-code"
    )
    assert result.blocker_kind == BLOCKER_FENCED


def test_matching_expectations_renew_normally(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    result = registry.heartbeat(
        outcome.worker_identity,
        outcome.fencing_epoch,
        expected_session_id="sess-0001",
        expected_generation_id="gen-0001",
        expected_client_name="claude_code",
        expected_pid=4242,
    )
    assert result.renewed, result.reasons
    assert result.expectation_drift == ()


def test_omitted_expectations_check_only_the_epoch(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    assert registry.heartbeat(outcome.worker_identity, outcome.fencing_epoch).renewed


def test_a_stale_fencing_epoch_is_refused(registry: WorkerRegistry, clock: FakeWallClock) -> None:
    outcome = attach(registry, clock)
    result = registry.heartbeat(outcome.worker_identity, outcome.fencing_epoch + 1)
    assert not result.renewed
    assert result.blocker_kind == BLOCKER_FENCED
    assert [d.field for d in result.expectation_drift] == ["fencing_epoch"]


def test_claiming_a_generation_fences_the_previous_holder_for_good(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    clock.advance(5)
    claim = registry.claim_generation(outcome.worker_identity, generation_id="gen-0002", pid=5151)
    assert claim.claimed
    assert claim.previous_epoch == outcome.fencing_epoch
    assert claim.fencing_epoch == outcome.fencing_epoch + 1
    record = registry.get(outcome.worker_identity)
    assert record is not None
    assert (record.generation_id, record.pid, record.last_heartbeat_at) == (
        "gen-0002",
        5151,
        clock.now,
    )
    for _ in range(2):
        old = registry.heartbeat(outcome.worker_identity, outcome.fencing_epoch)
        assert old.blocker_kind == BLOCKER_FENCED
    assert claim.fencing_epoch is not None
    assert registry.heartbeat(outcome.worker_identity, claim.fencing_epoch).renewed


def test_claiming_a_missing_worker_is_refused_as_attachment_missing(
    registry: WorkerRegistry,
) -> None:
    claim = registry.claim_generation("nobody:0000")
    assert not claim.claimed
    assert claim.blocker_kind == BLOCKER_NO_ATTACHMENT


# --- liveness and ownership -----------------------------------------------------


def test_a_row_is_live_up_to_its_ttl_and_stale_right_after(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    record = outcome.record
    at_ttl = registry.is_live(record, now=clock.now + timedelta(seconds=TTL), pid_alive=True)
    after = registry.is_live(record, now=clock.now + timedelta(seconds=TTL + 1), pid_alive=True)
    assert at_ttl.live and at_ttl.heartbeat_fresh
    assert not after.live and not after.heartbeat_fresh
    assert after.heartbeat_age_seconds == TTL + 1
    assert after.reasons


def test_a_silent_worker_expires_even_while_its_pid_lives(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    later = clock.now + timedelta(seconds=TTL + 1)
    state = registry.is_live(outcome.record, now=later, pid_probe=alive)
    assert state.pid_alive is True
    assert not state.live


def test_a_fresh_row_whose_pid_is_gone_is_not_live(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    state = registry.is_live(outcome.record, pid_probe=dead)
    assert state.heartbeat_fresh
    assert not state.live
    assert "4242" in state.reasons[0]


def test_a_row_without_a_pid_is_judged_on_its_heartbeat_alone(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock, pid=None)
    state = registry.is_live(outcome.record, pid_probe=dead)
    assert state.live
    assert state.pid_alive is None


def test_one_expired_worker_leaves_the_others_live(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    healthy = attach(registry, clock, session="sess-live")
    silent = attach(registry, clock, client="gemini", session="sess-dead")
    for _ in range(4):
        clock.advance(TTL / 3)
        assert registry.heartbeat(healthy.worker_identity, healthy.fencing_epoch).renewed
    states = {
        w.worker_identity: registry.is_live(w, pid_probe=alive).live
        for w in registry.list_workers()
    }
    assert states == {healthy.worker_identity: True, silent.worker_identity: False}


def test_a_session_held_by_a_live_worker_is_owned(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    by_worker = registry.assess_ownership(
        "sess-0001",
        worker_identity=outcome.worker_identity,
        fencing_epoch=outcome.fencing_epoch,
        generation_id="gen-0001",
        pid_probe=alive,
    )
    by_session = registry.assess_ownership("sess-0001", pid_probe=alive)
    assert by_worker.ownership == by_session.ownership == OWNED
    assert by_worker.holder == by_session.holder == outcome.worker_identity
    assert by_worker.blocker_kind is None


def test_a_session_whose_worker_expired_is_unowned_with_attachment_missing(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    clock.advance(TTL + 1)
    for assessment in (
        registry.assess_ownership(
            "sess-0001", worker_identity=outcome.worker_identity, pid_probe=alive
        ),
        registry.assess_ownership("sess-0001", pid_probe=alive),
        registry.assess_ownership("sess-never", pid_probe=alive),
        registry.assess_ownership("sess-0001", worker_identity="nobody:0", pid_probe=alive),
    ):
        assert assessment.ownership == UNOWNED
        assert assessment.blocker_kind == BLOCKER_NO_ATTACHMENT
        assert assessment.reasons


def test_a_worker_presenting_a_superseded_epoch_or_generation_is_unowned_as_fenced(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    registry.claim_generation(outcome.worker_identity, generation_id="gen-0002")
    stale_epoch = registry.assess_ownership(
        "sess-0001",
        worker_identity=outcome.worker_identity,
        fencing_epoch=outcome.fencing_epoch,
        pid_probe=alive,
    )
    stale_generation = registry.assess_ownership(
        "sess-0001", generation_id="gen-0001", pid_probe=alive
    )
    for assessment in (stale_epoch, stale_generation):
        assert assessment.ownership == UNOWNED
        assert assessment.blocker_kind == BLOCKER_FENCED
        assert assessment.expectation_drift
    assert stale_epoch.expectation_drift[0].field == "fencing_epoch"
    assert stale_generation.expectation_drift[0].recorded == "gen-0002"


def test_a_row_that_went_silent_after_refusing_its_holder_is_unowned_as_fenced(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    registry.claim_generation(outcome.worker_identity)
    clock.advance(1)
    assert registry.heartbeat(outcome.worker_identity, outcome.fencing_epoch).blocker_kind == (
        BLOCKER_FENCED
    )
    still_live = registry.assess_ownership(
        "sess-0001", worker_identity=outcome.worker_identity, pid_probe=alive
    )
    clock.advance(TTL)
    silent = registry.assess_ownership(
        "sess-0001", worker_identity=outcome.worker_identity, pid_probe=alive
    )
    # The claimer may still beat: a live row is owned whoever was refused.
    assert still_live.ownership == OWNED
    assert silent.ownership == UNOWNED
    assert silent.blocker_kind == BLOCKER_FENCED
    assert "refused" in silent.reasons[0]


def test_a_worker_asked_about_another_session_is_fenced(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock, session="sess-a")
    assessment = registry.assess_ownership(
        "sess-b", worker_identity=outcome.worker_identity, pid_probe=alive
    )
    assert assessment.blocker_kind == BLOCKER_FENCED
    assert assessment.expectation_drift[0].field == "session_id"


# --- removal ----------------------------------------------------------------------


def test_remove_deletes_one_row_and_says_whether_it_existed(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    keep = attach(registry, clock, session="sess-keep")
    gone = attach(registry, clock, session="sess-gone")
    assert registry.remove(gone.worker_identity)
    assert not registry.remove(gone.worker_identity)
    assert [w.worker_identity for w in registry.list_workers()] == [keep.worker_identity]


def test_remove_expired_drops_only_rows_silent_beyond_ttl_and_grace(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    old = attach(registry, clock, session="sess-old")
    clock.advance(TTL)
    recent = attach(registry, clock, session="sess-recent")
    clock.advance(61)
    assert registry.remove_expired(grace_seconds=60) == 1
    assert [w.worker_identity for w in registry.list_workers()] == [recent.worker_identity]
    assert registry.get(old.worker_identity) is None


# --- concurrency inside one process ----------------------------------------------


def test_threads_sharing_one_registry_lose_no_beat(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcomes = [attach(registry, clock, session=f"sess-{i}") for i in range(4)]
    failures: list[str] = []

    def beat(outcome: Registration) -> None:
        for _ in range(200):
            result = registry.heartbeat(outcome.worker_identity, outcome.fencing_epoch)
            if not result.renewed:
                failures.append(str(result))

    threads = [threading.Thread(target=beat, args=(o,)) for o in outcomes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    assert [w.beats for w in registry.list_workers()] == [200] * 4


def test_a_write_lock_held_past_the_busy_timeout_raises_locked_and_leaves_no_transaction(
    tmp_path: Path, clock: FakeWallClock
) -> None:
    path = tmp_path / "registry.sqlite"
    with impatient_registry(path, clock) as (impatient, outcome):
        with write_lock_held(path):
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                impatient.heartbeat(outcome.worker_identity, outcome.fencing_epoch)
        assert impatient.heartbeat(outcome.worker_identity, outcome.fencing_epoch).renewed


# --- what `mcp-tray workers` shows ------------------------------------------------


def test_worker_rows_carry_the_listed_fields_and_ages_from_now(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    outcome = attach(registry, clock)
    clock.advance(12.5)
    [row] = worker_rows(registry, now=clock.now, pid_probe=alive)
    assert list(row) == WORKER_ROW_FIELDS
    assert row["worker_identity"] == outcome.worker_identity
    assert row["heartbeat_age_seconds"] == 12.5
    assert row["ttl_seconds"] == TTL
    assert row["live"] is True
    assert row["status"] == STATUS_LIVE
    assert row["started_at"] == outcome.record.started_at.isoformat()
    assert row["fencing_epoch"] == outcome.fencing_epoch


def test_a_row_shows_stale_after_its_ttl_and_fenced_when_a_refused_holder_was_last(
    registry: WorkerRegistry, clock: FakeWallClock
) -> None:
    silent = attach(registry, clock, session="sess-silent")
    fenced = attach(registry, clock, session="sess-fenced")
    registry.claim_generation(fenced.worker_identity)
    clock.advance(1)
    registry.heartbeat(fenced.worker_identity, fenced.fencing_epoch)
    live_rows = {r["session_id"]: r["status"] for r in worker_rows(registry, pid_probe=alive)}
    assert live_rows == {"sess-silent": STATUS_LIVE, "sess-fenced": STATUS_LIVE}
    clock.advance(TTL + 1)
    rows = {
        r["session_id"]: r["status"] for r in worker_rows(registry, now=clock.now, pid_probe=alive)
    }
    assert rows == {"sess-silent": STATUS_STALE, "sess-fenced": STATUS_FENCED}
    assert silent.worker_identity in format_workers_table(worker_rows(registry, pid_probe=alive))


def test_the_workers_table_says_so_when_empty(registry: WorkerRegistry) -> None:
    assert format_workers_table(worker_rows(registry)) == "no workers registered"
