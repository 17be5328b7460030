"""Saved sessions: bytes written per change with many sessions saved, and the start's read.

A real ``SessionStore`` on a real folder holds N saved sessions (rows as
the gateway writes them); then CHANGES changes are made one at a time, each
flushed at once (a session opened, then ended, alternately). Reported per
N: the bytes written to disk per change (journal lines plus the snapshots
compaction wrote, counted at the two writes), ms per change, and how long
the next tray's start takes to read, check and compact the files. Last,
the start on a hostile 100,000-row file (25 MB, moved aside unparsed).

Before the journal, every change rewrote the whole file (N rows, ~300
bytes each). Run: .venv/bin/python bench/saved_sessions.py
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.serving.sessions.session_file import SESSIONS_FILE, SessionFiles
from core.serving.sessions.session_rows import SavedSession
from core.serving.sessions.session_store import SessionStore


def row(number: int, now: float) -> dict[str, Any]:
    return {
        "id": f"{number:032x}",
        "server": "echo",
        "protocol_version": "2025-06-18",
        "kind": "http",
        "client_name": "claude-code",
        "capabilities": {"roots": {"listChanged": True}, "elicitation": {}},
        "client_info": {"name": "claude-code", "version": "2.0.14"},
        "subscriptions": [],
        "last_active": now - 10,
    }


class Counted(SessionFiles):
    """The real files, with the bytes each write puts on disk counted."""

    written = 0

    def compact(self, rows: Any) -> int:
        size = super().compact(rows)
        Counted.written += size
        return size

    def append(self, lines: Any) -> None:
        lines = list(lines)
        super().append(lines)
        Counted.written += sum(len(line) + 1 for line in lines)


def run(sessions: int, changes: int, folder: Path) -> dict[str, float]:
    now = time.time()
    path = folder / f"{sessions}" / SESSIONS_FILE
    path.parent.mkdir()
    path.write_text(json.dumps({"format": 2, "sessions": [row(n, now) for n in range(sessions)]}))
    store = SessionStore(path)
    store._files = Counted(path)
    store.load()
    Counted.written = 0
    began = time.perf_counter()
    for number in range(changes):
        key = f"new{number // 2}"
        if number % 2:
            store.drop(key)
        else:
            store.put(SavedSession(key, "echo", "2025-06-18", "http", "bench", last_active=now))
        store.flush()
    spent = time.perf_counter() - began
    began = time.perf_counter()
    SessionStore(path).load()
    return {
        "bytes_per_change": Counted.written / changes,
        "whole_file_bytes": path.stat().st_size,
        "ms_per_change": spent / changes * 1000,
        "start_ms": (time.perf_counter() - began) * 1000,
    }


def hostile_start(folder: Path) -> float:
    now = time.time()
    path = folder / "hostile" / SESSIONS_FILE
    path.parent.mkdir()
    path.write_text(json.dumps({"format": 2, "sessions": [row(n, now) for n in range(100_000)]}))
    began = time.perf_counter()
    SessionStore(path).load()
    return (time.perf_counter() - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for sessions in (100, 1000, 10_000):
            figures = run(sessions, args.changes, folder)
            print(
                f"{sessions:>6} sessions: {figures['bytes_per_change']:>8,.0f} bytes written per "
                f"change (the whole file: {figures['whole_file_bytes']:,}), "
                f"{figures['ms_per_change']:.2f} ms per change, next start "
                f"{figures['start_ms']:.0f} ms"
            )
        print(f"start on a hostile 100,000-row file: {hostile_start(folder):.0f} ms")
    print(f"reproduce: .venv/bin/python bench/saved_sessions.py --changes {args.changes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
