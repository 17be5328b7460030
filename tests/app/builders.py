"""Snapshot builders for the app's tests (not a test module).

Every field has a plain default, so a test names only the fields it is about.
"""

from typing import Any

from core.base.snapshot import ServerSnapshot, SessionSnapshot
from core.base.states import BreakerState, ServerState


def server(name: str, state: ServerState, **fields: Any) -> ServerSnapshot:
    base: dict[str, Any] = {
        "name": name,
        "state": state,
        "pid": None,
        "generation": 1,
        "restarts": 0,
        "breaker": BreakerState.CLOSED,
        "last_error": None,
        "parked_reason": None,
        "started_at": None,
        "unproven_drops": 0,
        "command": "x",
        "sharing": "shared",
        "log_path": "/tmp/x.log",
    }
    return ServerSnapshot(**{**base, **fields})


def session(id: str, failures: int = 0, **fields: Any) -> SessionSnapshot:
    """A session with ``failures`` in a row (tripped from 3 on)."""
    base: dict[str, Any] = {
        "id": id,
        "server": "echo",
        "kind": "http",
        "client_name": "cursor",
        "client": "Cursor",
        "opened_at": 0.0,
        "requests": 1,
        "consecutive_failures": failures,
        "tripped": failures >= 3,
        "last_error": None,
        "worker_identity": None,
    }
    return SessionSnapshot(**{**base, **fields})
