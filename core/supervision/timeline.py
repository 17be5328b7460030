"""A server's timeline: its log file read back, mcp-tray's notes and the child's stderr interleaved.

``core.supervision.logs`` writes both kinds of line to ``logs/<server>.log``
in the order they happened, one writer thread, each stamped:

    2026-11-30 12:00:01 [mcp-tray] gen=1 state starting -> ready: …   (a note)
    2026-11-30 12:00:01 gen=1 echo: started pid 4242                  (stderr)

so the file *is* the timeline. ``LogFollower`` reads its tail once, then
only what was appended since (``tail -F``: it keeps its handle, so the end of
a file that was rotated away is read before the new file). Blocking reads of
a local file, bounded by ``lines``; the window calls ``poll`` only while the
Logs tab shows.
"""

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

#: What ``ManagedServer.log`` puts before its notes.
NOTE_MARK: Final = "[mcp-tray]"
#: The source column of the display line.
NOTE_SOURCE: Final = "mcp-tray"
STDERR_SOURCE: Final = "stderr"
#: Bytes read backwards per step while looking for the tail's first line.
TAIL_BLOCK_BYTES: Final = 8192

_LINE: Final = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) "
    r"(?P<note>\[mcp-tray\] )?"
    r"(?:gen=(?P<gen>\d+) )?"
    r"(?P<text>.*)$",
    re.DOTALL,
)


@dataclass(frozen=True)
class LogLine:
    #: ``YYYY-mm-dd HH:MM:SS`` as written, "" for a line not in the sink's format.
    stamp: str
    generation: int | None
    #: True for mcp-tray's own notes, False for the child's stderr.
    note: bool
    text: str

    @property
    def source(self) -> str:
        return NOTE_SOURCE if self.note else STDERR_SOURCE

    def display(self) -> str:
        """One line: stamp, source, generation, text, in fixed columns."""
        generation = "" if self.generation is None else f"gen {self.generation}"
        return f"{self.stamp:<19}  {self.source:<8}  {generation:<6}  {self.text}"


def parse_line(raw: str) -> LogLine:
    match = _LINE.match(raw)
    if match is None:
        return LogLine("", None, False, raw)
    gen = match.group("gen")
    return LogLine(
        match.group("stamp"),
        int(gen) if gen is not None else None,
        match.group("note") is not None,
        match.group("text"),
    )


class LogFollower:
    """The tail of one log file, then whatever is appended to it."""

    def __init__(self, path: Path, lines: int) -> None:
        self.path = path
        self.lines = lines
        self._handle: IO[bytes] | None = None
        self._inode: int | None = None
        #: The end of a line whose newline has not been written yet.
        self._pending = b""

    def open(self) -> list[LogLine]:
        """The last ``lines`` lines (empty when the file does not exist yet)."""
        self.close()
        if not self._open_current():
            return []
        assert self._handle is not None
        size = os.fstat(self._handle.fileno()).st_size
        data = b""
        start = size
        while start > 0 and data.count(b"\n") <= self.lines:
            step = min(TAIL_BLOCK_BYTES, start)
            start -= step
            self._handle.seek(start)
            data = self._handle.read(step) + data
        self._handle.seek(size)
        return self._split(data, drop_first=start > 0)

    def poll(self) -> list[LogLine]:
        """Lines appended since the last call (the new file's too, after a rotation)."""
        if self._handle is None:
            return self._split(self._read_new_file()) if self._open_current() else []
        data = self._handle.read()
        if self._rotated():
            data += self._read_new_file() if self._open_current() else b""
        return self._split(data)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None
        self._inode = None
        self._pending = b""

    # ------------------------------------------------------------ internals

    def _open_current(self) -> bool:
        if self._handle is not None:
            self._handle.close()
        try:
            self._handle = self.path.open("rb")
        except OSError:
            self._handle = None
            self._inode = None
            return False
        self._inode = os.fstat(self._handle.fileno()).st_ino
        return True

    def _read_new_file(self) -> bytes:
        assert self._handle is not None
        return self._handle.read()

    def _rotated(self) -> bool:
        """The path names another file now (rotated), or ours shrank (truncated)."""
        assert self._handle is not None
        try:
            stat = self.path.stat()
        except OSError:
            return False
        if stat.st_ino != self._inode:
            return True
        if stat.st_size < self._handle.tell():
            # Truncated in place: start again from its beginning.
            self._handle.seek(0)
            self._pending = b""
        return False

    def _split(self, data: bytes, *, drop_first: bool = False) -> list[LogLine]:
        """Complete lines of ``data`` (after what was pending), the last ``lines`` of them.

        ``drop_first``: ``data`` starts mid-file, so its first line is a fragment.
        """
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        if drop_first and lines:
            lines.pop(0)
        if self.lines <= 0:
            return []
        return [
            parse_line(line.decode("utf-8", errors="replace").rstrip("\r"))
            for line in lines[-self.lines :]
        ]


def read_tail(path: Path, lines: int) -> list[LogLine]:
    """The last ``lines`` lines of a log file, parsed (for one-shot readers)."""
    follower = LogFollower(path, lines)
    with contextlib.closing(follower):
        return follower.open()
