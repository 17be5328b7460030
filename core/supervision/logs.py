"""Per-server log files, written off the event loop.

Each server gets ``logs/<server>.log`` (rotated at ``LOG_MAX_BYTES``, keeping
``LOG_BACKUPS`` old files) holding its children's stderr and mcp-tray's own
lines about it (spawns, exits, parks). Writes go through one queue to one
thread so a slow disk never stalls the event loop.
"""

import contextlib
import logging
import logging.handlers
import queue
import threading
import time
from pathlib import Path
from typing import Any, Final

from core.platform.files import open_private, private_dirs

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
    stderr may hold what its env held)."""

    def _open(self) -> Any:
        return open_private(Path(self.baseFilename), self.mode, self.encoding or "utf-8")


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
