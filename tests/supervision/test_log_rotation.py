"""A server's log rotates without losing a line, also where Windows refuses the rename.

Strategy: the real rotating handler over real files under tmp_path, with a
real ``LogFollower`` reading the log while it is written. What Linux does
not do, Windows' refusal to rename a file another handle holds (every
handle Python's ``open`` makes lacks FILE_SHARE_DELETE), is injected: a
``replace`` that raises the PermissionError Windows raises. Every line
written is then looked for, in order, across the log and its backups.
"""

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from core.supervision.logs import PrivateRotatingFileHandler
from core.supervision.timeline import LogFollower

LIMIT = 2000


class WindowsHeld:
    """``os.replace`` as Windows answers it for a file someone holds open."""

    def __init__(self, held: Callable[[str], bool] = lambda path: True) -> None:
        self.held = held
        self.calls = 0

    def __call__(self, source: str, dest: str) -> None:
        self.calls += 1
        if self.held(source) or self.held(dest):
            raise PermissionError(
                13, "The process cannot access the file because it is being used by another process"
            )
        os.replace(source, dest)


def write_lines(handler: logging.Handler, count: int, start: int = 0) -> list[str]:
    lines = [
        f"2026-12-02 07:00:00 gen=1 line {i:05d} {'x' * 40}" for i in range(start, start + count)
    ]
    for line in lines:
        handler.emit(logging.makeLogRecord({"msg": line}))
    return lines


def every_line(log: Path, backups: int) -> list[str]:
    """The log's lines and its backups', oldest first."""
    found: list[str] = []
    for i in range(backups, 0, -1):
        older = Path(f"{log}.{i}")
        if older.exists():
            found += older.read_text(encoding="utf-8").splitlines()
    return found + log.read_text(encoding="utf-8").splitlines()


def handler_for(log: Path, backups: int, replace: Callable[[str, str], None]) -> logging.Handler:
    handler = PrivateRotatingFileHandler(log, LIMIT, backups, replace=replace)
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


def test_a_refused_rename_rotates_by_copy_and_truncate_and_loses_no_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "echo.log"
    refuse = WindowsHeld()
    handler = handler_for(log, 100, refuse)
    # A reader holding the file all along, as the window's Logs tab does.
    follower = LogFollower(log, 1000)
    follower.open()
    written: list[str] = []
    seen: list[str] = []
    try:
        for batch in range(10):
            written += write_lines(handler, 30, start=30 * batch)
            seen += [line.text for line in follower.poll()]
    finally:
        handler.close()
        follower.close()
    assert every_line(log, 100) == written
    assert refuse.calls > 0, "the rename was tried first"
    assert log.stat().st_size < LIMIT and Path(f"{log}.1").exists(), "it rotated"
    assert "Logging error" not in capsys.readouterr().err
    # The follower read on after each truncation, up to the last line.
    assert seen[-1] == written[-1].split(" gen=1 ", 1)[1]


def test_where_rename_works_the_log_rotates_by_rename_as_before(tmp_path: Path) -> None:
    log = tmp_path / "echo.log"
    handler = handler_for(log, 100, os.replace)
    try:
        before = log.stat().st_ino
        written = write_lines(handler, 200)
    finally:
        handler.close()
    assert every_line(log, 100) == written
    # The first file went to .N by rename: its inode lives on under another name.
    backups = [Path(f"{log}.{i}") for i in range(1, 100)]
    assert before != log.stat().st_ino
    assert before in {b.stat().st_ino for b in backups if b.exists()}


def test_a_log_that_can_neither_rename_nor_copy_keeps_every_line_in_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "echo.log"
    # Its next name is a folder: the copy fails too (IsADirectoryError), for real.
    Path(f"{log}.1").mkdir()
    refuse = WindowsHeld()
    handler = handler_for(log, 3, refuse)
    try:
        written = write_lines(handler, 400)
    finally:
        handler.close()
    lines = log.read_text(encoding="utf-8").splitlines()
    notes = [line for line in lines if "[mcp-tray] this log cannot rotate" in line]
    assert [line for line in lines if line not in notes] == written
    assert notes and log.stat().st_size > LIMIT
    # Tried again a limit's worth later, not at every line.
    assert refuse.calls <= 2 * (log.stat().st_size // LIMIT + 1)
    assert "Logging error" not in capsys.readouterr().err
