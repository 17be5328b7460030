"""Handshake-era HTTP sessions outlive the tray: what each needs, kept in the state folder.

A handshake-era client opens its session once (``initialize``) and sends its
``Mcp-Session-Id`` with every request after; the SDK's client never opens
another when the tray answers "Session not found", so a tray restart (an
upgrade, a crash, a logout) would break it until it is restarted itself.
The gateway keeps, per open session, what it needs to go on (the id, the
negotiated version, the client's capabilities and info, its subscriptions
and log level) in ``http-sessions.json`` in the state folder (0600); the
next tray adopts a session the first time its id comes back. A session idle
past ``SESSION_IDLE_TIMEOUT_SECONDS`` is not adopted (expiry as before).

The file holds every session, so writing it on each open made a burst of N
opens cost N² rows: a change is written ``WRITE_DELAY_SECONDS`` later, once
for all the changes of that moment (a tray killed within that moment loses
those sessions' rows, and their clients open new sessions as after any
"Session not found"); each row's JSON is kept, not rebuilt per write. The file
itself is written on a worker thread (1,000 sessions are ~300 KB, milliseconds
of the loop's time that calls would wait behind); writes are made one at a
time, each with the rows of its moment, and the last one always lands.
"""

import asyncio
import contextlib
import itertools
import json
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from core.platform.files import write_private
from core.protocol.streamable import SESSION_IDLE_TIMEOUT_SECONDS

logger = logging.getLogger(__name__)

#: The file, in the state folder.
SESSIONS_FILE: Final = "http-sessions.json"
#: Its format, so a later mcp-tray can tell what it reads.
FORMAT: Final = 1
#: How long a change waits for the others of the same burst before the file is written.
WRITE_DELAY_SECONDS: Final = 0.05


@dataclass
class SavedSession:
    """What a handshake-era session needs to go on in the next tray."""

    id: str
    server: str
    protocol_version: str
    kind: str
    client_name: str
    worker_identity: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    subscriptions: list[str] = field(default_factory=list)
    log_level: str | None = None
    #: Wall-clock seconds of its last request (the next tray's clock is another).
    last_active: float = 0.0

    @classmethod
    def from_json(cls, raw: Any) -> "SavedSession | None":
        if not isinstance(raw, dict):
            return None
        try:
            saved = cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})
        except TypeError:
            return None
        if not all(isinstance(v, str) for v in (saved.id, saved.server, saved.protocol_version)):
            return None
        return saved


class SessionStore:
    """The saved sessions of one tray, written whenever one opens, changes or ends."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._saved: dict[str, SavedSession] = {}
        #: Sessions of the previous tray, not adopted yet.
        self._adoptable: dict[str, SavedSession] = {}
        #: Each session's row as written, rebuilt only when the session changes.
        self._rows: dict[str, str] = {}
        #: A session's activity not yet written (written with the next change or flush).
        self._dirty = False
        self._pending: asyncio.TimerHandle | None = None
        #: One file write at a time (the worker thread's and a flush at shutdown).
        self._file_lock = threading.Lock()
        #: The text the worker thread writes next, numbered (None: nothing waits).
        self._next_text: tuple[int, str] | None = None
        self._texts = itertools.count(1)
        #: The number of the text in the file: an older one never replaces it.
        self._in_file = 0
        self._writing = False

    def load(self, now: float | None = None) -> None:
        """Read what the previous tray left; what is idle past its time is dropped."""
        if self.path is None:
            return
        now = time.time() if now is None else now
        try:
            document = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        rows = document.get("sessions") if isinstance(document, dict) else None
        for raw in rows if isinstance(rows, list) else []:
            saved = SavedSession.from_json(raw)
            if saved is not None and now - saved.last_active <= SESSION_IDLE_TIMEOUT_SECONDS:
                self._adoptable[saved.id] = saved
                self._rows[saved.id] = json.dumps(asdict(saved))
        self._write()

    def adopt(self, server: str, session_id: str) -> SavedSession | None:
        """The previous tray's session with this id on this server, once."""
        saved = self._adoptable.get(session_id)
        if saved is None or saved.server != server:
            return None
        del self._adoptable[session_id]
        return saved

    def put(self, saved: SavedSession) -> None:
        self._saved[saved.id] = saved
        self._rows[saved.id] = json.dumps(asdict(saved))
        self._write_soon()

    def drop(self, session_id: str) -> None:
        if self._saved.pop(session_id, None) is not None:
            self._rows.pop(session_id, None)
            self._write_soon()

    def touch(self, session_id: str, last_active: float) -> None:
        """A request of the session: its time is written with the next change (or at close)."""
        saved = self._saved.get(session_id)
        if saved is not None:
            saved.last_active = last_active
            self._rows.pop(session_id, None)
            self._dirty = True

    def flush(self, *, only_if_changed: bool = False) -> None:
        """Write now, on this thread (shutdown); with ``only_if_changed`` (the housekeeping),
        only when activity was seen, and on the worker thread when a loop runs."""
        if not only_if_changed:
            self._write()
        elif self._dirty:
            loop = _running_loop()
            if loop is None:
                self._write()
            else:
                self._write_in_thread(loop)

    def _write_soon(self) -> None:
        if self._pending is not None:
            return
        loop = _running_loop()
        if loop is None:
            self._write()
        else:
            self._pending = loop.call_later(WRITE_DELAY_SECONDS, self._write_in_thread, loop)

    def _row(self, saved: SavedSession) -> str:
        row = self._rows.get(saved.id)
        if row is None:
            row = self._rows[saved.id] = json.dumps(asdict(saved))
        return row

    def _text(self) -> tuple[int, str] | None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._dirty = False
        if self.path is None:
            return None
        rows = ",".join(self._row(s) for s in (*self._adoptable.values(), *self._saved.values()))
        return next(self._texts), f'{{"format": {FORMAT}, "sessions": [{rows}]}}'

    def _write(self) -> None:
        """Now, on this thread (start-up, shutdown, no loop)."""
        text = self._text()
        if text is not None:
            self._next_text = None  # older than this one
            self._to_file(text)

    def _write_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        text = self._text()
        if text is None:
            return
        self._next_text = text
        if not self._writing:
            self._writing = True
            loop.run_in_executor(None, self._drain)

    def _drain(self) -> None:
        """The worker thread: writes what waits until nothing does (newest text only)."""
        try:
            while (text := self._next_text) is not None:
                self._next_text = None
                self._to_file(text)
        finally:
            self._writing = False
            if self._next_text is not None:  # put there after the loop's last look
                self._writing = True
                self._drain()

    def _to_file(self, text: tuple[int, str]) -> None:
        assert self.path is not None
        number, content = text
        with self._file_lock:
            if number < self._in_file:
                return
            self._in_file = number
            with contextlib.suppress(OSError):
                write_private(self.path, content)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The loop this thread runs, or None (start-up, a test outside one): then writes are
    made at once, on this thread."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
