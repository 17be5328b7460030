"""What a tray's log tells: the unhandled failures in it, and messages folded to their shape."""

import re
from pathlib import Path
from typing import Final

#: What marks an unhandled failure in a log.
TROUBLE: Final = ("Traceback (most recent call last)", "Task exception was never retrieved")


def trouble_in(text: str, where: str) -> list[str]:
    """The unhandled failures a log tells of: each traceback's last line."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if any(mark in line for mark in TROUBLE):
            # The exception line: the first unindented line after the traceback's frames.
            tail = next(
                (
                    later.strip()
                    for later in lines[index + 1 : index + 200]
                    if later and not later.startswith((" ", "\t", "Traceback"))
                ),
                line.strip(),
            )
            found.append(f"{where}:{index + 1}: {tail[:200]}")
    return found


def trouble_in_file(path: Path) -> list[str]:
    """``trouble_in`` of a log file (none when it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return trouble_in(text, path.name)


def shape(message: str, *, paths: bool = False) -> str:
    """A message with its numbers (ports, pids, seconds) folded, and with ``paths``
    its file paths too, to group alike messages."""
    if paths:
        message = re.sub(r"/[^\s:]+", "FILE", message)
    return re.sub(r"\d+(\.\d+)?", "N", message)
