"""The call journal's file: ``calls.sqlite`` in the state folder (docs/design.md §3.16).

One writer, the tray's ``JournalWriter`` thread, fed by a queue: the event
loop only puts what it saw of a call (core.registry.journal_rows.Seen); the
thread gathers a batch for ``BATCH_SECONDS``, turns each into a record
(redaction, the cut, the result's size and first lines), writes the batch
in one transaction and hands the written records on (the window's live list,
``--follow``). A tray killed -9 loses what it had not written yet: at most
``BATCH_SECONDS`` plus one write, well under a second. WAL, so the CLI and
the API read while the tray writes.

Kept per config (``"journal": {"days": 14, "max_mb": 200}``): older records
go, then the oldest until the file's used pages fit, every
``PRUNE_SECONDS`` and at start; freed pages are given back
(``auto_vacuum = INCREMENTAL``).

A file sqlite finds damaged (at open or on a write) is moved aside with the
time in its name, a new one is started, and the caller is told in one line
(the tray lists it as a warning): never a failed start.
"""

import contextlib
import functools
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Final, Protocol, TypeVar

from core.platform.files import open_private
from core.registry.identity import normalize_client_name
from core.registry.journal_rows import OUTCOMES, CallRecord, Seen, complete, parse_since

logger = logging.getLogger(__name__)
T = TypeVar("T")

# sqlite3 binds int, float and str directly but takes every other value, None
# too, through its adapter lookup, which fails by raising and clearing two
# AttributeErrors: a NULL cost 0.45 us, four times a text. An adapter for None,
# to itself, makes the lookup one dict hit (0.1 us). Process-wide, as sqlite3's
# adapters are, and harmless there: None is bound as NULL either way.
_NONE_TO_ITSELF: Final[dict[None, None]] = {}
sqlite3.register_adapter(type(None), _NONE_TO_ITSELF.get)

JOURNAL_FILE: Final = "calls.sqlite"
#: How long the writer gathers calls before it writes them: the most a kill -9 loses.
BATCH_SECONDS: Final = 0.1
#: How often old records are dropped (and at start).
PRUNE_SECONDS: Final = 600.0
#: The family of the warning a damaged journal leaves (core.base.severity: a warning).
JOURNAL_DAMAGED_FAMILY: Final = "journal-damaged"
#: The most records one query returns.
MAX_LIMIT: Final = 10000
BUSY_TIMEOUT_SECONDS: Final = 5.0

#: The columns, in CallRecord's order (``seq`` is the rowid).
_COLUMNS: Final = CallRecord._fields[:-1]
_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY, {", ".join(_COLUMNS)});
"""
#: Rows per INSERT statement, at most (a power of two: few statement texts to prepare).
ROWS_PER_STATEMENT: Final = 256


def _chunk(left: int) -> int:
    """The largest power of two up to ``ROWS_PER_STATEMENT`` that ``left`` rows fill."""
    return min(ROWS_PER_STATEMENT, 1 << (left.bit_length() - 1))


@functools.lru_cache(maxsize=16)
def _insert(rows: int) -> str:
    """``rows`` records in one statement, in CallRecord's order: its fields, then ``seq``.
    No index but the rowid: each insert stays an append (retention and ``since`` scan;
    both are rare)."""
    row = f"({', '.join('?' * (len(_COLUMNS) + 1))})"
    return f"INSERT INTO calls ({', '.join(_COLUMNS)}, seq) VALUES {', '.join([row] * rows)}"


class Retention(Protocol):
    """What the journal keeps (the config's ``"journal"``, core.settings.config_model)."""

    @property
    def days(self) -> float: ...
    @property
    def max_mb(self) -> float: ...
    #: False: tool names only, never their arguments.
    @property
    def arguments(self) -> bool: ...


@dataclass(frozen=True)
class CallQuery:
    """Which records a reader wants (``mcp-tray calls``, ``GET /api/v1/calls``)."""

    server: str | None = None
    #: The client's display name or any spelling of it (case does not matter).
    client: str | None = None
    #: A glob over the tool's name (or the resource's URI, the prompt's name).
    tool: str | None = None
    outcome: str | None = None
    #: ``/mcp/NAME``, ``/mcp``, ``/mcp/@PROFILE``, ``bridge /mcp/NAME``, ``cli``, ``api``.
    door: str | None = None
    #: UTC seconds: records that started at or after it.
    since: float | None = None
    #: Only records written after this one (``seq``), oldest first: a follower's page.
    after: int | None = None
    limit: int = 100


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)


