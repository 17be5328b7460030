"""mcp-tray's one exception tree. ``str(error)`` is always the user's text.

Every exception mcp-tray raises on purpose derives from ``McpTrayError`` and
is defined here, so a caller can catch a whole family without importing the
layer that raises it (httpx keeps its tree in one module the same way).

    McpTrayError
    ├── ConfigError                 the config file is unusable (file, line, key, fix)
    ├── UnknownServer               no server of that name is configured
    ├── UnknownSession              no client session of that id is open
    ├── InvalidTransition           a state move the table forbids: a bug, never user input
    ├── SpawnError                  a child could not be started (``permanent`` parks at once)
    ├── SecretStoreError            the OS keyring cannot be used
    ├── RegistryFileError           the worker registry file cannot be used as it is
    ├── SignInRequired              going on with a remote needs a person in a browser
    ├── InstanceError               the one-instance-per-user rule
    │   ├── AlreadyRunning          another mcp-tray holds the lock
    │   └── NotRunning              no mcp-tray to talk to
    ├── NotFinite                   NaN or ±Infinity in a JSON text (a ValueError too)
    ├── BadRow                      a saved session row the gateway never writes (a ValueError too)
    ├── ApprovalError               an approval answer that cannot be given
    ├── TelemetryUnavailable        spans asked for, the otel extra missing
    ├── Gone                        the bridge waited for a tray that did not come
    ├── CommandError                a CLI command failed (carries its exit code)
    │   ├── SnippetError            a client snippet cannot be made
    │   ├── DesktopEntryError       the desktop entry cannot be written
    │   └── PlatformChoiceError     MCP_TRAY_PLATFORM names no backend set
    ├── PeerError                   the other end of a connection failed us
    │   ├── RpcError                a JSON-RPC error from either side (code, message, data)
    │   ├── ConnectionLost          the upstream transport closed under a request
    │   └── HttpError               the bridge's HTTP hop to the gateway failed
    │       └── TrayStopping        mcp-tray answered "shutting down" under a request
    └── CallError                   a forwarded request produced no result
        ├── Unavailable             refused before anything was sent
        │   ├── ServerStopped       the user stopped the server
        │   ├── ServerParked        the budget (or a permanent start error) parked it
        │   ├── RemoteUnreachable   a remote server's last try to reach it failed
        │   ├── SignInNeeded        a remote server waits for the person to sign in
        │   ├── BreakerOpen         the server breaker is open
        │   ├── TooManyChildren     the entry's ``max_children`` are all in use
        │   └── SessionTripped      the client session's breaker is open
        ├── TransportFailure        the child, not the server's logic, failed
        │   ├── SubprocessExited    dead, and no fresh session came up in the window
        │   ├── ExitedAgain         the respawned child died too
        │   ├── ExitedMidCall       died with the call in flight; not safe to replay
        │   └── ProtocolError       the child broke the protocol (bad JSON, bad handshake)
        ├── UpstreamError           the server answered with a JSON-RPC error
        └── CallTimedOut            a *living* server did not answer in time

A dead subprocess is never reported as a timeout: only ``CallTimedOut`` says
"timed out", and it is raised only while the child is alive.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from core.base.exitcodes import EXIT_FAILED, EXIT_USAGE

#: How much of a name a client sent an error text repeats: a 404 must not echo a
#: 5,000-character name back (nor a log line carry it).
SHOWN_CHARS: Final = 100


def shown(value: object) -> str:
    """``value`` as an error text quotes it (``!r``), cut to ``SHOWN_CHARS`` with its length said."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return f"{value[:SHOWN_CHARS]!r}... ({len(value):,} characters)"
    text = repr(value)
    if len(text) > SHOWN_CHARS:
        return f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"
    return text


if TYPE_CHECKING:
    from core.base.states import ServerState

