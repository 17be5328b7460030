"""Saved sessions are hostile input: what a local process may put in ``state/`` never stops the tray.

Strategy: real files in tmp_path, made the way a hostile local process with
the user's rights would (a FIFO, a link to ``/dev/zero`` or to a file of
the user's, rows of the wrong types, nesting past the parser's recursion,
100,000 rows), read by a real ``SessionStore`` as the next tray reads them
(each start bounded by a timeout on a worker thread: the old code hung on
a FIFO), then written by it as a running tray does. Each test checks what
the store keeps, what it says, and what is left on disk.
"""

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core.serving.sessions.session_file import JOURNAL_FILE, SESSIONS_FILE, SessionFiles
from core.serving.sessions.session_rows import SavedSession
from core.serving.sessions.session_store import MAX_SAVED_SESSIONS, TOLD_PROBLEMS, SessionStore
from tests.conftest import make_fifo

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero are POSIX")

NOW = 1_000_000.0
#: A start must be quick whatever is in the folder (the old code never returned from a FIFO).
START_SECONDS = 10.0


def row(number: int, **changes: Any) -> dict[str, Any]:
    """A saved row as the gateway writes it."""
    return {
        "id": f"s{number}",
        "server": "echo",
        "protocol_version": "2025-06-18",
        "kind": "http",
        "client_name": "test",
        "worker_identity": None,
        "capabilities": {"roots": {"listChanged": True}},
        "client_info": {"name": "test", "version": "1"},
        "subscriptions": [],
        "log_level": None,
        "last_active": NOW - 10,
        **changes,
    }


def saved_file(folder: Path, rows: list[dict[str, Any]]) -> Path:
    path = folder / SESSIONS_FILE
    path.write_text(json.dumps({"format": 1, "sessions": rows}))
    return path


def start(path: Path) -> tuple[SessionStore, list[str]]:
    """A store that read ``path``, as the next tray's start does (on a thread, bounded)."""
    store = SessionStore(path)
    done: list[list[str]] = []
    thread = threading.Thread(target=lambda: done.append(store.load(now=NOW)), daemon=True)
    thread.start()
    thread.join(START_SECONDS)
    assert done, f"the start did not return within {START_SECONDS} s"
    return store, done[0]


def adoptable(store: SessionStore, *ids: str) -> list[str]:
    return [key for key in ids if store.adopt("echo", key) is not None]


def kept(path: Path) -> list[str]:
    """The ids the next tray would find (snapshot and journal replayed)."""
    return list(SessionFiles(path).read().rows)


# ------------------------------------------------------------ the file itself


