"""What bench/restart.py, bench/killstorm.py and bench/abuse.py share: a headless
tray as a subprocess on a private home, the processes it leaves, the figures.

Imported as ``harness`` (the benches run as scripts, so their folder is on
sys.path); nothing here measures anything by itself.
"""

import asyncio
import contextlib
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, Final

import psutil
from mcp.types import TextContent

from core.platform import procs
from core.supervision.sweep import owner_of

ROOT: Final = Path(__file__).resolve().parents[1]
#: What marks an unhandled failure in a log.
TROUBLE: Final = ("Traceback (most recent call last)", "Task exception was never retrieved")
#: The token stays in the private home's file, never in the user's OS keyring.
KEYRING_BACKEND: Final = "keyring.backends.fail.Keyring"


class BenchAborted(Exception):
    pass


def tray_env(home: Path) -> dict[str, str]:
    """The caller's environment without MCP_TRAY_*, on the private home and this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
    env["MCP_TRAY_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND
    # The benches start and stop their trays themselves: a bridge never starts one.
    env["MCP_TRAY_AUTOSTART"] = "0"
    return env


async def spawn_tray(
    config: Path, home: Path, log: IO[bytes], preexec: Callable[[], None] | None = None
) -> asyncio.subprocess.Process:
    """``mcp-tray run --headless --config CONFIG`` on ``home``, its output into ``log``;
    ``preexec`` runs in the child before it starts (a POSIX limit, say)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        "run",
        "--headless",
        "--config",
        str(config),
        env=tray_env(home),
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        # Its own process group: a last-resort kill reaches only what it started.
        start_new_session=True,
        preexec_fn=preexec,
    )


def server_entry(status: dict[str, Any], name: str) -> dict[str, Any]:
    """Server ``name``'s row of ``status --json`` (empty when it has none)."""
    return next((s for s in status.get("servers", []) if s.get("name") == name), {})


def children_running(tray_pid: int, script: Path) -> list[int]:
    """The tray's processes running ``script`` (its children, or theirs)."""
    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(tray_pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if str(script) in child.cmdline():
                    found.append(child.pid)
    return found


def bridge_pids() -> list[int]:
    """The bridges this bench's SDK clients started (children of this process)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmdline = child.cmdline()
            if "core.cli.main" in cmdline and "connect" in cmdline:
                found.append(child.pid)
    return found


def tagged_by(tray_pids: Iterable[int], skip: int | None = None) -> list[str]:
    """Live processes tagged (MCP_TRAY_OWNER) by one of these trays, except by ``skip``."""
    owners = set(tray_pids) - {skip}

    def ours(tag: str) -> bool:
        pid = owner_of(tag).split("-", 1)[0]
        return pid.isdigit() and int(pid) in owners

    return [
        f"pid {proc.pid} (tray {owner_of(tag)}): {procs.cmdline(proc)[:160]}"
        for proc, tag in procs.tagged(ours)
    ]


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


def result_text(result: object) -> str:
    content = getattr(result, "content", None) or []
    return "".join(block.text for block in content if isinstance(block, TextContent))


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def shape(message: str, *, paths: bool = False) -> str:
    """A message with its numbers (ports, pids, seconds) folded, and with ``paths``
    its file paths too, to group alike messages."""
    if paths:
        message = re.sub(r"/[^\s:]+", "FILE", message)
    return re.sub(r"\d+(\.\d+)?", "N", message)
