"""The registry file: its schema, its migrations, and opening it safely.

``open_registry_file`` is the one way in. It checks the file before it
changes anything: a file that is not sqlite, not ours, or from a newer
mcp-tray raises ``RegistryFileError`` (defined in core.base.errors) and is
never touched, not even switched to WAL. A file at an older schema is
migrated forward on open, under ``BEGIN IMMEDIATE``, so several processes
opening one new file at once migrate it exactly once.

The schema version lives in ``PRAGMA user_version``. To change the table,
append a migration to ``_MIGRATIONS`` and bump ``SCHEMA_VERSION`` with it.
"""

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from core import __version__
from core.base.errors import RegistryFileError
from core.platform.files import open_private

#: The schema this code writes. Bump it only together with a new migration.
SCHEMA_VERSION: Final = 1
#: How long a writer waits for another process's write lock before sqlite
#: reports "database is locked". A write holds the lock for well under a
#: millisecond, so five seconds only runs out when a process is wedged.
BUSY_TIMEOUT_SECONDS: Final = 5.0

#: Migration i moves a file from schema i to i + 1. Each runs inside the
#: opener's ``BEGIN IMMEDIATE`` together with the ``user_version`` bump.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE workers (
            worker_identity TEXT PRIMARY KEY,
            client_name TEXT NOT NULL,
            client_instance TEXT,
            session_id TEXT NOT NULL,
            generation_id TEXT,
            role TEXT NOT NULL,
            server TEXT,
            pid INTEGER,
            started_at TEXT NOT NULL,
            last_heartbeat_at TEXT NOT NULL,
            heartbeat_ttl_seconds REAL NOT NULL,
            fencing_epoch INTEGER NOT NULL,
            runtime_version TEXT,
            beats INTEGER NOT NULL DEFAULT 0,
            fenced_at TEXT
        )
        """,
        "CREATE INDEX workers_by_session ON workers (session_id)",
    ),
)

#: The columns ``WorkerRecord.from_row`` reads, for every SELECT.
WORKER_COLUMNS: Final = (
    "worker_identity, client_name, client_instance, session_id, generation_id, role, "
    "server, pid, started_at, last_heartbeat_at, heartbeat_ttl_seconds, fencing_epoch, "
    "runtime_version, beats, fenced_at"
)

_OUR_TABLES: Final = frozenset({"workers"})


def stored_time(moment: datetime) -> str:
    """How a time is written: fixed-width UTC text, so text order is time
    order in SQL and by eye. ``WorkerRecord.from_row`` reads it back."""
    if moment.tzinfo is None:
        raise ValueError(f"registry times must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


_MOVE_IT: Final = "To fix: "


def _move_aside(path: Path) -> str:
    return (
        f"move it aside (for example: mv '{path}' '{path}.bak'); mcp-tray creates a fresh "
        "one (a running tray within seconds), and bridges register in it again"
    )


def damaged(path: Path, exc: sqlite3.DatabaseError) -> RegistryFileError | None:
    """The ``RegistryFileError`` for a file sqlite found damaged, or None for other errors
    (a busy database is transient, not damage)."""
    if exc.sqlite_errorcode in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return RegistryFileError(path, f"is damaged ({exc})", f"{_MOVE_IT}{_move_aside(path)}.")
    return None


def open_registry_file(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A connection to ``path`` at ``SCHEMA_VERSION``, in WAL mode, rows as ``sqlite3.Row``.

    Creates the file (and its folder) when missing. Raises
    ``RegistryFileError`` for a file it must not touch, or cannot open.
    """
    conn = _connect(path, busy_timeout)
    try:
        version = _read_schema_version(conn, path)
        # Checked before this line so a foreign or newer file is never
        # converted to WAL. Both settings persist or apply per connection.
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL is safe from corruption in WAL mode; it may lose the last
        # beats on power loss, which the next beat repairs. FULL would
        # fsync every beat and cap the fleet at disk latency.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.row_factory = sqlite3.Row
        if version < SCHEMA_VERSION:
            _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    try:
        if not path.exists():
            # Made 0600 before SQLite opens it: its journal, WAL and shared-memory files
            # take the database file's mode. (Whatever is there already, SQLite judges.)
            open_private(path, "ab").close()
        # Autocommit mode (isolation_level=None): transactions are explicit,
        # so every write can say BEGIN IMMEDIATE. check_same_thread=False
        # because the heartbeat thread shares it, serialised by the store's lock.
        return sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as exc:
        raise RegistryFileError(
            path, f"cannot be opened ({exc})", "Check that its folder exists and is writable."
        ) from exc


def _read_schema_version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        }
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
            raise RegistryFileError(
                path, f"is not a sqlite database ({exc})", f"{_MOVE_IT}{_move_aside(path)}."
            ) from exc
        raise
    if version > SCHEMA_VERSION:
        raise RegistryFileError(
            path,
            f"was written by a newer mcp-tray (registry schema {version}; "
            f"this mcp-tray {__version__} reads up to schema {SCHEMA_VERSION})",
            f"Run the newer mcp-tray, or {_move_aside(path)} (its worker rows are then lost).",
        )
    if version == 0 and tables - _OUR_TABLES:
        raise RegistryFileError(
            path,
            f"is a sqlite database but not an mcp-tray registry (tables: {sorted(tables)})",
            f"{_MOVE_IT}{_move_aside(path)}.",
        )
    return version


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process may have
        # migrated the file between our first look and now.
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for step in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