@pytest.mark.parametrize("name", [SESSIONS_FILE, JOURNAL_FILE])
def test_a_fifo_in_place_of_a_file_is_moved_aside_at_once_and_the_start_goes_on(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / SESSIONS_FILE
    make_fifo(tmp_path / name)
    store, problems = start(path)
    (problem,) = problems
    assert str(tmp_path / name) in problem and "named pipe (FIFO)" in problem
    assert f"moved aside to {name}.bad" in problem
    assert (tmp_path / f"{name}.bad").is_fifo()
    # The store works on: a fresh file, written as the tray goes on.
    store.put(SavedSession("s1", "echo", "2025-06-18", "http", "test", last_active=NOW))
    assert kept(path) == ["s1"]


@posix_only
def test_a_link_to_dev_zero_is_not_read_and_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / SESSIONS_FILE
    path.symlink_to("/dev/zero")
    began = time.monotonic()
    store, problems = start(path)
    assert time.monotonic() - began < START_SECONDS
    (problem,) = problems
    assert "symbolic link" in problem and "moved aside" in problem
    assert os.readlink(tmp_path / "http-sessions.json.bad") == "/dev/zero"
    # A fresh file of mcp-tray's own in its place.
    assert path.is_file() and not path.is_symlink()
    store.put(SavedSession("s1", "echo", "2025-06-18", "http", "test", last_active=NOW))
    assert kept(path) == ["s1"]


def test_nesting_past_the_parsers_recursion_moves_the_file_aside(tmp_path: Path) -> None:
    path = tmp_path / SESSIONS_FILE
    deep = "[" * 200_000 + "]" * 200_000
    path.write_text(f'{{"format": 1, "sessions": [{{"id": "s1", "capabilities": {deep}}}]}}')
    store, problems = start(path)
    (problem,) = problems
    assert "nested deeper than" in problem and "moved aside" in problem
    assert (tmp_path / "http-sessions.json.bad").exists()
    assert adoptable(store, "s1") == []


def test_a_file_of_100000_rows_is_too_big_and_moved_aside_without_being_parsed(
    tmp_path: Path,
) -> None:
    path = saved_file(tmp_path, [row(n) for n in range(100_000)])
    assert path.stat().st_size > 20 * 1024 * 1024
    store, problems = start(path)
    (problem,) = problems
    assert "more than a saved-sessions file may be" in problem and "moved aside" in problem
    assert adoptable(store, "s1") == []


# -------------------------------------------------------- one row at a time


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"last_active": "yesterday"}, "'last_active' is a number of seconds, not a string"),
        ({"last_active": None}, "'last_active' is a number of seconds, not null"),
        ({"last_active": float("nan")}, "'last_active' is a finite number"),
        ({"last_active": 1e300}, "'last_active' (1e+300) is in the future"),
        ({"capabilities": "everything"}, "'capabilities' is a JSON object, not a string"),
        ({"capabilities": [["roots", {}]]}, "'capabilities' is a JSON object, not an array"),
        ({"capabilities": {"sampling": "yes"}}, "'capabilities.sampling' is a JSON object"),
        ({"subscriptions": "file:///a"}, "'subscriptions' is an array of resource URIs"),
        ({"subscriptions": [1, 2]}, "'subscriptions' holds resource URIs (strings)"),
        ({"protocol_version": "9999-01-01"}, "'protocol_version' is one of 2024-11-05"),
        ({"kind": ["http"]}, "'kind' is one of http, bridge"),
        ({"server": ""}, "'server' is a non-empty string"),
        ({"client_info": {"name": 5}}, "'client_info.name' is a string, not a number"),
        ({"id": "s1 with spaces"}, "'id' is not a session id"),
    ],
)
def test_a_row_with_a_wrong_field_is_dropped_naming_it_and_the_others_are_kept(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    path = saved_file(tmp_path, [row(0), row(1, **change), row(2)])
    store, problems = start(path)
    (problem,) = problems
    assert named in problem and problem.endswith("; dropped")
    assert f"{path} row 2" in problem
    assert adoptable(store, "s0", "s1", "s2") == ["s0", "s2"]


def test_a_row_nested_deeper_than_a_message_may_be_is_dropped(tmp_path: Path) -> None:
    nested: dict[str, Any] = {}
    inner = nested
    for _ in range(129):  # parses fine, but deeper than the wire lets a message nest
        inner["x"] = {}
        inner = inner["x"]
    path = saved_file(tmp_path, [row(0), row(1, capabilities={"experimental": nested})])
    store, problems = start(path)
    (problem,) = problems
    assert "'capabilities' is nested deeper than 128 levels" in problem
    assert adoptable(store, "s0", "s1") == ["s0"]


def test_many_bad_rows_are_told_a_few_then_counted(tmp_path: Path) -> None:
    path = saved_file(tmp_path, [row(n, last_active=None) for n in range(50)] + [row(50)])
    store, problems = start(path)
    assert len(problems) == TOLD_PROBLEMS + 1
    assert problems[-1].endswith(f"{50 - TOLD_PROBLEMS} more bad rows dropped")
    assert adoptable(store, "s50") == ["s50"]


def test_rows_past_the_cap_are_dropped_the_least_recently_active_first(tmp_path: Path) -> None:
    extra = 25
    rows = [row(n, last_active=NOW - 1000 + n / 100) for n in range(MAX_SAVED_SESSIONS + extra)]
    store, problems = start(saved_file(tmp_path, rows))
    (problem,) = problems
    assert f"{extra} sessions past the cap ({MAX_SAVED_SESSIONS} sessions" in problem
    assert adoptable(store, *(f"s{n}" for n in range(extra + 1))) == [f"s{extra}"]


# ------------------------------------------------------------------ writing


def test_a_change_among_10000_sessions_appends_its_row_and_leaves_the_snapshot_alone(
    tmp_path: Path,
) -> None:
    last = MAX_SAVED_SESSIONS - 2
    path = saved_file(tmp_path, [row(n) for n in range(last + 1)])
    store, problems = start(path)
    assert problems == []
    snapshot = path.stat()
    journal = tmp_path / JOURNAL_FILE
    assert journal.stat().st_size == 0

    store.put(SavedSession("new", "echo", "2025-06-18", "http", "test", last_active=NOW))
    store.flush()

    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        snapshot.st_ino,
        snapshot.st_mtime_ns,
        snapshot.st_size,
    )
    assert 0 < journal.stat().st_size < 1024
    # The next tray finds the new session with the others.
    following, _ = start(path)
    assert adoptable(following, "new", "s0", f"s{last}") == ["new", "s0", f"s{last}"]


