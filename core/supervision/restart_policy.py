"""When to respawn a dead child, and when to stop trying.

Kept apart from the process code (circus keeps its flapping policy in its
own plugin the same way): the run loop reports how each run ended and asks
how long to wait; nothing here touches a process or the event loop.
"""

import random
from dataclasses import dataclass, field
from typing import Final

#: More consecutive unproven runs than this parks the server (docs/design.md §3.2).
RAPID_DROP_LIMIT: Final = 5
#: Automatic respawns wait this long after the first unproven drop...
BACKOFF_INITIAL_SECONDS: Final = 1.0
#: ...doubling each time, but never longer than this...
BACKOFF_CAP_SECONDS: Final = 60.0
#: ...give or take this fraction, so many servers dying together (a sleep,
#: a network drop) do not respawn in lockstep.
BACKOFF_JITTER: Final = 0.2


class RapidDropBudget:
    """Counts consecutive runs that ended before they were proven."""

    def __init__(self, limit: int = RAPID_DROP_LIMIT) -> None:
        self.limit = limit
        self.unproven = 0

    def proven(self) -> None:
        """A run served a request or outlived the keepalive: the count starts over."""
        self.unproven = 0

    def dropped(self) -> bool:
        """An unproven run ended. True when the budget is spent (park the server)."""
        self.unproven += 1
        return self.unproven > self.limit

    def grant_one(self) -> None:
        """After an un-park: one more unproven drop re-parks."""
        self.unproven = self.limit


@dataclass
class Backoff:
    initial: float = BACKOFF_INITIAL_SECONDS
    cap: float = BACKOFF_CAP_SECONDS
    jitter: float = BACKOFF_JITTER
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, consecutive_drops: int) -> float:
        """Wait before respawn number ``consecutive_drops`` (1 for the first)."""
        attempt = max(1, consecutive_drops)
        base = self.initial * 2.0 ** min(attempt - 1, 32)
        spread = 1.0 + self.rng.uniform(-self.jitter, self.jitter)
        return min(self.cap, base * spread)