def move_aside(path: Path, now: float) -> Path:
    """Move a damaged journal (and its WAL) out of the way; where it went."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    path.replace(aside)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(OSError):
            Path(f"{path}{suffix}").replace(Path(f"{aside}{suffix}"))
    return aside


class JournalStore:
    """The file itself: one connection, used by one thread at a time."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, path: Path, now: float) -> "tuple[JournalStore, str | None]":
        """The journal at ``path``, and the warning to show when a damaged one was moved aside."""
        try:
            return cls(path, _connect(path)), None
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            aside = move_aside(path, now)
            warning = (
                f"{JOURNAL_DAMAGED_FAMILY}: the call journal {path} was damaged ({exc}); "
                f"it was moved to {aside.name} and a new one started"
            )
            return cls(path, _connect(path)), warning

    def close(self) -> None:
        self._conn.close()

    def next_seq(self) -> int:
        """The ``seq`` the next record gets (the one writer numbers its records itself)."""
        return int(self._conn.execute("SELECT coalesce(max(seq), 0) FROM calls").fetchone()[0]) + 1

    def write(self, records: list[CallRecord]) -> list[CallRecord]:
        """Write numbered records in one transaction."""
        conn = self._conn
        conn.execute("BEGIN")
        try:
            start = 0
            while start < len(records):
                # Many rows per statement: sqlite3 lets go of the GIL for each step, and
                # a step per row (executemany) made the event loop's thread wait for it
                # back around every one of its own system calls.
                size = _chunk(len(records) - start)
                chunk = records[start : start + size]
                conn.execute(_insert(size), list(chain.from_iterable(chunk)))
                start += size
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return records

    def prune(self, now: float, retention: Retention) -> int:
        """Drop what the retention no longer keeps; how many records went."""
        conn = self._conn
        gone = conn.execute(
            "DELETE FROM calls WHERE started < ?", (now - retention.days * 86400,)
        ).rowcount
        limit = retention.max_mb * 1024 * 1024
        while (used := self.used_bytes()) > limit:
            count = int(conn.execute("SELECT count(*) FROM calls").fetchone()[0])
            if count == 0:
                break
            # The share of the file over the limit, and a little more: few rounds.
            share = min(1.0, (used - limit) / used + 0.05)
            batch = max(1, int(count * share))
            gone += conn.execute(
                "DELETE FROM calls WHERE seq IN (SELECT seq FROM calls ORDER BY seq LIMIT ?)",
                (batch,),
            ).rowcount
        if gone:
            # Through sqlite3_exec, which steps it to its end: execute() would free one page.
            conn.executescript("PRAGMA incremental_vacuum;")
        return gone

    def used_bytes(self) -> int:
        """Bytes of the file that hold records (pages in use, not free ones)."""
        conn = self._conn
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        return (pages - free) * size

    def query(self, wanted: CallQuery) -> list[CallRecord]:
        return run_query(self._conn, wanted)


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        # 0600 before SQLite opens it: its WAL and shared-memory files take its mode.
        open_private(path, "ab").close()
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute("PRAGMA user_version").fetchone()
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes on a new file
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL: a commit survives a killed process (not a power cut): enough here.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(_SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def run_query(conn: sqlite3.Connection, wanted: CallQuery) -> list[CallRecord]:
    """The records ``wanted`` names: the newest ``limit`` of them, oldest first
    (a follower's page, ``after``, is the oldest ``limit`` after it)."""
    where: list[str] = []
    values: list[object] = []
    if wanted.server:
        where.append("server = ?")
        values.append(wanted.server)
    if wanted.client:
        where.append("(client = ? COLLATE NOCASE OR client_name = ?)")
        values += [wanted.client, normalize_client_name(wanted.client)]
    if wanted.tool:
        where.append("tool GLOB ?")
        values.append(wanted.tool)
    if wanted.outcome:
        where.append("outcome = ?")
        values.append(wanted.outcome)
    if wanted.door:
        where.append("door = ?")
        values.append(wanted.door)
    if wanted.since is not None:
        where.append("started >= ?")
        values.append(wanted.since)
    if wanted.after is not None:
        where.append("seq > ?")
        values.append(wanted.after)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    order = "ASC" if wanted.after is not None else "DESC"
    limit = max(1, min(wanted.limit, MAX_LIMIT))
    rows = conn.execute(
        f"SELECT seq, {', '.join(_COLUMNS)} FROM calls {clause} ORDER BY seq {order} LIMIT ?",
        [*values, limit],
    ).fetchall()
    records = [CallRecord._make((*row[1:], row[0])) for row in rows]
    return records if order == "ASC" else records[::-1]


def read_calls(path: Path, wanted: CallQuery) -> list[CallRecord]:
    """Records read straight from the file (no tray running): read-only, never created."""
    if not path.exists():
        return []
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_SECONDS)
    try:
        return run_query(conn, wanted)
    finally:
        conn.close()


