"""The saved sessions on disk: a snapshot, a journal of the changes since, and both read as hostile.

Two files in the state folder, 0600:

- ``http-sessions.json``, the snapshot: ``{"format": 2, "sessions": [ROW, ...]}``
  (format 1, the older tray's whole-file rewrite, is the same shape);
- ``http-sessions.journal``, one JSON object a line, each change since the
  snapshot, in order: ``{"put": ROW}``, ``{"drop": ID}``, ``{"touch": ID, "at": SECONDS}``.

A change appends its line, so a change of one session among 10,000 writes
that one row, not the 3 MB of all of them. When the journal has grown past
the snapshot, the two are compacted: the snapshot is written whole and the
journal emptied, so what is written stays within a small multiple of what
changed. Each change is a plain assignment, so replaying a journal that a
crash left behind a newer snapshot ends in the same state.

Both are read with the hardened reader (core.settings.filereader): a FIFO,
a device, a socket or a symbolic link is refused without being opened, at
most ``SNAPSHOT_LIMIT`` / ``JOURNAL_LIMIT`` bytes are read, nesting past
the parser's recursion is refused (each row's fields are bounded on their
own: core.serving.sessions.session_rows). A file that cannot be used as a whole is moved aside
(``NAME.bad``) with a warning, and the tray starts without it; a journal
line that cannot be used is skipped with a warning naming its line. Writes
never go through a link: the snapshot (and the emptied journal) are new
files put in place with ``os.replace``, which replaces a link itself, and
appends open the journal with ``O_NOFOLLOW``.
"""

import contextlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.base.errors import ConfigError
from core.platform.files import PRIVATE_FILE_MODE, private_dirs, write_private
from core.settings.filereader import Role, parse_json, read_text

#: The snapshot, in the state folder.
SESSIONS_FILE: Final = "http-sessions.json"
#: The journal, beside it.
JOURNAL_FILE: Final = "http-sessions.journal"
#: What a file that cannot be used is renamed to (its name plus this).
ASIDE_SUFFIX: Final = ".bad"
#: The snapshot's format, so a later mcp-tray can tell what it reads.
FORMAT: Final = 2
#: The formats this mcp-tray reads (1: the same shape, without a journal).
READABLE_FORMATS: Final = (1, 2)
#: The most bytes a snapshot may hold (the store keeps its rows within it).
SNAPSHOT_LIMIT: Final = 16 * 1024 * 1024
#: The journal is compacted once it outgrows the snapshot: at most about twice as much.
JOURNAL_LIMIT: Final = 2 * SNAPSHOT_LIMIT + 1024 * 1024

_FIX: Final = "nothing: mcp-tray moved it aside; its sessions' clients open new ones"
_OPEN_APPEND: Final = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    # A FIFO put there: the open fails (ENXIO) instead of waiting for a reader.
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def _role(limit: int) -> Role:
    return Role(
        limit=limit,
        noun="its saved sessions",
        expected="the file mcp-tray writes",
        kind="a saved-sessions file",
        missing_fix=None,
        too_big_fix=_FIX,
        encoding_fix=_FIX,
        follow_symlinks=False,
        syntax_fix=_FIX,
    )


SNAPSHOT_ROLE: Final = _role(SNAPSHOT_LIMIT)
JOURNAL_ROLE: Final = _role(JOURNAL_LIMIT)


@dataclass
class Found:
    """What the files hold: each session's last row (not checked yet), and what was wrong."""

    #: By session id: where the row came from ("row 3", "journal line 12") and the row.
    rows: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: One line per problem, for the log and the Warnings tab.
    warnings: list[str] = field(default_factory=list)
    #: Lines of the journal that could not be used (counted, the first few in ``warnings``).
    skipped_lines: int = 0