__all__ = [
    "AlreadyRunning",
    "ApprovalError",
    "BadRow",
    "BreakerOpen",
    "CallError",
    "CallTimedOut",
    "CommandError",
    "ConfigError",
    "ConnectionLost",
    "DesktopEntryError",
    "ExitedAgain",
    "ExitedMidCall",
    "Gone",
    "HttpError",
    "InstanceError",
    "InvalidTransition",
    "McpTrayError",
    "NotFinite",
    "NotRunning",
    "PeerError",
    "PlatformChoiceError",
    "ProtocolError",
    "RegistryFileError",
    "RemoteUnreachable",
    "RpcError",
    "SecretStoreError",
    "ServerParked",
    "ServerStopped",
    "SessionTripped",
    "SignInNeeded",
    "SignInRequired",
    "SnippetError",
    "SpawnError",
    "SubprocessExited",
    "TelemetryUnavailable",
    "TooManyChildren",
    "TransportFailure",
    "TrayStopping",
    "Unavailable",
    "UnknownServer",
    "UnknownSession",
    "UpstreamError",
]


class McpTrayError(Exception):
    """Base of every error mcp-tray raises on purpose."""


class ConfigError(McpTrayError):
    """The config cannot be used. Names the file, the line or key, and the fix."""

    def __init__(
        self,
        file: Path | str,
        problem: str,
        *,
        fix: str,
        key: str | None = None,
        line: int | None = None,
    ) -> None:
        self.file = str(file)
        self.problem = problem
        self.fix = fix
        self.key = key
        self.line = line
        where = self.file if line is None else f"{self.file}:{line}"
        subject = f"{key}: " if key else ""
        super().__init__(f"{where}: {subject}{problem}. Fix: {fix}")


class UnknownServer(McpTrayError):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        listed = ", ".join(sorted(known)) or "none are configured"
        super().__init__(f"no server named {shown(name)} (configured: {listed})")


class UnknownSession(McpTrayError):
    def __init__(self, session_id: str, known: list[str]) -> None:
        self.session_id = session_id
        listed = ", ".join(known) or "none are open"
        super().__init__(f"no client session {shown(session_id)} (open: {listed})")


class InvalidTransition(McpTrayError):
    """A state change the table does not allow: a bug in mcp-tray, never user input."""

    def __init__(self, server: str, old: "ServerState", new: "ServerState") -> None:
        super().__init__(
            f"server {server!r}: {old.value} -> {new.value} is not an allowed transition"
        )
        self.server = server
        self.old = old
        self.new = new


class SpawnError(McpTrayError):
    """The child could not be started. ``permanent`` errors park at once."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


class SecretStoreError(McpTrayError):
    """The keyring cannot be used; the message says why and what to do."""


class SignInRequired(McpTrayError):
    """Going on with a remote server needs a person in a browser (the tray never opens one)."""


class RegistryFileError(McpTrayError):
    """The registry file cannot be used as it is; it was left untouched."""

    def __init__(self, path: Path, problem: str, remedy: str) -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        super().__init__(
            f"worker registry {str(path)!r} {problem}. mcp-tray left it untouched. {remedy}"
        )


class InstanceError(McpTrayError):
    """The one-instance-per-user rule: someone else holds it, or nobody does."""


class AlreadyRunning(InstanceError):
    def __init__(self, pid: int | None, url: str | None, lock: Path) -> None:
        self.pid = pid
        self.url = url
        where = f" (pid {pid}, {url})" if pid is not None else ""
        super().__init__(f"mcp-tray is already running for this user{where}; lock: {lock}")


class NotRunning(InstanceError):
    def __init__(self, state_dir: Path, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"mcp-tray is not running{extra}. Start it with: mcp-tray run --headless "
            f"(or mcp-tray to open the tray). State folder: {state_dir}"
        )


class NotFinite(McpTrayError, ValueError):
    """``NaN`` or ``±Infinity`` in a JSON text: Python's parser accepts them, no JSON peer
    does. A ValueError too, as anything else ``json.loads`` refuses."""


class BadRow(McpTrayError, ValueError):
    """A saved row that is not one the gateway writes: why, naming the field."""


class ApprovalError(McpTrayError):
    """An answer that cannot be given: no such approval, or not that kind of answer."""


class TelemetryUnavailable(McpTrayError):
    """The config names an OTLP endpoint and the ``otel`` extra is not installed."""


class Gone(McpTrayError):
    """No tray came within the wait: the text says so, and what the bridge does next."""

    def __init__(self, waited: float, why: str | None = None) -> None:
        because = f" ({why})" if why else ""
        super().__init__(
            f"mcp-tray is not running (waited {waited:g} s for it){because}. Start it "
            "(mcp-tray, or mcp-tray run --headless); this bridge stays and reconnects as "
            "soon as it is up"
        )


class CommandError(McpTrayError):
    """A CLI command failed; ``code`` is its exit code (1 failed, 2 usage, 3 not running)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


