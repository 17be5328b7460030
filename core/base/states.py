"""Server and breaker states, and which moves between them are allowed.

This module must not depend on anything outside the standard library: the
CLI, the API, the tray and the tests all name states through it.
"""

import enum
from typing import Final


class ServerState(enum.Enum):
    #: Not running and not meant to run (user stopped it, or never started).
    STOPPED = "stopped"
    #: A child is spawned; the initialize handshake and tools listing are under way.
    STARTING = "starting"
    #: Handshake done and tools listed: calls go through.
    READY = "ready"
    #: The child lives but its last health ping failed.
    DEGRADED = "degraded"
    #: The child died; an automatic respawn is waiting out its backoff.
    EXITED = "exited"
    #: Kept down on purpose: it kept dying, or cannot start at all.
    PARKED = "parked"
    #: An on-demand server with no child: its kept catalog answers lists, a call wakes it.
    SLEEPING = "sleeping"
    #: A remote server that could not be reached (DNS, refused, TLS, timeout): calls are
    #: refused at once with the reason, and it is tried again with a backoff, never parked.
    UNREACHABLE = "unreachable"
    #: A remote server that asks for a sign-in (none yet, or it ran out and could not be
    #: renewed): calls are refused at once, and it waits for ``mcp-tray login`` or Respawn.
    NEEDS_SIGN_IN = "needs-sign-in"


class BreakerState(enum.Enum):
    #: Calls flow.
    CLOSED = "closed"
    #: Calls fail fast until the cooldown ends.
    OPEN = "open"
    #: Cooldown over: one probe call decides.
    HALF_OPEN = "half-open"


S = ServerState

#: Every allowed move; ``ManagedServer.change_state`` refuses anything else.
ALLOWED_TRANSITIONS: Final[dict[ServerState, frozenset[ServerState]]] = {
    # stopped -> starting: the user (or start-up) asked for the server;
    # stopped -> sleeping: an on-demand server starts from its kept catalog.
    S.STOPPED: frozenset({S.STARTING, S.SLEEPING}),
    S.STARTING: frozenset(
        {
            # handshake done and tools listed
            S.READY,
            # a remote that could not be reached, or that asks for a sign-in
            S.UNREACHABLE,
            S.NEEDS_SIGN_IN,
            # the child died (or the handshake failed) before it was ready
            S.EXITED,
            # a permanent start error (command not found, bad cwd, missing secret)
            S.PARKED,
            # the user stopped it mid-start
            S.STOPPED,
            # the user asked for a respawn mid-start: a fresh generation starts
            S.STARTING,
        }
    ),
    # ready -> degraded: a health ping failed while the child still lives;
    # ready -> exited: the child died; ready -> stopped: the user stopped it;
    # ready -> starting: the user (or a config edit) asked for a fresh child;
    # ready -> sleeping: an on-demand server was idle its idle_stop_s (stop contract).
    # ready -> unreachable: a remote's connection failed; -> needs-sign-in: its sign-in ran out.
    S.READY: frozenset(
        {S.DEGRADED, S.EXITED, S.STOPPED, S.STARTING, S.SLEEPING, S.UNREACHABLE, S.NEEDS_SIGN_IN}
    ),
    # degraded -> ready: a later ping answered again.
    S.DEGRADED: frozenset(
        {S.READY, S.EXITED, S.STOPPED, S.STARTING, S.SLEEPING, S.UNREACHABLE, S.NEEDS_SIGN_IN}
    ),
    S.EXITED: frozenset(
        {
            # the backoff ran out, or a waiting call asked for the respawn now
            S.STARTING,
            # the rapid-drop budget is spent: stop hot-cycling
            S.PARKED,
            S.STOPPED,
        }
    ),
    # parked -> starting: Respawn, a config change, or the slow self-probe.
    S.PARKED: frozenset({S.STARTING, S.STOPPED}),
    # sleeping -> starting: a call (or Respawn) needs it; sleeping -> stopped: the user.
    S.SLEEPING: frozenset({S.STARTING, S.STOPPED}),
    # unreachable -> starting: the backoff ran out (or Respawn); -> parked: a config
    # that can never work (a missing secret) found on the next try.
    S.UNREACHABLE: frozenset({S.STARTING, S.STOPPED, S.PARKED}),
    # needs-sign-in -> starting: signed in (mcp-tray login respawns it) or Respawn.
    S.NEEDS_SIGN_IN: frozenset({S.STARTING, S.STOPPED}),
}
