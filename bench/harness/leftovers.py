"""What a run leaves behind, said at its end: processes still alive after the trays'
SIGTERM (then swept), and the unhandled failures its logs tell of."""

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

from bench.harness.logs import trouble_in_file
from bench.harness.processes import tagged_by
from core.supervision.sweep import sweep_leftovers


def tell_leftovers(
    tray_pids: Sequence[int],
    bridge_pids: Iterable[int],
    logs: Sequence[Path],
    keep_logs: Path | None,
    *,
    after: str,
    trays: str,
    logs_named: str,
) -> None:
    """Print what is left ``after`` (the trays, the bridges, anything a tray of this run
    tagged), what ``sweep_leftovers`` ended, and the tracebacks in ``logs``, which go to
    ``keep_logs`` when it is given. ``trays`` and ``logs_named`` word the lines."""
    left = [f"tray pid {pid}" for pid in tray_pids if psutil.pid_exists(pid)]
    left += [f"bridge pid {pid}" for pid in bridge_pids if psutil.pid_exists(pid)]
    left += tagged_by(tray_pids)
    swept = sweep_leftovers()
    tagged_after = tagged_by(tray_pids)
    print(f"  left behind after {after}: {len(left)}")
    for line in left:
        print(f"    {line}")
    print(
        f"  sweep_leftovers() ended {len(swept)} process(es); "
        f"tagged by this run's {trays} afterwards: {len(tagged_after)}"
    )
    trouble = [line for path in logs for line in trouble_in_file(path)]
    print(f"  tracebacks in {logs_named}: {len(trouble)}")
    for line in trouble[:20]:
        print(f"    {line}")
    if keep_logs is not None:
        keep_logs.mkdir(parents=True, exist_ok=True)
        for path in logs:
            shutil.copy2(path, keep_logs / path.name)
        print(f"  logs kept in {keep_logs}")
