"""What the core publishes: frozen snapshots and change events.

Subscribers (the tray, the API, tests) get an ``Event`` on every change and
read the current ``TraySnapshot`` when they need the whole picture. Nothing
here is mutable, so a snapshot can cross into Qt or a thread safely, and
every field is typed: a view reads fields and enums, never parses text.
"""

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.base.severity import Severity, severity
from core.base.states import BreakerState, ServerState


class EventKind(enum.Enum):
    #: A server changed state (snapshot attached).
    STATE = "state"
    #: A server breaker opened, half-opened or closed (snapshot attached).
    BREAKER = "breaker"
    #: A child wrote a stderr line (text attached).
    STDERR = "stderr"
    #: A server's tools/resources/prompts lists changed (the kind as text).
    LISTS = "lists"
    #: The config was (re)loaded, or a reload was refused.
    CONFIG = "config"
    #: Client sessions opened, closed, failed, tripped or were reset.
    SESSIONS = "sessions"
    #: The worker registry changed.
    WORKERS = "workers"
    #: Diagnostics changed.
    WARNINGS = "warnings"
    #: A call or a changed tool waits for the person's approval, or was answered.
    APPROVALS = "approvals"


class AlertKind(enum.Enum):
    """Events a person should hear about even with the window closed."""

    #: A server was parked: it kept dying, or cannot start at all.
    PARKED = "parked"
    #: A client session's breaker tripped.
    TRIPPED = "tripped"
    #: A config edit was refused; the last good config keeps running.
    CONFIG_REFUSED = "config-refused"
    #: A call, or a server's changed tool, waits for the person's approval.
    APPROVAL = "approval"
    #: A child went over its memory limit and was replaced.
    LIMIT = "limit"
    #: A remote server asks the person to sign in (mcp-tray login NAME).
    SIGN_IN = "sign-in"


@dataclass(frozen=True)
class ServerSnapshot:
    name: str
    state: ServerState
    pid: int | None
    generation: int
    restarts: int
    breaker: BreakerState
    last_error: str | None
    parked_reason: str | None
    #: Wall-clock start of the current child (epoch seconds), for uptime.
    started_at: float | None
    unproven_drops: int
    command: str
    sharing: str
    log_path: str
    #: The protocol revision the child speaks (2026-07-28, or a handshake one);
    #: None until its first handshake.
    protocol: str | None = None
    #: Whether a sandbox is enforced and by what ("landlock ABI 7 — write 2 folders,
    #: network off", "none", "not enforced (why)").
    sandbox: str = "none"
    #: A remote server (an entry with "url"): no process of ours, so no pid nor memory.
    remote: bool = False
    #: A remote's next try to reach it, in seconds from the snapshot (None otherwise).
    retry_in: float | None = None
    #: The median of its latest answered tool calls, through mcp-tray (None before any).
    latency_ms: float | None = None

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
            "protocol": self.protocol,
            "sandbox": self.sandbox,
            "remote": self.remote,
            "retry_in": self.retry_in,
            "latency_ms": self.latency_ms,
        }


@dataclass(frozen=True)
class SessionSnapshot:
    """One client session (a gateway connection or a bridge) and its breaker."""

    id: str
    server: str
    #: "http" or "bridge".
    kind: str
    #: Normalised client name, and how a person calls that client.
    client_name: str
    client: str
    opened_at: float
    requests: int
    consecutive_failures: int
    tripped: bool
    last_error: str | None
    worker_identity: str | None
    #: Whether a live, unfenced registry row holds the session (docs/design.md §3.6):
    #: "owned", "fenced" or "missing"; None until the registry was read.
    ownership: str | None = None
    ownership_detail: str = ""
    #: The aggregate endpoint (``@all``, ``@coding``) this session reaches ``server`` through;
    #: "" for a session of the server's own endpoint.
    via: str = ""


@dataclass(frozen=True)
class WorkerSnapshot:
    """One row of the worker registry, as the tray last read it."""

    worker_identity: str
    client_name: str
    session_id: str
    server: str | None
    pid: int | None
    #: ISO timestamps, as the registry stores them.
    started_at: str
    last_heartbeat_at: str
    heartbeat_age_seconds: float
    ttl_seconds: float
    #: "live", "stale" or "fenced".
    status: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "WorkerSnapshot":
        return cls(
            worker_identity=str(row["worker_identity"]),
            client_name=str(row.get("client_name") or ""),
            session_id=str(row.get("session_id") or ""),
            server=row.get("server"),
            pid=row.get("pid"),
            started_at=str(row.get("started_at") or ""),
            last_heartbeat_at=str(row.get("last_heartbeat_at") or ""),
            heartbeat_age_seconds=float(row.get("heartbeat_age_seconds") or 0.0),
            ttl_seconds=float(row.get("ttl_seconds") or 0.0),
            status=str(row.get("status") or ("live" if row.get("live") else "stale")),
        )


