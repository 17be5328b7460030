"""What the abuse bench's parts share: its table rows, examples drawn from
hypothesis strategies by seed, and a log read from where the last look stopped.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

from pathlib import Path
from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from bench.harness.stats import percentile

T = TypeVar("T")


def row(label: str, values: list[float], scale: float = 1e3) -> str:
    if not values:
        return f"    {label:<46} {0:>6}         -         -         -"
    return (
        f"    {label:<46} {len(values):>6} {percentile(values, 0.50) * scale:>9.1f} "
        f"{percentile(values, 0.95) * scale:>9.1f} {max(values) * scale:>9.1f}"
    )


def header_row(unit: str = "ms") -> str:
    return f"    {'figure (' + unit + ')':<46} {'n':>6} {'p50':>9} {'p95':>9} {'max':>9}"


def generate(strategy: st.SearchStrategy[T], count: int, at_seed: int) -> list[T]:
    """``count`` examples of ``strategy`` (hypothesis' generate phase only; repeatable by seed)."""
    out: list[T] = []

    @seed(at_seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        out.append(value)

    collect()
    return out


class LogTail:
    """The tray's output file, read from where the last look stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> str:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return ""
        self.offset += len(data)
        return data.decode("utf-8", "replace")