class JournalWriter:
    """The one thread that writes the journal, fed by a queue (``put`` never blocks)."""

    def __init__(
        self,
        store: JournalStore,
        *,
        retention: Callable[[], Retention],
        secrets: Callable[[], Collection[str]],
        on_written: Callable[[list[CallRecord]], None],
        on_warning: Callable[[str], None],
        clock: Callable[[], float] = time.time,
        batch_seconds: float = BATCH_SECONDS,
    ) -> None:
        self.store = store
        self._retention = retention
        self._secrets = secrets
        self._on_written = on_written
        self._on_warning = on_warning
        self._clock = clock
        self._batch_seconds = batch_seconds
        self._queue: queue.SimpleQueue[Seen | None] = queue.SimpleQueue()
        #: Hands the writer a call (never blocks): the queue's own method, so the loop,
        #: which calls it once per call, runs no frame of ours for it.
        self.put: Callable[[Seen], None] = self._queue.put
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcp-tray:journal", daemon=True)
        self._pruned = float("-inf")
        #: Each record's id: its seq, after this tray's (pid, start): unique across files.
        self._prefix = f"{os.getpid():x}{int(time.time()):x}-"
        self._last_failure = ""
        #: The seq of the next record written (None: read from the file first).
        self._next_seq: int | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued, then end the thread and close the file."""
        self._stopping.set()
        self._queue.put(None)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.store.close()

    def query(self, wanted: CallQuery) -> list[CallRecord]:
        """A read on a connection of its own (any thread; WAL lets it run beside the writer)."""
        return read_calls(self.store.path, wanted)

    def _run(self) -> None:
        self._prune()
        stop = False
        while not stop:
            try:
                first = self._queue.get(timeout=PRUNE_SECONDS)
            except queue.Empty:
                self._prune()
                continue
            # Let a batch gather: one transaction for many calls.
            self._stopping.wait(self._batch_seconds)
            batch = []
            item: Seen | None = first
            while True:
                if item is None:
                    stop = True
                else:
                    batch.append(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            if self._clock() - self._pruned >= PRUNE_SECONDS:
                self._prune()

    def _write(self, batch: list[Seen]) -> None:
        retention = self._retention()
        secrets = self._secrets()
        try:
            keep = retention.arguments
            prefix = self._prefix
            # The one writer numbers its records: the file is asked once, and again
            # after a failed write (a new file after a damaged one starts at 1 then).
            if self._next_seq is None:
                self._next_seq = self._guarded(self.store.next_seq)
            first = self._next_seq
            records = [
                complete(s, secrets, keep_arguments=keep, id=f"{prefix}{seq}", seq=seq)
                for seq, s in enumerate(batch, first)
            ]
            self._next_seq = None
            written: list[CallRecord] = self._guarded(lambda: self.store.write(records))
            self._next_seq = first + len(records)
        except Exception as exc:
            self._failed("could not write the call journal", exc)
            return
        if written:
            self._on_written(written)

    def _prune(self) -> None:
        self._pruned = self._clock()
        try:
            self._guarded(lambda: self.store.prune(self._clock(), self._retention()))
        except Exception as exc:
            self._failed("could not prune the call journal", exc)

    def _guarded(self, work: Callable[[], T]) -> T:
        """``work``, once more on a new file when sqlite finds this one damaged."""
        try:
            return work()
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            path = self.store.path
            with contextlib.suppress(sqlite3.Error):
                self.store.close()
            aside = move_aside(path, self._clock())
            self.store, _ = JournalStore.open(path, self._clock())
            self._on_warning(
                f"{JOURNAL_DAMAGED_FAMILY}: the call journal {path} was damaged ({exc}); "
                f"it was moved to {aside.name} and a new one started"
            )
            return work()

    def _failed(self, what: str, exc: Exception) -> None:
        if str(exc) != self._last_failure:  # once per kind of failure, not per batch
            self._last_failure = str(exc)
            logger.warning("mcp-tray: %s: %s", what, exc)


def calls_query(params: Mapping[str, str], now: float) -> CallQuery:
    """A query from the API's parameters (``ValueError`` naming the bad one)."""
    unknown = set(params) - _QUERY_KEYS
    if unknown:
        raise ValueError(
            f"unknown parameter {sorted(unknown)[0]!r}: use {', '.join(sorted(_QUERY_KEYS))}"
        )
    outcome = params.get("outcome") or None
    if outcome is not None and outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r} is none of {', '.join(OUTCOMES)}")
    since = params.get("since")
    return CallQuery(
        server=params.get("server") or None,
        client=params.get("client") or None,
        tool=params.get("tool") or None,
        outcome=outcome,
        door=params.get("door") or None,
        since=parse_since(since, now) if since else None,
        after=_count(params, "after", 0) if "after" in params else None,
        limit=_count(params, "limit", 1),
    )


_QUERY_KEYS: Final = frozenset(
    {"server", "client", "tool", "outcome", "door", "since", "after", "limit"}
)


def _count(params: Mapping[str, str], key: str, low: int) -> int:
    text = params.get(key, "100")
    if not text.isdigit() or int(text) < low:
        raise ValueError(f"{key} must be a whole number from {low}, got {text!r}")
    return int(text)
