"""Handshake-era HTTP sessions outlive the tray: what each needs, kept in the state folder.

A handshake-era client opens its session once (``initialize``) and sends its
``Mcp-Session-Id`` with every request after; the SDK's client never opens
another when the tray answers "Session not found", so a tray restart (an
upgrade, a crash, a logout) would break it until it is restarted itself.
The gateway keeps, per open session of a server's endpoint, the aggregate
or a profile, what it needs to go on (the id, the negotiated version, the
client's capabilities and info, its subscriptions and log level: a
``SavedSession``, core.serving.sessions.session_rows) in the state folder
(core.serving.sessions.session_file); the next tray adopts a session the first time
its id comes back. A session idle past ``SESSION_IDLE_TIMEOUT_SECONDS`` is
not adopted (expiry as before).

What the previous tray left is input like any other: each row is checked
field by field and a bad one dropped with a warning naming it; at most
``MAX_SAVED_SESSIONS`` rows (``MAX_SAVED_BYTES`` in all) are kept, the most
recently active first, and a session past either is not saved (its client
opens a new one after a restart, as before saved sessions).

A change (a session opened, changed, ended) is one line of the journal,
written ``WRITE_DELAY_SECONDS`` later, with the others of its moment (a
tray killed within that moment loses those changes; their clients open new
sessions as after any "Session not found"); a session's activity is
written with the next change or the housekeeping's flush. While the files
are small (``REWRITE_BELOW_BYTES``) the snapshot is simply written whole;
past that, only when the journal has outgrown it. Files are written on a
worker thread, one write at a time, in the order the changes were made.
"""

import asyncio
import collections
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.base.errors import BadRow
from core.protocol.streamable import SESSION_IDLE_TIMEOUT_SECONDS
from core.serving.sessions.session_file import SESSIONS_FILE, SNAPSHOT_LIMIT, SessionFiles
from core.serving.sessions.session_rows import MAX_ROW_BYTES, SavedSession, parse_row

logger = logging.getLogger(__name__)

__all__ = ["SESSIONS_FILE", "SavedSession", "SessionStore"]

#: How long a change waits for the others of the same burst before it is written.
WRITE_DELAY_SECONDS: Final = 0.05
#: The most sessions kept for the next tray.
MAX_SAVED_SESSIONS: Final = 10_000
#: The most bytes of rows kept (within what the next tray reads: ``SNAPSHOT_LIMIT``).
MAX_SAVED_BYTES: Final = SNAPSHOT_LIMIT - 1024 * 1024
#: Below this, the snapshot is rewritten whole on each write (a few hundred sessions:
#: cheap), so it alone is the state; past it, changes go to the journal.
REWRITE_BELOW_BYTES: Final = 64 * 1024
#: How many problems of a start are told one by one before the rest are counted.
TOLD_PROBLEMS: Final = 5
#: The family of the store's warnings in the Warnings tab.
WARNING_FAMILY: Final = "saved-sessions"


@dataclass(frozen=True)
class _Job:
    """One write: a snapshot (every row) or lines for the journal."""

    rows: tuple[str, ...] | None = None
    lines: tuple[str, ...] = ()