def test_the_journal_is_compacted_once_it_outgrows_the_snapshot(tmp_path: Path) -> None:
    path = saved_file(tmp_path, [row(n) for n in range(1000)])
    store, _ = start(path)
    snapshot = path.stat()
    journal = tmp_path / JOURNAL_FILE
    for number in range(3 * snapshot.st_size // 350):  # each change is ~350 bytes
        store.put(SavedSession(f"n{number}", "echo", "2025-06-18", "http", "t", last_active=NOW))
        store.drop(f"n{number}")
        store.flush()
        assert journal.stat().st_size <= snapshot.st_size + 1024
        if path.stat().st_ino != snapshot.st_ino:
            break
    else:
        raise AssertionError("the journal was never compacted")
    assert journal.stat().st_size < 100  # at most the drop after the compacting put
    # About as many bytes of changes as the snapshot holds went to the journal first.
    assert number * 350 > snapshot.st_size / 2
    assert kept(path) == [f"s{n}" for n in range(1000)]


def test_a_link_in_place_of_the_file_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    target = tmp_path / "the-users-file.json"
    original = json.dumps({"format": 1, "sessions": [row(1)]})
    target.write_text(original)
    path = tmp_path / SESSIONS_FILE
    path.symlink_to(target)
    store, problems = start(path)
    assert "symbolic link" in problems[0]
    assert adoptable(store, "s1") == []  # what the link points at was not read
    store.put(SavedSession("s2", "echo", "2025-06-18", "http", "test", last_active=NOW))
    store.flush()
    assert target.read_text() == original
    assert path.is_file() and not path.is_symlink()


def test_a_link_in_place_of_the_journal_is_never_written_through(tmp_path: Path) -> None:
    saved_file(tmp_path, [row(n) for n in range(1000)])  # big enough to append, not rewrite
    store, _ = start(tmp_path / SESSIONS_FILE)
    target = tmp_path / "the-users-file"
    target.write_text("mine\n")
    journal = tmp_path / JOURNAL_FILE
    journal.unlink()
    journal.symlink_to(target)

    store.put(SavedSession("s2", "echo", "2025-06-18", "http", "test", last_active=NOW))
    store.flush()  # refused (O_NOFOLLOW): the next write is a whole snapshot
    store.put(SavedSession("s3", "echo", "2025-06-18", "http", "test", last_active=NOW))
    store.flush()
    assert target.read_text() == "mine\n"
    assert not journal.is_symlink()
    assert {"s2", "s3"} <= set(kept(tmp_path / SESSIONS_FILE))


def test_a_link_at_the_temporary_name_of_a_write_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "the-users-file"
    target.write_text("mine\n")
    # The name the old code always wrote to first, easy to guess from the tray's pid.
    (tmp_path / f".{SESSIONS_FILE}.{os.getpid()}.tmp").symlink_to(target)
    store = SessionStore(tmp_path / SESSIONS_FILE)
    store.put(SavedSession("s1", "echo", "2025-06-18", "http", "test", last_active=NOW))
    assert target.read_text() == "mine\n"
    assert kept(tmp_path / SESSIONS_FILE) == ["s1"]


def test_a_line_cut_short_by_a_crash_or_not_a_change_is_skipped_and_the_rest_replayed(
    tmp_path: Path,
) -> None:
    path = saved_file(tmp_path, [row(0), row(1)])
    (tmp_path / JOURNAL_FILE).write_text(
        json.dumps({"put": row(2)})
        + "\n"
        + json.dumps({"chmod": "s0"})
        + "\n"
        + json.dumps({"drop": "s1"})
        + "\n"
        + json.dumps({"touch": "s0", "at": NOW - 5})
        + '\n{"put": {"id": "s3", "ser'
    )
    store, problems = start(path)
    assert problems[0].startswith(
        f"saved-sessions: {tmp_path / JOURNAL_FILE}:2: this is not a change"
    )
    assert problems[1].endswith("2 lines could not be used and were skipped")
    assert adoptable(store, "s0", "s1", "s2", "s3") == ["s0", "s2"]


def test_a_journal_a_crash_left_behind_a_newer_snapshot_replays_to_the_same_sessions(
    tmp_path: Path,
) -> None:
    """Compaction writes the snapshot, then empties the journal: a crash in between
    leaves both, and replaying the old journal on the new snapshot changes nothing."""
    changes = [{"put": row(2)}, {"drop": "s0"}, {"touch": "s1", "at": NOW - 1}]
    (tmp_path / JOURNAL_FILE).write_text("".join(json.dumps(c) + "\n" for c in changes))
    path = saved_file(tmp_path, [row(0), row(1)])
    store, _ = start(path)
    (tmp_path / JOURNAL_FILE).write_text("".join(json.dumps(c) + "\n" for c in changes))
    again, _ = start(path)
    for each in (store, again):
        sessions = [each.adopt("echo", key) for key in ("s0", "s1", "s2")]
        assert [s.last_active if s else None for s in sessions] == [None, NOW - 1, NOW - 10]


async def test_writes_keep_their_order_across_the_worker_thread_and_the_shutdown_flush(
    tmp_path: Path,
) -> None:
    saved_file(tmp_path, [row(n) for n in range(1000)])
    store, _ = start(tmp_path / SESSIONS_FILE)
    for number in range(50):
        store.put(SavedSession(f"n{number}", "echo", "2025-06-18", "http", "t", last_active=NOW))
        if number % 2:
            store.drop(f"n{number - 1}")
        store.flush(only_if_changed=True)  # the housekeeping's: on the worker thread
        await asyncio.sleep(0)
    store.flush()  # the shutdown's, after whatever the thread still writes
    ids = set(kept(tmp_path / SESSIONS_FILE))
    assert {f"n{n}" for n in range(50)} & ids == {f"n{n}" for n in range(1, 50, 2)}


def test_a_live_session_the_next_tray_would_drop_is_not_written(tmp_path: Path) -> None:
    """A client may declare odd capabilities ({"sampling": true}) and still be served;
    its row is not saved, so no start blames the file for it."""
    path = tmp_path / SESSIONS_FILE
    store = SessionStore(path)
    store.put(
        SavedSession(
            "odd",
            "echo",
            "2025-06-18",
            "http",
            "t",
            capabilities={"sampling": True},
            last_active=NOW,
        )
    )
    store.put(SavedSession("plain", "echo", "2025-06-18", "http", "t", last_active=NOW))
    assert kept(path) == ["plain"]
    following, problems = start(path)
    assert problems == [] and adoptable(following, "odd", "plain") == ["plain"]
