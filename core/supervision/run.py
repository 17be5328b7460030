"""One generation of a server (``Run``) and every wait of a server's life (``Timing``).

Who decides what about a run:

- the **run loop** (``ManagedServer._run_once`` and what it calls) is the
  only writer: it creates the ``Run``, attaches the child and the upstream
  session, sets ``ready`` once the handshake is done and the lists are
  known, and calls ``mark_dead`` when the child's exit (or a failed start)
  is known. ``proven`` is set by the run loop (up one keepalive interval)
  and by the call path (the run served a request) through ``ManagedServer.prove``;
- the **call path** (``core.supervision.calls``) only reads a run and waits
  on its events; when its transport breaks it waits for the run loop to
  confirm the death instead of deciding it.
"""

import asyncio
import time
from dataclasses import dataclass, field
from typing import Final

from core.supervision.child import Child, StopTiming
from core.supervision.limits import CPU_WARN_SECONDS, INTERVAL_SECONDS
from core.supervision.restart_policy import BACKOFF_CAP_SECONDS, BACKOFF_INITIAL_SECONDS
from core.supervision.upstream import Upstream

#: How long a call waits for a *new* ready session after asking for a respawn.
RESPAWN_WAIT_SECONDS: Final = 15.0
#: Spawn to ready (handshake + tools listed); npx may download for a while.
START_TIMEOUT_SECONDS: Final = 60.0
#: A health ping slower than this marks the server degraded.
PING_TIMEOUT_SECONDS: Final = 5.0
#: How long ``server/discover`` may go unanswered before ``initialize`` is
#: sent beside it (the child may be of the handshake era and ignore what it
#: does not know, or merely slow); the first to succeed decides the era.
PROBE_TIMEOUT_SECONDS: Final = 5.0
#: A parked server tries one start on its own this often.
SELF_PROBE_SECONDS: Final = 300.0
#: After stdout closes, how long the child gets to exit on its own before the
#: stop contract ends it (EOF normally precedes the exit by a millisecond).
EOF_EXIT_GRACE_SECONDS: Final = 0.5
#: After a run ends, how long its stderr pump may still drain buffered lines.
STDERR_DRAIN_SECONDS: Final = 0.5
#: Slack on top of the stop contract's own graces when a call waits for the
#: run loop to confirm a death it noticed first (the loop is never slower).
CONFIRM_DEAD_SLACK_SECONDS: Final = 1.0


@dataclass(frozen=True)
class Timing:
    """Every wait of a server's life; tests shrink them or move a FakeClock."""

    respawn_wait: float = RESPAWN_WAIT_SECONDS
    start_timeout: float = START_TIMEOUT_SECONDS
    ping_timeout: float = PING_TIMEOUT_SECONDS
    probe_timeout: float = PROBE_TIMEOUT_SECONDS
    self_probe: float = SELF_PROBE_SECONDS
    eof_exit_grace: float = EOF_EXIT_GRACE_SECONDS
    stderr_drain: float = STDERR_DRAIN_SECONDS
    backoff_initial: float = BACKOFF_INITIAL_SECONDS
    backoff_cap: float = BACKOFF_CAP_SECONDS
    stop: StopTiming = field(default_factory=StopTiming)
    limits_interval: float = INTERVAL_SECONDS
    cpu_warn_after: float = CPU_WARN_SECONDS

    @property
    def confirm_dead(self) -> float:
        """The longest the run loop can take to confirm a death a call saw first."""
        return (
            self.eof_exit_grace
            + self.stop.stdin_close_grace
            + self.stop.sigterm_grace
            + CONFIRM_DEAD_SLACK_SECONDS
        )


class Run:
    """One generation: a child, its upstream session, and how it ended."""

    def __init__(self, generation: int, started: float) -> None:
        self.generation = generation
        #: Monotonic start (the injected clock), for the keepalive rule.
        self.started = started
        self.started_wall = time.time()
        self.child: Child | None = None
        self.upstream: Upstream | None = None
        #: Set by the run loop once the handshake is done and the lists are known.
        self.ready = asyncio.Event()
        #: Set the moment the leader's exit (or a failed start) is known.
        self.dead = asyncio.Event()
        self.exit_text = ""
        self.proven = False
        #: Ended by the user or mcp-tray itself (stop, respawn): not a drop.
        self.intentional = False
        #: Why mcp-tray replaced it for going over a limit (core.supervision.limits).
        self.over_limit: str | None = None

    def alive(self) -> bool:
        return not self.dead.is_set() and self.child is not None and self.child.is_alive()

    def mark_dead(self, text: str) -> bool:
        """Record how the run ended; False when that was already known."""
        if self.dead.is_set():
            return False
        self.exit_text = text
        self.dead.set()
        return True