class SnippetError(CommandError):
    """A client snippet cannot be made (unknown client, bad combination)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


class DesktopEntryError(CommandError):
    """The desktop entry cannot be written (its template or icon is missing)."""


class PlatformChoiceError(CommandError):
    """``MCP_TRAY_PLATFORM`` names no backend set."""

    def __init__(self, value: str, choices: tuple[str, ...]) -> None:
        listed = " or ".join(repr(c) for c in choices)
        super().__init__(
            f"MCP_TRAY_PLATFORM={value!r} names no backend set: set it to {listed}, or unset it",
            EXIT_USAGE,
        )


class PeerError(McpTrayError):
    """The other end of a connection (a child, a client, the gateway) failed us."""


class RpcError(PeerError):
    """A JSON-RPC error, from either side (``str`` is the peer's message)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return self.message


class ConnectionLost(PeerError):
    """The upstream transport closed while a request was in flight."""


class HttpError(PeerError):
    """The connection failed or the reply was not HTTP/1.1 we understand."""

    def __init__(self, message: str, *, unanswered: bool = False, never_sent: bool = False) -> None:
        super().__init__(message)
        #: The peer closed without a byte of reply (it may have read the request).
        self.unanswered = unanswered
        #: No connection was made: the request certainly was not processed.
        self.never_sent = never_sent


class TrayStopping(HttpError):
    """mcp-tray cut a request because it is shutting down: to a bridge, the tray went away."""

    def __init__(self) -> None:
        super().__init__("mcp-tray is shutting down")


class CallError(McpTrayError):
    """A request forwarded to a server ended without a result."""

    #: Short machine-readable kind for the API and the metrics.
    kind = "call-error"
    #: Counts toward the server breaker (docs/design.md §3.4): a transport-level failure.
    transport_failure = False

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(message)


class Unavailable(CallError):
    kind = "unavailable"


class ServerStopped(Unavailable):
    kind = "stopped"

    def __init__(self, server: str) -> None:
        super().__init__(
            server,
            f"server {server!r} is stopped, so nothing was sent. "
            f"Start it with: mcp-tray start {server}",
        )


class ServerParked(Unavailable):
    kind = "parked"

    def __init__(self, server: str, reason: str) -> None:
        self.reason = reason
        super().__init__(
            server,
            f"server {server!r} is parked: {reason}. mcp-tray stopped respawning it. "
            f"Fix the cause, then wake it with: mcp-tray respawn {server} "
            "(or the Respawn button in the mcp-tray window); editing its config entry wakes it too",
        )


class RemoteUnreachable(Unavailable):
    """A remote server's last try to reach it failed; mcp-tray tries again by itself."""

    kind = "unreachable"

    def __init__(self, server: str, reason: str, retry_in: float | None) -> None:
        self.reason = reason
        again = (
            f"mcp-tray tries again in {retry_in:.0f} s by itself"
            if retry_in is not None
            else "mcp-tray is trying again"
        )
        super().__init__(
            server,
            f"remote server {server!r} is {reason}, so nothing was sent; {again} "
            f"(or now: mcp-tray respawn {server})",
        )


class SignInNeeded(Unavailable):
    """A remote server waits for the person to sign in; nothing is sent until then."""

    kind = "needs-sign-in"

    def __init__(self, server: str, reason: str) -> None:
        self.reason = reason
        super().__init__(
            server,
            f"remote server {server!r} {reason}, so nothing was sent. Sign in with: "
            f"mcp-tray login {server} (or 'Sign in to {server}…' in the mcp-tray menu); "
            "calls go through again as soon as it is done",
        )


class TooManyChildren(Unavailable):
    """A session or workspace needs a child of its own, and the entry has ``max_children``."""

    kind = "max-children"

    def __init__(self, server: str, limit: int, sharing: str, config: str) -> None:
        self.limit = limit
        per = "client session" if sharing == "per-session" else "workspace (roots set)"
        super().__init__(
            server,
            f"server {server!r} already runs {limit} children, one per {per}, and its "
            f'"max_children" is {limit}: nothing was started or sent for this session. '
            "Close sessions you no longer use, or raise "
            f'"max_children" on {server!r} in {config}',
        )


class BreakerOpen(Unavailable):
    kind = "breaker-open"

    def __init__(self, server: str, failures: int, last_error: str, retry_in: float) -> None:
        self.retry_in = retry_in
        super().__init__(
            server,
            f"server {server!r} failed {failures} times in a row at the transport level "
            f"(last: {last_error}). do NOT retry now: mcp-tray fails calls fast and will "
            f"probe the server again in {max(0, round(retry_in))} s",
        )


class SessionTripped(Unavailable):
    kind = "session-tripped"

    def __init__(self, server: str, session_id: str, failures: int) -> None:
        self.session_id = session_id
        super().__init__(
            server,
            f"⚠️ This session has failed {failures} times in a row with a non-retryable error. "
            f"Reset it from the mcp-tray window, or run: mcp-tray reset {session_id}",
        )


class TransportFailure(CallError):
    kind = "transport"
    transport_failure = True
    #: The generation whose death this is (one death, one breaker failure).
    generation: int | None = None
    #: The call was inside the child when it died (sent, not answered): it may
    #: be what killed it.
    inside: bool = False
    #: The server breaker opened on (or was open after) this failure, and the
    #: call was not inside the child that died (it waited for a respawn that
    #: died too): the incident is the server's; client sessions do not count it.
    contained: bool = False


class SubprocessExited(TransportFailure):
    kind = "exited"

    def __init__(
        self,
        server: str,
        generation: int,
        exit_text: str,
        waited: float,
        log: Path,
        *,
        remote: bool = False,
    ) -> None:
        self.generation = generation
        self.waited = waited
        ended, again = _ended(remote)
        super().__init__(
            server,
            f"server {server!r}: {ended} ({exit_text}, generation "
            f"{generation}) and mcp-tray {again}, but no fresh session was ready after "
            f"waiting {waited:g} s. This is not a timeout: the call never reached the server. "
            f"{_log_is(remote)} {log}",
        )


class ExitedAgain(TransportFailure):
    kind = "exited-again"

    def __init__(
        self, server: str, generation: int, exit_text: str, log: Path, *, remote: bool = False
    ) -> None:
        self.generation = generation
        ended, again = _ended(remote)
        super().__init__(
            server,
            f"server {server!r}: {ended} again right after mcp-tray {again} "
            f"(generation {generation}, {exit_text}). do NOT retry this call: "
            f"the server keeps {'failing' if remote else 'dying'}, and mcp-tray parks it if it "
            "goes on. "
            f"{_log_is(remote)} {log}",
        )


class ExitedMidCall(TransportFailure):
    kind = "exited-mid-call"
    inside = True

    def __init__(
        self,
        server: str,
        generation: int,
        exit_text: str,
        why_no_retry: str,
        log: Path,
        *,
        remote: bool = False,
    ) -> None:
        self.generation = generation
        ended, _ = _ended(remote)
        super().__init__(
            server,
            f"server {server!r}: {ended} mid-call (generation {generation}, "
            f"{exit_text}). The call may or may not have taken effect, so mcp-tray did not "
            f"replay it ({why_no_retry}). Check its effect before calling again. "
            f"{_log_is(remote)} {log}",
        )


def _ended(remote: bool) -> tuple[str, str]:
    """How a run's end is said, and its replacement: a remote has no process that exits."""
    if remote:
        return "its session with the remote server ended", "opened a new one"
    return "its stdio subprocess exited", "respawned it"


def _log_is(remote: bool) -> str:
    return "Its log is in" if remote else "Its stderr is in"


class ProtocolError(TransportFailure):
    kind = "protocol"

    def __init__(self, server: str, detail: str) -> None:
        super().__init__(server, f"server {server!r} broke the MCP protocol: {detail}")


class UpstreamError(CallError):
    """The server itself answered with a JSON-RPC error; it is alive and well."""

    kind = "upstream"

    def __init__(self, server: str, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.upstream_message = message
        self.data = data
        super().__init__(server, message)


class CallTimedOut(CallError):
    kind = "timeout"

    def __init__(self, server: str, method: str, seconds: float) -> None:
        super().__init__(
            server,
            f"server {server!r} is running but did not answer {method!r} within {seconds:g} s",
        )
