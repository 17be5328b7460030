"""What a config holds: the servers, the gateway settings, the profiles and their defaults.

Plain frozen dataclasses and the constants that bound them; reading a file
(core.settings.filereader) and checking its JSON (core.settings.config_check)
happen elsewhere, so whatever holds a ``TrayConfig`` imports only this.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from core.settings.profiles import ProfileConfig

RetryPolicy = Literal["safe", "always", "never"]
Sharing = Literal["shared", "per-session", "per-workspace"]
StartMode = Literal["always", "on-demand"]
ToolChangeMode = Literal["hold", "warn"]

RETRY_POLICIES: Final = ("safe", "always", "never")
SHARING_MODES: Final = ("shared", "per-session", "per-workspace")
#: "always": started with the tray; "on-demand": by the first request that needs it.
START_MODES: Final = ("always", "on-demand")
#: An on-demand server stops after this long with nothing that needs it.
DEFAULT_IDLE_STOP_S: Final = 600.0
#: Shorter would stop a server between two calls of one agent turn.
MIN_IDLE_STOP_S: Final = 1.0
#: A week: past that "on-demand" means nothing.
MAX_IDLE_STOP_S: Final = 7 * 86400.0
#: How mcp-tray talks to a child: probe like the SDK's auto mode, or pin an era.
PROTOCOL_MODES: Final = ("auto", "handshake", "2026-07-28")

#: A run is proven once it stays up this long (docs/design.md §3.2).
DEFAULT_KEEPALIVE_SECONDS: Final = 30.0
#: Shorter keepalives would let a slowly crash-looping server pass as proven.
MIN_KEEPALIVE_SECONDS: Final = 5.0
#: Longer ones would never prove a run by its uptime (and beyond float's
#: range a number no longer converts): a day is already past any use.
MAX_KEEPALIVE_SECONDS: Final = 86400.0

#: Children an entry may have made for sessions or workspaces at once: each is a
#: whole server process (500 roots sets were 500 children, 5.5 GB, in issue 27).
DEFAULT_MAX_CHILDREN: Final = 32
#: The most ``max_children`` may say (each child holds pipes and a log file).
MAX_MAX_CHILDREN: Final = 512

SERVER_KEYS: Final = (
    "command",
    "args",
    "env",
    "cwd",
    "type",
    "disabled",
    "retry",
    "keepalive_seconds",
    "sharing",
    "protocol",
    "approve",
    "on_tool_change",
    "max_children",
    "start",
    "idle_stop_s",
    "standby",
    "sandbox",
    "limits",
    "url",
    "headers",
    "transport",
    "allow_insecure",
    "oauth",
)
#: The keys that only a local command has: an entry with a ``"url"`` refuses them.
LOCAL_ONLY_KEYS: Final = ("command", "args", "env", "cwd", "sandbox", "limits", "standby")
RemoteTransport = Literal["streamable-http", "sse"]
#: "streamable-http" (one endpoint, spec 2025-03-26 on); "sse" (the older HTTP+SSE pair).
REMOTE_TRANSPORTS: Final = ("streamable-http", "sse")
TOP_LEVEL_KEYS: Final = (
    "mcpServers",
    "gateway",
    "profiles",
    "approval_timeout_s",
    "journal",
    "telemetry",
    "$schema",
)
JOURNAL_KEYS: Final = ("days", "max_mb", "arguments")
TELEMETRY_KEYS: Final = ("otlp_endpoint",)
#: The words ``approve`` takes besides globs over tool names (docs/design.md §3.14).
APPROVE_WORDS: Final = ("destructive", "any")
#: What a changed tool gets: held until the person approves it, or taken with a warning.
TOOL_CHANGE_MODES: Final = ("hold", "warn")
#: A held call unanswered this long is refused (``approval_timeout_s``).
DEFAULT_APPROVAL_TIMEOUT_S: Final = 120.0
#: Bounds of ``approval_timeout_s``: a person needs a second; a day is past any use.
MIN_APPROVAL_TIMEOUT_S: Final = 1.0
MAX_APPROVAL_TIMEOUT_S: Final = 86400.0
GATEWAY_KEYS: Final = ("port", "max_body_bytes")
#: Largest request body the gateway accepts unless the config says otherwise.
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
#: The most ``gateway.max_body_bytes`` may say (a tool call is not a file upload).
MAX_BODY_BYTES_CEILING: Final = 256 * 1024 * 1024
#: Where the gateway listens unless ``gateway.port`` says otherwise. Fixed, so
#: the URL in a client's config survives every restart of mcp-tray (docs/design.md
#: §3.10). 28729 ("2" + TRAY on a phone keypad) is unassigned in the IANA
#: registry (the block 28590-28999), below Linux's ephemeral range
#: (32768-60999, so the kernel never hands it to an outgoing connection) and
#: below Kubernetes' NodePort range (30000-32767), and no widely used local
#: tool claims it. When it is taken anyway, the tray falls back to a free
#: port and says so (core.serving.service).
DEFAULT_GATEWAY_PORT: Final = 28729

#: Server names become URL paths (/mcp/<name>) and log file names. Always
#: ``fullmatch``: ``$`` would also accept a name ending in a newline.
NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: What a server name may not hold even when NAME_RE lets it: the aggregate
#: names a member's tools ``SERVER__TOOL`` (core.settings.profiles), and that
#: is injective only if the server part holds no ``__`` and does not end in
#: ``_`` (``fs_`` + ``__`` + ``x`` would be ``fs`` + ``__`` + ``_x``).
SEPARATOR_CLASH_RE: Final = re.compile(r"__|_$")
KEYRING_REF_RE: Final = re.compile(r"\$\{keyring:([^}]+)\}")


#: The keys of a server's ``sandbox`` and ``limits`` (docs/design.md §3.17).
SANDBOX_KEYS: Final = ("write", "read", "network", "required")
LIMITS_KEYS: Final = ("memory_mb", "cpu_percent")


@dataclass(frozen=True)
class SandboxConfig:
    """Paths as written (``~``, ``${state}``, ``${roots}``): they are resolved at each spawn."""

    write: tuple[str, ...] = ()
    #: None: "system" (the system, caches, the command's folders, the home but its secrets).
    read: tuple[str, ...] | None = None
    network: bool = True
    #: False: where nothing can enforce it, the server runs unconfined with a warning.
    required: bool = True


@dataclass(frozen=True)
class LimitsConfig:
    memory_mb: int | None = None
    cpu_percent: float | None = None


@dataclass(frozen=True)
class OAuthClient:
    """A client registered by hand at a remote's authorization server (one without
    dynamic registration): ``"oauth": {"client_id": …}`` in the entry."""

    client_id: str
    #: May hold ``${keyring:NAME}`` (resolved at sign-in); None for a public client.
    client_secret: str | None = None
    scopes: tuple[str, ...] = ()
    #: The loopback port registered with the client's redirect URI (None: any free port).
    redirect_port: int | None = None


@dataclass(frozen=True)
class RemoteConfig:
    """Where a remote server is and how it is reached (an entry with ``"url"``)."""

    url: str
    #: Sent on every request; values may hold ``${keyring:NAME}``, resolved at connect.
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: RemoteTransport = "streamable-http"
    oauth: OAuthClient | None = None

    def __hash__(self) -> int:
        return hash((self.url, tuple(sorted(self.headers.items())), self.transport, self.oauth))


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    disabled: bool = False
    #: "safe": replay a call cut by a child's death only for readOnly/idempotent
    #: tools; "always": replay any; "never": replay none.
    retry: RetryPolicy = "safe"
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS
    sharing: Sharing = "shared"
    #: The entry says ``"sharing"`` itself: a shared server that asks for roots stays
    #: shared (else it gets one child per workspace, core.serving.calls.placement).
    sharing_pinned: bool = False
    #: "auto" (probe server/discover, fall back to initialize), "handshake" or "2026-07-28".
    protocol: str = "auto"
    #: Calls held for the person's approval: globs over tool names, "destructive", "any".
    approve: tuple[str, ...] = ()
    #: A tool whose fingerprint changed: "hold" it for review, or "warn" and offer it.
    on_tool_change: ToolChangeMode = "hold"
    #: Children made for sessions or workspaces (core.serving.calls.placement) at once.
    max_children: int = DEFAULT_MAX_CHILDREN
    #: "on-demand": asleep (no child) until a request needs it, asleep again when idle.
    start: StartMode = "always"
    #: How long an on-demand server may go with nothing that needs it.
    idle_stop_s: float = DEFAULT_IDLE_STOP_S
    #: Keep one spare child started beside the active one (stateless shared servers).
    standby: bool = False
    sandbox: SandboxConfig | None = None
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    #: Set for a remote server (``"url"``): no process of ours, a session over HTTP.
    remote: RemoteConfig | None = None

    @property
    def secret_values(self) -> Mapping[str, str]:
        """Where ``${keyring:NAME}`` may stand: a command's env, a remote's headers."""
        return self.remote.headers if self.remote is not None else self.env

    @property
    def shown_command(self) -> str:
        """What the tray shows as its command: the argv, or a remote's URL."""
        if self.remote is not None:
            return self.remote.url
        return " ".join([self.command, *self.args])

    def launch_key(self) -> tuple[object, ...]:
        """What decides whether a config edit must restart this server."""
        return (
            self.remote,
            self.command,
            self.args,
            tuple(sorted(self.env.items())),
            self.cwd,
            self.protocol,
            self.sandbox,
            self.limits,
        )


