"""A server's log file read back as one timeline of mcp-tray's notes and the child's stderr.

Strategy: real files under tmp_path, written by the real LogSink (the
writer the supervisor uses) or by hand where a test needs a torn line or a
rotation; the follower is read back after each write, nothing sleeps.
"""

import os
from pathlib import Path

from core.supervision.logs import LogSink
from core.supervision.timeline import LogFollower, LogLine, parse_line, read_tail

NOTE = "2026-11-30 12:00:01 [mcp-tray] gen=2 state starting -> ready: handshake done"
STDERR = "2026-11-30 12:00:02 gen=2 echo: started pid 42"


def test_a_note_and_a_stderr_line_parse_apart() -> None:
    assert parse_line(NOTE) == LogLine(
        "2026-11-30 12:00:01", 2, True, "state starting -> ready: handshake done"
    )
    assert parse_line(STDERR) == LogLine("2026-11-30 12:00:02", 2, False, "echo: started pid 42")
    assert parse_line("not in the sink's format") == LogLine(
        "", None, False, "not in the sink's format"
    )


def test_display_lines_keep_their_columns() -> None:
    note, err = parse_line(NOTE).display(), parse_line(STDERR).display()
    assert note.startswith("2026-11-30 12:00:01  mcp-tray  gen 2   state starting")
    assert err.startswith("2026-11-30 12:00:02  stderr    gen 2   echo: started")


def test_the_real_log_sink_interleaves_notes_and_stderr_in_the_order_written(
    tmp_path: Path,
) -> None:
    sink = LogSink(tmp_path)
    sink.write("echo", "[mcp-tray] gen=1 generation 1 spawned: pid 7")
    sink.write("echo", "gen=1 echo: started pid 7")
    sink.write("echo", "[mcp-tray] gen=1 state starting -> ready: tools listed")
    sink.write("echo", "gen=1 echo: serving")
    sink.close()

    lines = read_tail(sink.path("echo"), 100)

    assert [(line.note, line.text) for line in lines] == [
        (True, "generation 1 spawned: pid 7"),
        (False, "echo: started pid 7"),
        (True, "state starting -> ready: tools listed"),
        (False, "echo: serving"),
    ]


def test_the_tail_is_the_last_lines_only_even_across_read_blocks(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_text(
        "".join(f"2026-11-30 12:00:00 gen=1 line {i:05d} {'x' * 80}\n" for i in range(3000))
    )
    lines = read_tail(path, 5)
    assert [line.text.split()[1] for line in lines] == ["02995", "02996", "02997", "02998", "02999"]


def test_the_follower_returns_only_what_was_appended_and_waits_for_a_torn_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "echo.log"
    path.write_text(NOTE + "\n")
    follower = LogFollower(path, 100)
    assert [line.note for line in follower.open()] == [True]
    assert follower.poll() == []

    with path.open("a") as handle:
        handle.write(STDERR + "\n2026-11-30 12:00:03 gen=2 half a li")
    assert [line.text for line in follower.poll()] == ["echo: started pid 42"]
    with path.open("a") as handle:
        handle.write("ne\n")
    assert [line.text for line in follower.poll()] == ["half a line"]
    follower.close()


def test_a_rotated_file_is_read_to_its_end_before_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "echo.log"
    path.write_text(NOTE + "\n")
    follower = LogFollower(path, 100)
    follower.open()
    with path.open("a") as handle:
        handle.write("2026-11-30 12:00:05 gen=2 last line of the old file\n")
    os.replace(path, tmp_path / "echo.log.1")
    path.write_text("2026-11-30 12:00:06 gen=2 first line of the new file\n")

    assert [line.text for line in follower.poll()] == [
        "last line of the old file",
        "first line of the new file",
    ]
    follower.close()


def test_a_file_that_does_not_exist_yet_is_picked_up_when_it_appears(tmp_path: Path) -> None:
    path = tmp_path / "late.log"
    follower = LogFollower(path, 100)
    assert follower.open() == []
    assert follower.poll() == []
    path.write_text(STDERR + "\n")
    assert [line.text for line in follower.poll()] == ["echo: started pid 42"]
    follower.close()
