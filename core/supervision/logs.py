"""Per-server log files, written off the event loop.

Each server gets ``logs/<server>.log`` (rotated at ``LOG_MAX_BYTES``, keeping
``LOG_BACKUPS`` old files) holding its children's stderr and mcp-tray's own
lines about it (spawns, exits, parks). Writes go through one queue to one
thread so a slow disk never stalls the event loop.
"""

import contextlib
import logging
import logging.handlers
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from core.platform.files import copy_private, open_private, private_dirs

#: Rotate a server's log at this size; stderr floods must not fill the disk.
LOG_MAX_BYTES: Final = 2 * 1024 * 1024
LOG_BACKUPS: Final = 3
#: At close, how long the writer thread gets to flush what is queued.
WRITER_JOIN_SECONDS: Final = 5.0

_STOP: Final = object()
#: Queued after a server's last lines: its file is closed once they are written.
_RELEASE: Final = "\0release"


class LogSink:
    """Append lines to per-server rotating files from any thread, in order."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._queue: queue.SimpleQueue[tuple[str, str] | object] = queue.SimpleQueue()
        self._handlers: dict[str, logging.handlers.RotatingFileHandler] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def path(self, server: str) -> Path:
        return self._log_dir / f"{server}.log"

    def write(self, server: str, line: str) -> None:
        if self._closed:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self._queue.put((server, f"{stamp} {line}"))
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._drain, name="mcp-tray-logs", daemon=True
                    )
                    self._thread.start()

    def release(self, server: str) -> None:
        """``server`` is gone (a child made for a session or workspace): its file is
        closed once the lines queued before this are written. A line that comes later
        (its last words, or a new child of that name) opens it again."""
        if not self._closed:
            self._queue.put((server, _RELEASE))

    def open_files(self) -> int:
        """How many servers' files are open now (what ``release`` gives back)."""
        return len(self._handlers)

    def close(self) -> None:
        """Flush everything queued, then close the files."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout=WRITER_JOIN_SECONDS)
        for handler in self._handlers.values():
            handler.close()
        self._handlers.clear()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            assert isinstance(item, tuple)
            server, line = item
            if line is _RELEASE:
                handler = self._handlers.pop(server, None)
                if handler is not None:
                    handler.close()
                continue
            # A full or read-only disk loses log lines, never the server.
            with contextlib.suppress(OSError):
                self._handler(server).emit(logging.makeLogRecord({"msg": line}))

    def _handler(self, server: str) -> logging.handlers.RotatingFileHandler:
        handler = self._handlers.get(server)
        if handler is None:
            private_dirs(self._log_dir)
            handler = PrivateRotatingFileHandler(
                self.path(server), maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
            )
            handler.setFormatter(logging.Formatter("%(message)s"))
            self._handlers[server] = handler
        return handler


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A server's log, and each file it rotates to, 0600 whatever the umask (a server's
    stderr may hold what its env held), rotated without ever losing a line.

    Rotation renames first, as the standard handler does. Windows refuses to
    rename a file that another handle holds without ``FILE_SHARE_DELETE``,
    which is every handle Python's ``open`` makes: the window's log follower,
    an editor, ``Get-Content -Wait``, a virus scan. The standard handler then
    prints "Logging error" and drops every line after the limit. Here a
    refused rename (PermissionError) copies the file over its next name and
    empties it in place, which those readers allow (they share writing); the
    log follower sees the truncation and reads on from the start. Should even
    that fail, the lines stay in the one file (it grows past the limit, one
    note says so) and rotation is tried again only a limit's worth later.
    """

    def __init__(
        self,
        filename: Path,
        maxBytes: int,
        backupCount: int,
        encoding: str = "utf-8",
        replace: Callable[[str, str], None] = os.replace,
    ) -> None:
        self._replace = replace
        #: After a rotation that failed, the size below which it is not tried again.
        self._retry_at = 0
        super().__init__(filename, maxBytes=maxBytes, backupCount=backupCount, encoding=encoding)

    def _open(self) -> Any:
        return open_private(Path(self.baseFilename), self.mode, self.encoding or "utf-8")

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        if not super().shouldRollover(record):
            return False
        assert self.stream is not None
        return bool(self.stream.tell() >= self._retry_at)

    def doRollover(self) -> None:
        if self.stream:
            self.stream.close()
            self.stream = None
        base = self.baseFilename
        problem: OSError | None = None
        try:
            for i in range(self.backupCount - 1, 0, -1):
                self._move(
                    self.rotation_filename(f"{base}.{i}"), self.rotation_filename(f"{base}.{i + 1}")
                )
            if self.backupCount > 0:
                self._move(base, self.rotation_filename(f"{base}.1"))
        except OSError as exc:
            problem = exc
        self.stream = self._open()
        if problem is not None:
            self.stream.seek(0, 2)
            self._retry_at = self.stream.tell() + self.maxBytes
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            self.stream.write(
                f"{stamp} [mcp-tray] this log cannot rotate ({problem}): it grows past "
                f"{self.maxBytes} bytes, every line kept, until it can\n"
            )
            self.stream.flush()
        else:
            self._retry_at = 0

    def _move(self, source: str, dest: str) -> None:
        if not os.path.exists(source):
            return
        try:
            self._replace(source, dest)
        except PermissionError:
            # Held open without FILE_SHARE_DELETE (Windows): copy, then empty in place.
            copy_private(Path(source), Path(dest))
            os.truncate(source, 0)


def tail(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a log file (empty when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            block = 8192
            data = b""
            while size > 0 and data.count(b"\n") <= lines:
                step = min(block, size)
                size -= step
                handle.seek(size)
                data = handle.read(step) + data
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    return text[-lines:] if lines > 0 else []
