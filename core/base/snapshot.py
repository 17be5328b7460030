"""What the core publishes: frozen snapshots and change events.

Subscribers (the tray, the API, tests) get an ``Event`` on every change and
read the current ``TraySnapshot`` when they need the whole picture. Nothing
here is mutable, so a snapshot can cross into Qt or a thread safely.
"""

from dataclasses import dataclass, field
from typing import Any, Literal

from core.base.states import BreakerState, ServerState

EventKind = Literal[
    "state",  # a server changed state (snapshot attached)
    "breaker",  # a server breaker opened, half-opened or closed
    "stderr",  # a child wrote a stderr line (text attached)
    "lists",  # a server's tools/resources/prompts lists changed
    "config",  # the config was (re)loaded, or a reload failed
    "sessions",  # client sessions opened, closed, failed, tripped or were reset
    "workers",  # the worker registry changed
    "warnings",  # diagnostics changed
]


@dataclass(frozen=True)
class ServerSnapshot:
    name: str
    state: ServerState
    pid: int | None
    generation: int
    restarts: int
    breaker: BreakerState
    breaker_failures: int
    last_error: str | None
    parked_reason: str | None
    #: Wall-clock start of the current child (epoch seconds), for uptime.
    started_at: float | None
    unproven_drops: int
    command: str
    sharing: str
    log_path: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state.value,
            "pid": self.pid,
            "generation": self.generation,
            "restarts": self.restarts,
            "breaker": self.breaker.value,
            "last_error": self.last_error,
            "parked_reason": self.parked_reason,
            "started_at": self.started_at,
            "unproven_drops": self.unproven_drops,
            "command": self.command,
            "sharing": self.sharing,
            "log": self.log_path,
        }


@dataclass(frozen=True)
class Event:
    kind: EventKind
    server: str | None = None
    snapshot: ServerSnapshot | None = None
    text: str | None = None


@dataclass(frozen=True)
class TraySnapshot:
    version: str
    config_path: str
    servers: tuple[ServerSnapshot, ...]
    #: The last config reload error (file, line, key, fix), if the last edit was bad.
    config_error: str | None = None
    #: Filled by the parts that own them (sessions, registry, diagnostics).
    extra: dict[str, Any] = field(default_factory=dict)

    def server(self, name: str) -> ServerSnapshot:
        for snap in self.servers:
            if snap.name == name:
                return snap
        raise KeyError(name)
