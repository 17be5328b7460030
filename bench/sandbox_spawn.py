"""What a sandbox costs at each start: the Landlock launcher, and planning the grants.

Starts ``--runs`` times (default 40) a program that exits at once
(``/bin/true``) directly and through mcp-tray's launcher
(``python -I -S core/platform/landlock.py SPEC -- /bin/true``, SPEC as the
tray plans it for a Python server with ``"read": "system"`` and network
off), and times the planning itself (``Containment.grants``: listing the
home, stat-ing every path). Printed: median and 90th percentile per start,
in ms, beside a bare ``python -I -S -c pass`` (the launcher's interpreter
start, most of its cost). Figures are reported, not asserted. Linux with Landlock only.
Run: .venv/bin/python bench/sandbox_spawn.py [--runs 40]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.records import Row, record
from core.platform import sandboxing
from core.settings.config import ServerConfig
from core.settings.config_model import SandboxConfig
from core.supervision.containment import Containment

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "/bin/true"


def timed(argv: list[str], runs: int) -> list[float]:
    spent = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True)
        spent.append((time.perf_counter() - started) * 1000)
    return spent


def p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    support = sandboxing.probe()
    if support.kind != "landlock":
        sys.exit(f"nothing to measure: {support.missing or support.kind}")
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        containment = Containment(Path(tmp) / "state" / "servers")
        config = ServerConfig(
            "bench",
            sys.executable,
            (str(ROOT / "tests" / "servers" / "contained.py"),),
            sandbox=SandboxConfig(network=False),
        )
        state = containment.state_dir("bench")
        state.mkdir(parents=True)
        plans = []
        for _ in range(args.runs):
            started = time.perf_counter()
            grants = containment.grants(
                config, config.sandbox or SandboxConfig(), sys.executable, state, []
            )
            plans.append((time.perf_counter() - started) * 1000)
        wrapped = sandboxing.launch_argv(support, grants, [PROGRAM])
        timed([PROGRAM], 3)  # warm the page cache for both
        timed(wrapped, 3)
        direct = timed([PROGRAM], args.runs)
        sandboxed = timed(wrapped, args.runs)
        # What of that is the interpreter's own start (the launcher is Python).
        bare = timed([sys.executable, "-I", "-S", "-c", "pass"], args.runs)
    print(
        f"{support.label()}, {len(grants.read)} read / {len(grants.write)} write grants, {args.runs} runs"
    )
    for label, values in (
        ("direct exec", direct),
        ("through the launcher", sandboxed),
        ("python -I -S, bare", bare),
        ("planning the grants", plans),
    ):
        print(
            f"  {label:<22} median {statistics.median(values):6.1f} ms   p90 {p90(values):6.1f} ms"
        )
    added = statistics.median(sandboxed) - statistics.median(direct)
    print(f"  the sandbox adds {added:.1f} ms per start (plus planning)")
    command = f".venv/bin/python bench/sandbox_spawn.py --runs {args.runs}"
    print(f"command: {command}")
    figures = {
        "added_ms": added,
        "planning_ms": statistics.median(plans),
        "bare_python_ms": statistics.median(bare),
    }
    row = Row(
        "a sandboxed server's start, over a direct exec (Landlock launcher)",
        "an extra Python start",
        "+{added_ms:.1f} ms median, plus {planning_ms:.1f} ms planning "
        "(a bare python -I -S: {bare_python_ms:.1f} ms)",
    )
    record("sandbox_spawn", command, figures, [row])


if __name__ == "__main__":
    main()