class SessionFiles:
    """The snapshot and the journal of one state folder."""

    def __init__(self, snapshot: Path) -> None:
        self.snapshot = snapshot
        self.journal = snapshot.with_name(JOURNAL_FILE)

    # ------------------------------------------------------------ reading

    def read(self) -> Found:
        """Both files replayed into each session's last row; what cannot be used is moved aside."""
        found = Found()
        document = self._read(self.snapshot, SNAPSHOT_ROLE, found, whole=True)
        if document is not None:
            self._snapshot_rows(document, found)
        text = self._read(self.journal, JOURNAL_ROLE, found, whole=False)
        if isinstance(text, str):
            self._replay(text, found)
        if found.skipped_lines > 1:
            found.warnings.append(
                f"{self.journal}: {found.skipped_lines} lines could not be used and were skipped"
            )
        return found

    def _read(self, path: Path, role: Role, found: Found, *, whole: bool) -> Any:
        try:
            text = read_text(path, role)
            if text is None or not whole:
                return text
            document = parse_json(text, path, role)
            if not isinstance(document, dict) or not isinstance(document.get("sessions"), list):
                raise ConfigError(path, "this is not a saved-sessions file", fix=_FIX)
            if document.get("format") not in READABLE_FORMATS:
                raise ConfigError(
                    path,
                    f"its format {document.get('format')!r} is not one this mcp-tray reads",
                    fix=_FIX,
                )
            return document
        except ConfigError as exc:
            found.warnings.append(self._move_aside(path, exc))
            return None

    def _move_aside(self, path: Path, exc: ConfigError) -> str:
        where = str(path) if exc.line is None else f"{path}:{exc.line}"
        aside = path.with_name(path.name + ASIDE_SUFFIX)
        try:
            # rename moves a link or a FIFO itself, never what it points at.
            os.replace(path, aside)
        except OSError as error:
            return (
                f"{where}: {exc.problem}; it could not be moved aside ({error.strerror}), so "
                f"sessions are not kept for the next mcp-tray. Fix: remove {path}"
            )
        return (
            f"{where}: {exc.problem}; moved aside to {aside.name} and started without it "
            "(its sessions' clients open new ones)"
        )

    def _snapshot_rows(self, document: dict[str, Any], found: Found) -> None:
        for number, raw in enumerate(document["sessions"], 1):
            key = raw.get("id") if isinstance(raw, dict) else None
            if isinstance(key, str):
                found.rows[key] = (f"{self.snapshot} row {number}", raw)
            else:
                found.warnings.append(f"{self.snapshot} row {number}: has no string 'id'; dropped")

    def _replay(self, text: str, found: Found) -> None:
        lines = text.split("\n")
        # A last line without its newline: an append a crash cut short.
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{self.journal}:{number}"
            try:
                if number == len(lines):
                    raise ConfigError(self.journal, "the line is cut short", fix=_FIX, line=number)
                change = parse_json(line, self.journal, JOURNAL_ROLE, line=number)
                self._apply(change, where, found)
            except ConfigError as exc:
                found.skipped_lines += 1
                if found.skipped_lines == 1:
                    found.warnings.append(f"{where}: {exc.problem}; the line was skipped")

    def _apply(self, change: Any, where: str, found: Found) -> None:
        if isinstance(change, dict) and isinstance(row := change.get("put"), dict):
            if isinstance(key := row.get("id"), str):
                found.rows[key] = (where, row)
                return
        elif isinstance(change, dict) and isinstance(key := change.get("drop"), str):
            found.rows.pop(key, None)
            return
        elif isinstance(change, dict) and isinstance(key := change.get("touch"), str):
            at = change.get("at")
            if isinstance(at, int | float) and not isinstance(at, bool):
                if key in found.rows:
                    origin, row = found.rows[key]
                    found.rows[key] = (origin, {**row, "last_active": at})
                return
        raise ConfigError(
            self.journal, "this is not a change mcp-tray writes (put, drop or touch)", fix=_FIX
        )

    # ------------------------------------------------------------ writing

    def compact(self, rows: Iterable[str]) -> int:
        """The snapshot written whole with ``rows`` (JSON each), the journal emptied; its size."""
        text = f'{{"format": {FORMAT}, "sessions": [{",".join(rows)}]}}'
        write_private(self.snapshot, text)
        write_private(self.journal, "")
        return len(text)

    def append(self, lines: Iterable[str]) -> None:
        """Changes at the journal's end (``OSError`` when it cannot be, e.g. a link put there)."""
        data = "".join(f"{line}\n" for line in lines).encode()
        private_dirs(self.journal.parent)
        fd = os.open(self.journal, _OPEN_APPEND, PRIVATE_FILE_MODE)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{self.journal} is not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
