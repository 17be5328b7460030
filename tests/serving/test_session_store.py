"""The saved handshake-era sessions: a burst of changes is written once, and nothing is lost.

Strategy: a real ``SessionStore`` on a real file in tmp_path, driven inside a
running event loop (as the gateway drives it) and outside one (as start-up
does); the file is read back as the next tray reads it.
"""

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from core.platform.files import write_private
from core.serving.sessions import session_file
from core.serving.sessions.session_store import WRITE_DELAY_SECONDS, SavedSession, SessionStore
from tests.conftest import wait_until


def session(number: int, *, last_active: float = 0.0) -> SavedSession:
    return SavedSession(
        id=f"s{number}",
        server="echo",
        protocol_version="2025-06-18",
        kind="http",
        client_name="test",
        last_active=last_active,
    )


def written(path: Path) -> list[str]:
    try:
        return [row["id"] for row in json.loads(path.read_text())["sessions"]]
    except FileNotFoundError:
        return []


async def test_a_burst_of_opens_is_written_once_a_moment_later_with_every_session(
    tmp_path: Path,
) -> None:
    path = tmp_path / "http-sessions.json"
    store = SessionStore(path)
    for number in range(200):
        store.put(session(number))
    # Nothing written per open: the burst shares one write.
    assert written(path) == []
    ids = await wait_until(lambda: written(path), what="the burst written", timeout=5)
    assert ids == [f"s{n}" for n in range(200)]
    assert path.stat().st_mode & 0o777 == 0o600


async def test_a_flush_writes_at_once_and_a_dropped_session_leaves_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "http-sessions.json"
    store = SessionStore(path)
    store.put(session(1))
    store.put(session(2))
    store.flush()
    assert written(path) == ["s1", "s2"]
    store.drop("s1")
    store.flush()
    assert written(path) == ["s2"]
    # The pending write was taken by the flush: nothing rewrites the file later.
    path.write_text('{"format": 1, "sessions": []}')
    await asyncio.sleep(WRITE_DELAY_SECONDS * 4)
    assert written(path) == []


def test_outside_a_loop_a_change_is_written_at_once_and_activity_reaches_the_next_tray(
    tmp_path: Path,
) -> None:
    path = tmp_path / "http-sessions.json"
    store = SessionStore(path)
    store.put(session(1, last_active=100.0))
    assert written(path) == ["s1"]
    store.touch("s1", 250.0)
    store.flush(only_if_changed=True)
    (row,) = json.loads(path.read_text())["sessions"]
    assert row["last_active"] == 250.0

    following = SessionStore(path)
    following.load(now=300.0)
    adopted = following.adopt("echo", "s1")
    assert adopted is not None and adopted.last_active == 250.0


async def test_the_file_is_written_off_the_loop_and_a_flush_meanwhile_has_the_last_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow disk holds a worker thread, never the loop; a flush at shutdown waits for
    that write and then writes the newer state, which stays."""
    path = tmp_path / "http-sessions.json"
    writers: list[int] = []
    slow = threading.Event()

    def recording(target: Path, text: str) -> None:
        writers.append(threading.get_ident())
        if len(writers) == 1:
            slow.set()
            time.sleep(1.0)  # the disk is slow for the first write
        write_private(target, text)

    monkeypatch.setattr(session_file, "write_private", recording)
    store = SessionStore(path)
    store.put(session(1))
    began = time.monotonic()
    await asyncio.wait_for(asyncio.to_thread(slow.wait), 5)
    # The loop turns freely while the thread writes.
    await asyncio.sleep(0.01)
    assert time.monotonic() - began < 0.9
    assert writers[0] != threading.get_ident()
    store.put(session(2))
    store.flush()  # the shutdown's write, on this thread, after the slow one
    assert written(path) == ["s1", "s2"]
    await asyncio.sleep(WRITE_DELAY_SECONDS * 4)
    assert written(path) == ["s1", "s2"]


async def test_the_housekeepings_flush_of_activity_leaves_the_loop_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "http-sessions.json"
    writers: list[int] = []

    def recording(target: Path, text: str) -> None:
        writers.append(threading.get_ident())
        write_private(target, text)

    store = SessionStore(path)
    store.put(session(1, last_active=100.0))
    store.flush()
    monkeypatch.setattr(session_file, "write_private", recording)
    store.touch("s1", 250.0)
    store.flush(only_if_changed=True)
    await wait_until(lambda: writers, what="the activity written", timeout=5)
    assert writers[0] != threading.get_ident()
    await wait_until(
        lambda: json.loads(path.read_text())["sessions"][0]["last_active"] == 250.0,
        what="the new activity in the file",
        timeout=5,
    )
