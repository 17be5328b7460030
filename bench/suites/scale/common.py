"""What both sections of the scale bench share: the tray on a chosen loop and
child, its process's CPU, and the figures' formatting.
"""

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psutil

from bench.harness.stats import percentile
from bench.harness.tray import Tray
from bench.suites.scale.constants import CHILDREN, LOOP_SETUP, RUN_CLI
from core.settings.paths import default_paths


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def registry_rows(home: Path) -> int:
    """Rows in the tray's worker registry, read without writing (a write would be news to it)."""
    path = default_paths({"MCP_TRAY_HOME": str(home)}).registry_file
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM workers").fetchone()[0])


#: The label of a tray running the ``--baseline`` checkout's code.
BASELINE_SUFFIX: Final = "@base"


#: A tray with the call journal off (``--journal off``): the same code, its journal never
#: opened, so no call is recorded (core.serving.observe.call_journal opens no watch without a writer).
JOURNAL_OFF: Final = (
    "import core.serving.service as _service; "
    "_service.TrayService._open_journal = lambda self, loop: None; "
)
#: The label of a tray whose journal is off.
JOURNAL_OFF_SUFFIX: Final = "/journal-off"


def runner(
    loop: str, baseline: Path | None, profile: Path | None = None, journal: bool = True
) -> tuple[str, ...]:
    """The interpreter arguments of a tray on ``loop``; with ``baseline``, running that
    checkout's ``core`` (first on sys.path, ahead of this venv's editable install); with
    ``profile``, under cProfile timed by the main thread's CPU clock (the tray serves on its
    main thread; a wall clock would charge the profile with the time the tray was not
    scheduled), its stats written there at exit."""
    code = LOOP_SETUP[loop] + ("" if journal else JOURNAL_OFF)
    if baseline is not None:
        code = f"import sys; sys.path.insert(0, {str(baseline)!r}); " + code
    if profile is None:
        return ("-c", code + RUN_CLI)
    return (
        "-c",
        code
        + "import cProfile, time\n"
        + "profiler = cProfile.Profile(time.thread_time)\n"
        + "profiler.enable()\n"
        + f"try:\n    {RUN_CLI}\n"
        + f"finally:\n    profiler.disable(); profiler.dump_stats({str(profile)!r})\n",
    )


@contextlib.contextmanager
def running_tray(
    home: Path,
    loop: str,
    child: str,
    baseline: Path | None = None,
    profile: Path | None = None,
    journal: bool = True,
) -> Iterator[Tray]:
    tray = Tray(home, None, runner(loop, baseline, profile, journal), CHILDREN[child])
    try:
        tray.start()
        tray.wait_ready()
        yield tray
    except BaseException:
        tray.stop()
        print(f"bench: tray output (tail):\n{tray.output()}", file=sys.stderr)
        raise
    finally:
        code = tray.stop()
        if code not in (0, None):
            print(f"  note: the {loop} tray exited with {code} on SIGTERM (expected 0)")


def tray_process(tray: Tray) -> psutil.Process:
    assert tray.process is not None
    return psutil.Process(tray.process.pid)


def as_ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def p_or_nan(values: list[float], share: float) -> float:
    return percentile(values, share) if values else float("nan")
