"""mcp-tray's exception tree. ``str(error)`` is always the user's text.

    McpTrayError
    ├── ConfigError                 the config file is unusable (file, line, key, fix)
    ├── UnknownServer               no server of that name is configured
    └── CallError                   a forwarded request produced no result
        ├── Unavailable             refused before anything was sent
        │   ├── ServerStopped       the user stopped the server
        │   ├── ServerParked        the budget (or a permanent start error) parked it
        │   ├── BreakerOpen         the server breaker is open
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
from typing import Any

__all__ = [
    "BreakerOpen",
    "CallError",
    "CallTimedOut",
    "ConfigError",
    "ExitedAgain",
    "ExitedMidCall",
    "McpTrayError",
    "ProtocolError",
    "ServerParked",
    "ServerStopped",
    "SessionTripped",
    "SubprocessExited",
    "TransportFailure",
    "Unavailable",
    "UnknownServer",
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
        super().__init__(f"no server named {name!r} (configured: {listed})")


class CallError(McpTrayError):
    """A request forwarded to a server ended without a result."""

    #: Short machine-readable kind for the API and the metrics.
    kind = "call-error"
    #: Counts toward the server breaker (DESIGN 3.4): a transport-level failure.
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


class SubprocessExited(TransportFailure):
    kind = "exited"

    def __init__(
        self, server: str, generation: int, exit_text: str, waited: float, log: Path
    ) -> None:
        self.generation = generation
        self.waited = waited
        super().__init__(
            server,
            f"server {server!r}: its stdio subprocess exited ({exit_text}, generation "
            f"{generation}) and mcp-tray respawned it, but no fresh session was ready after "
            f"waiting {waited:g} s. This is not a timeout: the call never reached the server. "
            f"Its stderr is in {log}",
        )


class ExitedAgain(TransportFailure):
    kind = "exited-again"

    def __init__(self, server: str, generation: int, exit_text: str, log: Path) -> None:
        self.generation = generation
        super().__init__(
            server,
            f"server {server!r}: its stdio subprocess exited again right after mcp-tray "
            f"respawned it (generation {generation}, {exit_text}). do NOT retry this call: "
            f"the server keeps dying, and mcp-tray parks it if it goes on. Its stderr is in {log}",
        )


class ExitedMidCall(TransportFailure):
    kind = "exited-mid-call"

    def __init__(
        self, server: str, generation: int, exit_text: str, why_no_retry: str, log: Path
    ) -> None:
        self.generation = generation
        super().__init__(
            server,
            f"server {server!r}: its stdio subprocess exited mid-call (generation {generation}, "
            f"{exit_text}). The call may or may not have taken effect, so mcp-tray did not "
            f"replay it ({why_no_retry}). Check its effect before calling again. "
            f"Its stderr is in {log}",
        )


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