class SessionStore:
    """The saved sessions of one tray: each change written as one line, in order."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._files = SessionFiles(path) if path is not None else None
        self._saved: dict[str, SavedSession] = {}
        #: Sessions of the previous tray, not adopted yet.
        self._adoptable: dict[str, SavedSession] = {}
        #: Every session in the files, with its row (None: to be made again, after a touch).
        self._rows: dict[str, str | None] = {}
        #: Each row's size when last put, and their sum (the cap is on what the file holds).
        self._bytes: dict[str, int] = {}
        self._total = 0
        #: Changes not handed to the writer yet, and activity not written yet.
        self._lines: list[str] = []
        self._touched: dict[str, float] = {}
        self._pending: asyncio.TimerHandle | None = None
        #: What the files hold: the snapshot's size and what the journal added since.
        self._snapshot_bytes = 0
        self._journal_bytes = 0
        #: The next write is a snapshot (a write failed: what is in memory is the truth).
        self._compact = False
        self._refused_told = False
        #: Writes waiting for the worker thread, in order, and the one file write at a time.
        self._jobs: collections.deque[_Job] = collections.deque()
        self._queue_lock = threading.Lock()
        self._file_lock = threading.Lock()
        self._writing = False

    # ---------------------------------------------------------- the start

    def load(self, now: float | None = None) -> list[str]:
        """Read what the previous tray left (dropping what is idle past its time, bad or past
        the caps) and write it back compacted; the problems found, one line each."""
        if self._files is None:
            return []
        now = time.time() if now is None else now
        found = self._files.read()
        problems = list(found.warnings)
        kept: list[SavedSession] = []
        bad = 0
        for key, (where, raw) in found.rows.items():
            try:
                saved = parse_row(raw, now)
            except BadRow as exc:
                bad += 1
                if bad <= TOLD_PROBLEMS:
                    problems.append(f"{where} (session {key[:40]!r}): {exc}; dropped")
                continue
            if now - saved.last_active <= SESSION_IDLE_TIMEOUT_SECONDS:
                kept.append(saved)
        if bad > TOLD_PROBLEMS:
            problems.append(f"{self.path}: {bad - TOLD_PROBLEMS} more bad rows dropped")
        kept.sort(key=lambda s: s.last_active, reverse=True)
        total = past = 0
        for saved in kept:
            row = saved.to_json()
            if len(self._rows) >= MAX_SAVED_SESSIONS or total + len(row) > MAX_SAVED_BYTES:
                past += 1
                continue
            total += len(row)
            self._adoptable[saved.id] = saved
            self._rows[saved.id] = row
            self._sized(saved.id, len(row))
        if past:
            problems.append(
                f"{self.path}: {past} sessions past the cap ({MAX_SAVED_SESSIONS} sessions, "
                f"{MAX_SAVED_BYTES // 1024 // 1024} MiB) dropped, the least recently active"
            )
        for problem in problems:
            logger.warning("mcp-tray: saved sessions: %s", problem)
        self._compact = True
        self._write()
        return [f"{WARNING_FAMILY}: {problem}" for problem in problems]

    def adopt(self, server: str, session_id: str) -> SavedSession | None:
        """The previous tray's session with this id on this server (or profile), once."""
        saved = self._adoptable.get(session_id)
        if saved is None or saved.server != server:
            return None
        del self._adoptable[session_id]
        return saved

    # ------------------------------------------------------------ changes

    def put(self, saved: SavedSession) -> None:
        try:
            # What the next tray would drop is not written (a client's odd capabilities).
            parse_row(vars(saved), saved.last_active)
        except BadRow as exc:
            self._refused(saved.id, f"the next mcp-tray would not take it: {exc}")
            return
        row = saved.to_json()
        if len(row) > MAX_ROW_BYTES:
            self._refused(saved.id, f"its row takes {len(row)} bytes, more than {MAX_ROW_BYTES}")
            return
        if saved.id not in self._rows and not self._room_for(len(row)):
            self._refused(
                saved.id,
                f"{MAX_SAVED_SESSIONS} sessions ({MAX_SAVED_BYTES // 1024 // 1024} MiB) are kept",
            )
            return
        self._saved[saved.id] = saved
        self._rows[saved.id] = row
        self._sized(saved.id, len(row))
        self._touched.pop(saved.id, None)  # the row has its time
        self._lines.append(f'{{"put": {row}}}')
        self._write_soon()

    def drop(self, session_id: str) -> None:
        if self._saved.pop(session_id, None) is not None:
            self._forget(session_id)
            self._write_soon()

    def touch(self, session_id: str, last_active: float) -> None:
        """A request of the session: its time is written with the next change (or at close)."""
        saved = self._saved.get(session_id)
        if saved is not None:
            saved.last_active = last_active
            self._rows[session_id] = None
            self._touched[session_id] = last_active

    def flush(self, *, only_if_changed: bool = False) -> None:
        """Write what waits now, on this thread (shutdown); with ``only_if_changed`` (the
        housekeeping), on the worker thread when a loop runs."""
        loop = _running_loop() if only_if_changed else None
        if loop is None:
            self._write()
        else:
            self._write_in_thread(loop)

    def _room_for(self, size: int) -> bool:
        """Room for one more row, made by forgetting the previous tray's least active one."""
        while len(self._rows) >= MAX_SAVED_SESSIONS or self._total + size > MAX_SAVED_BYTES:
            if not self._adoptable:
                return False
            oldest = min(self._adoptable.values(), key=lambda s: s.last_active)
            del self._adoptable[oldest.id]
            self._forget(oldest.id)
        return True

    def _sized(self, session_id: str, size: int) -> None:
        self._total += size - self._bytes.get(session_id, 0)
        self._bytes[session_id] = size

    def _forget(self, session_id: str) -> None:
        if session_id in self._rows:
            del self._rows[session_id]
            self._lines.append(f'{{"drop": {json.dumps(session_id)}}}')
        self._total -= self._bytes.pop(session_id, 0)
        self._touched.pop(session_id, None)

    def _refused(self, session_id: str, why: str) -> None:
        if session_id in self._saved:  # what was kept of it is older than the session now
            self._saved.pop(session_id)
            self._forget(session_id)
            self._write_soon()
        if not self._refused_told:
            self._refused_told = True
            logger.warning(
                "mcp-tray: session %s is not kept for the next mcp-tray: %s (its client opens a "
                "new session after a restart); told once",
                session_id,
                why,
            )

    # ------------------------------------------------------------ writing

    def _write_soon(self) -> None:
        if self._pending is not None:
            return
        loop = _running_loop()
        if loop is None:
            self._write()
        else:
            self._pending = loop.call_later(WRITE_DELAY_SECONDS, self._write_in_thread, loop)

    def _next_job(self) -> _Job | None:
        """What waits, as one write: the journal's lines, or a snapshot when it is due."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        lines = self._lines
        lines += (f'{{"touch": {json.dumps(k)}, "at": {t!r}}}' for k, t in self._touched.items())
        self._lines, self._touched = [], {}
        if self._files is None or not (lines or self._compact):
            return None
        added = sum(len(line) + 1 for line in lines)
        if (
            self._compact
            or self._snapshot_bytes < REWRITE_BELOW_BYTES
            or self._journal_bytes + added > self._snapshot_bytes
        ):
            self._compact = False
            rows = tuple(self._row(key) for key in self._rows)
            self._snapshot_bytes = sum(len(row) + 1 for row in rows) + 32
            self._journal_bytes = 0
            return _Job(rows=rows)
        self._journal_bytes += added
        return _Job(lines=tuple(lines))

    def _row(self, key: str) -> str:
        row = self._rows[key]
        if row is None:
            row = self._rows[key] = self._saved[key].to_json()
        return row

    def _queue(self, job: _Job) -> None:
        with self._queue_lock:
            if job.rows is not None:
                self._jobs.clear()  # a snapshot holds what the waiting writes would
            self._jobs.append(job)

    def _write(self) -> None:
        """Now, on this thread (start-up, shutdown, no loop), after the writes before it."""
        job = self._next_job()
        if job is not None:
            self._queue(job)
        with self._file_lock:
            while (job := self._pop()) is not None:
                self._to_file(job)

    def _write_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        job = self._next_job()
        if job is None:
            return
        self._queue(job)
        with self._queue_lock:
            if self._writing:
                return
            self._writing = True
        loop.run_in_executor(None, self._drain)

    def _pop(self) -> _Job | None:
        with self._queue_lock:
            return self._jobs.popleft() if self._jobs else None

    def _drain(self) -> None:
        """The worker thread: the waiting writes, in order, until none waits."""
        while True:
            with self._file_lock:
                with self._queue_lock:
                    if not self._jobs:
                        self._writing = False
                        return
                    job = self._jobs.popleft()
                self._to_file(job)

    def _to_file(self, job: _Job) -> None:
        assert self._files is not None
        try:
            if job.rows is not None:
                self._files.compact(job.rows)
            else:
                self._files.append(job.lines)
        except OSError as exc:
            # What is in memory is the truth: the next write is a whole snapshot.
            self._compact = True
            logger.warning("mcp-tray: saved sessions not written (%s): next time, whole", exc)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The loop this thread runs, or None (start-up, a test outside one): then writes are
    made at once, on this thread."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
