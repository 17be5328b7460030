"""Circuit breakers: one per server (transport failures) and one per client session.

Both count *consecutive* failures on an injected clock. The server breaker
re-admits one probe after its cooldown (half-open); the session breaker stays
tripped until the user resets it (docs/design.md §3.4, 3.5).
"""

from dataclasses import dataclass
from typing import Final

from core.base.clock import Clock
from core.base.states import BreakerState

#: Consecutive transport failures that open a server's breaker.
SERVER_BREAKER_THRESHOLD: Final = 3
#: How long an open server breaker fails calls fast before one probe.
SERVER_BREAKER_COOLDOWN_SECONDS: Final = 60.0
#: Consecutive non-retryable failures that trip a client session.
SESSION_BREAKER_THRESHOLD: Final = 3


@dataclass(frozen=True)
class Admission:
    """Whether a call may go through, and whether it is the half-open probe."""

    allowed: bool
    probe: bool = False
    retry_in: float = 0.0


class ServerBreaker:
    def __init__(
        self,
        clock: Clock,
        *,
        threshold: int = SERVER_BREAKER_THRESHOLD,
        cooldown: float = SERVER_BREAKER_COOLDOWN_SECONDS,
    ) -> None:
        self._clock = clock
        self.threshold = threshold
        self.cooldown = cooldown
        self.failures = 0
        self.last_error = ""
        self._opened_at: float | None = None
        self._probe_in_flight = False
        self._last_incident: int | None = None

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock.monotonic() - self._opened_at < self.cooldown:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def retry_in(self) -> float:
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self.cooldown - self._clock.monotonic())

    def admit(self) -> Admission:
        state = self.state
        if state is BreakerState.CLOSED:
            return Admission(True)
        if state is BreakerState.HALF_OPEN and not self._probe_in_flight:
            self._probe_in_flight = True
            return Admission(True, probe=True)
        # Open, or half-open with its one probe already out.
        return Admission(False, retry_in=self.retry_in())

    def success(self) -> None:
        """The server answered (a tool result with isError counts: the server is healthy)."""
        self.failures = 0
        self._opened_at = None
        self._probe_in_flight = False

    def failure(self, error: str, incident: int | None = None) -> bool:
        """A transport-level failure. True when this call opened (or re-opened) the breaker.

        ``incident`` names the failure's cause (the generation that died): one
        child death that cut four calls in flight is one failure, not four,
        or a single crash would open the breaker at once.
        """
        if incident is not None and incident == self._last_incident:
            self._probe_in_flight = False
            return False
        self._last_incident = incident
        self.failures += 1
        self.last_error = error
        was_probe = self._probe_in_flight
        self._probe_in_flight = False
        if was_probe or (self._opened_at is None and self.failures >= self.threshold):
            self._opened_at = self._clock.monotonic()
            return True
        return False

    def neutral(self) -> None:
        """An outcome that says nothing about the transport (a real timeout, a refusal).

        A probe that ends this way proves nothing, so the breaker stays
        half-open for the next call instead of closing.
        """
        self._probe_in_flight = False

    def reset(self) -> None:
        """A person replaced the child (respawn): what the breaker counted is history."""
        self.success()
        self.last_error = ""


class SessionBreaker:
    """Consecutive non-retryable failures of one client session."""

    def __init__(self, threshold: int = SESSION_BREAKER_THRESHOLD) -> None:
        self.threshold = threshold
        self.consecutive_failures = 0

    @property
    def tripped(self) -> bool:
        return self.consecutive_failures >= self.threshold

    def success(self) -> None:
        self.consecutive_failures = 0

    def failure(self) -> bool:
        """Count one; True when this failure tripped the session."""
        was = self.tripped
        self.consecutive_failures += 1
        return self.tripped and not was

    def reset(self) -> None:
        self.consecutive_failures = 0
