"""Timing figures: a nearest-rank percentile, and the p50/p95/p99/mean of a run of seconds (in ms)."""

import math
import statistics
from dataclasses import dataclass


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Stats:
    p50: float
    p95: float
    p99: float
    mean: float

    @classmethod
    def of(cls, seconds: list[float]) -> "Stats":
        ms = [s * 1000.0 for s in seconds]
        if len(ms) == 1:
            return cls(ms[0], ms[0], ms[0], ms[0])
        cuts = statistics.quantiles(ms, n=100, method="inclusive")
        return cls(cuts[49], cuts[94], cuts[98], statistics.fmean(ms))