@dataclass(frozen=True)
class WarningSnapshot:
    """A finding (a warning, advice or information); ``text`` is its one line."""

    family: str
    subject: str
    message: str
    fix: str
    text: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "WarningSnapshot":
        """From a ``/api/v1/warnings`` row (its ``severity`` is the family's, not stored)."""
        return cls(**{key: str(row.get(key) or "") for key in _WARNING_FIELDS})

    @property
    def severity(self) -> Severity:
        return severity(self.family)

    @property
    def is_warning(self) -> bool:
        return self.severity is Severity.WARNING

    def to_json(self) -> dict[str, str]:
        return {**dataclasses.asdict(self), "severity": self.severity.value}


_WARNING_FIELDS: Final = ("family", "subject", "message", "fix", "text")


@dataclass(frozen=True)
class ProfileSnapshot:
    """A profile (or ``all``): what it offers one client, what that costs, who is connected."""

    name: str
    #: Where a client reaches it (``/mcp``, ``/mcp/@coding``).
    path: str
    servers: tuple[str, ...]
    tools: int
    prompts: int
    resources: int
    #: Estimated tokens of its tools/list (bytes of the JSON / 4) and those bytes.
    tokens: int
    tools_bytes: int
    #: (as clients see it, full name) for every name shortened to 64 characters.
    renamed: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    #: The client names of the sessions connected to it.
    sessions: tuple[str, ...]
    #: ``full`` (every tool listed) or ``search`` (three tools that find, describe, call them).
    discovery: str = "full"
    #: Estimated tokens of the three-tool list a discovery profile gives instead.
    discovery_tokens: int = 0


@dataclass(frozen=True)
class ApprovalSnapshot:
    """Something that waits for the person: a held call, or a server's changed tool."""

    id: str
    #: ``call`` or ``tool-change``.
    kind: str
    server: str
    tool: str
    #: The client's name (a call), or "" (a tool change belongs to no client).
    client: str
    #: The call's arguments; {} for a tool change.
    arguments: Mapping[str, Any]
    #: When it began waiting, ISO 8601 UTC.
    since: str
    #: Why it waits: the rule that matched, or what changed in the tool.
    reason: str
    #: A tool change: the tool as last approved, and as the server lists it now.
    old: Mapping[str, Any] | None = None
    new: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["arguments"] = dict(self.arguments)
        if self.kind != "tool-change":
            del data["old"], data["new"]
        return data


@dataclass(frozen=True)
class GrantSnapshot:
    """An "Always allow": a server's tool whose calls are no longer held (revocable)."""

    server: str
    tool: str
    since: str

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ResourceUsage:
    """CPU and memory of a server's process group (sampled while the window shows)."""

    cpu_percent: float | None
    rss_bytes: int | None


@dataclass(frozen=True)
class Event:
    kind: EventKind
    server: str | None = None
    snapshot: ServerSnapshot | None = None
    text: str | None = None
    #: Set when a person should be told (a notification), whatever the kind.
    alert: AlertKind | None = None


@dataclass(frozen=True)
class TraySnapshot:
    version: str
    config_path: str
    servers: tuple[ServerSnapshot, ...]
    #: The last config reload error (file, line, key, fix), if the last edit was bad.
    config_error: str | None = None
    sessions: tuple[SessionSnapshot, ...] = ()
    workers: tuple[WorkerSnapshot, ...] = ()
    warnings: tuple[WarningSnapshot, ...] = ()
    profiles: tuple[ProfileSnapshot, ...] = ()
    #: What waits for the person's approval, oldest first, and the "Always allow" grants.
    approvals: tuple[ApprovalSnapshot, ...] = ()
    grants: tuple[GrantSnapshot, ...] = ()

    def server(self, name: str) -> ServerSnapshot:
        for snap in self.servers:
            if snap.name == name:
                return snap
        raise KeyError(name)