@dataclass(frozen=True)
class GatewaySettings:
    """The ``gateway`` section: where clients reach mcp-tray, and what it accepts."""

    #: 0 means "any free port" (a new one at every start: HTTP snippets break).
    port: int = DEFAULT_GATEWAY_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


@dataclass(frozen=True)
class JournalSettings:
    """The ``journal`` section: what the call journal keeps (core.registry.journal)."""

    days: float = 14
    max_mb: float = 200
    #: False: tool names only, never their arguments.
    arguments: bool = True


@dataclass(frozen=True)
class TrayConfig:
    path: Path
    servers: Mapping[str, ServerConfig]
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    #: By name; ``all`` is implied (core.settings.profiles).
    profiles: Mapping[str, ProfileConfig] = field(default_factory=dict)
    approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    journal: JournalSettings = field(default_factory=JournalSettings)
    #: Where spans of the calls go over OTLP/HTTP (None: no spans; core.serving.observe.telemetry).
    otlp_endpoint: str | None = None

    @property
    def enabled(self) -> list[ServerConfig]:
        return [s for s in self.servers.values() if not s.disabled]


def valid_server_name(name: str) -> bool:
    """Whether ``name`` can be a server's name (it becomes a URL path, a file name and
    the prefix of its tools in the aggregate)."""
    return NAME_RE.fullmatch(name) is not None and SEPARATOR_CLASH_RE.search(name) is None


def empty_config(path: Path) -> TrayConfig:
    return TrayConfig(path=path, servers={})
