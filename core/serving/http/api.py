"""The local control API (what the CLI and scripts use), on 127.0.0.1 only.

Every request needs ``Authorization: Bearer <token>``; a Host or Origin that
is not loopback is refused (a web page in the user's browser must not be
able to drive mcp-tray through DNS rebinding).

    GET  /api/v1/status
    POST /api/v1/servers/{name}/respawn | stop | start
    POST /api/v1/servers/{name}/call      {"tool": ..., "arguments": {...}, "timeout": s}
    GET  /api/v1/servers/{name}/logs?n=N  the in-memory stderr tail
    GET  /api/v1/servers/{name}/tools     its tools (retried after a crash or not), counts
    GET  /api/v1/sessions   POST /api/v1/sessions/{id}/reset   POST /api/v1/sessions/reset-all
    GET  /api/v1/workers    GET  /api/v1/warnings              GET  /metrics
    GET  /api/v1/approvals  POST /api/v1/approvals/{id}/approve {"scope": once|session|always}
    POST /api/v1/approvals/{id}/deny   POST /api/v1/approvals/revoke {"server": ..., "tool": ...}
    GET  /api/v1/calls?server=&client=&tool=GLOB&outcome=&since=10m&after=SEQ&limit=N
    *    /mcp/{server}      the gateway (core.serving.http.gateway)
"""

import functools
import hmac
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from core.base.errors import ApprovalError, CallError, McpTrayError, UnknownServer, UnknownSession
from core.base.loopback import LOOPBACK_HOSTS
from core.base.verdict import SCOPES
from core.protocol.headers import CLI_USER_AGENT, scope_headers
from core.protocol.jsonrpc import unparsable_reason, unusable
from core.registry.journal import CallQuery, calls_query
from core.serving.aggregate.profile_view import CLIENT_TOOL_LIMITS, ESTIMATE
from core.serving.calls.approvals import Approvals
from core.serving.sessions.sessions import SessionTable
from core.supervision.offer import offer_of
from core.supervision.supervisor import Supervisor

_LOOPBACK_HOST_RE: Final = re.compile(
    "(?:" + "|".join(map(re.escape, sorted(LOOPBACK_HOSTS))) + ")(?::([0-9]{1,5}))?"
)
#: Headers a request may carry once: which of two counts is a guess (a proxy may take
#: the first, the decoded dict keeps the last), so none does.
SINGLE_HEADERS: Final = (b"host", b"authorization")
#: A CLI call with no timeout of its own waits this long for the tool.
DEFAULT_CALL_TIMEOUT_SECONDS: Final = 120.0
#: The longest a call through the API may be told to wait (a day).
MAX_CALL_TIMEOUT_SECONDS: Final = 86400.0
#: The shortest: below a millisecond no call can be answered, so the
#: "did not answer in time" it would earn says nothing true about the server.
MIN_CALL_TIMEOUT_SECONDS: Final = 0.001
#: A control-API body is a tool call's arguments, not a file upload.
MAX_API_BODY_BYTES: Final = 4 * 1024 * 1024


def _error(status: int, message: str, kind: str = "error") -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind}, status_code=status)


def _refusal(status: int, message: str, kind: str) -> JSONResponse:
    """A 401/403 that also ends the connection: whoever sent it gets no second
    request on it, and it frees its place under the connection cap at once."""
    response = _error(status, message, kind)
    response.headers["connection"] = "close"
    return response


async def _json_body(request: Request) -> Any:
    """The request's JSON body, or the 400/413 response that says why it is not usable."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_API_BODY_BYTES:
            return _error(413, f"the body is larger than {MAX_API_BODY_BYTES} bytes", "too-large")
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return _error(
            400,
            f'the body must be JSON: {{"tool": ..., "arguments": {{...}}}} '
            f"({unparsable_reason(exc)})",
            "bad-request",
        )
    if (problem := unusable(parsed)) is not None:
        return _error(400, f"the body is not usable: {problem}", "bad-request")
    return parsed


def host_is_loopback(host_header: str) -> bool:
    """Whether a Host header is exactly a loopback name or address, with at most a port.

    Parsed as host and port, never by prefix: ``[::1]x``, ``[::1].evil.com`` and
    ``127.0.0.1:abc`` name no loopback address (RFC 9110 7.2: ``uri-host [ ":" port ]``)."""
    found = _LOOPBACK_HOST_RE.fullmatch(host_header.strip(" \t").lower())
    return found is not None and (found.group(1) is None or int(found.group(1)) <= 65535)


def presents_token(authorization: bytes, token: str) -> bool:
    """Whether an Authorization header's raw value presents ``token``: the one check of
    the token, for the guard and the express lane alike (constant time)."""
    return hmac.compare_digest(authorization, _bearer(token))


@functools.lru_cache(maxsize=1)
def _bearer(token: str) -> bytes:
    return f"Bearer {token}".encode()


def origin_is_loopback(origin: str) -> bool:
    """An Origin is ``scheme://host[:port]`` and nothing more (RFC 6454): its host and
    port are judged as a Host header is."""
    scheme, separator, authority = origin.strip(" \t").partition("://")
    return bool(separator) and scheme.lower() in ("http", "https") and host_is_loopback(authority)


class GuardMiddleware:
    """Loopback Host/Origin and the bearer token, before anything else runs."""

    def __init__(
        self,
        app: ASGIApp,
        token: Callable[[], str],
        open_paths: tuple[str, ...] = (),
        on_trusted: Callable[[tuple[str, int] | None], None] | None = None,
    ) -> None:
        self.app = app
        self._token = token
        self._open_paths = open_paths
        #: Told the peer of every request that presented the token (the
        #: connection cap sheds the others first: core.serving.http.http_guard).
        self._on_trusted = on_trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope_headers(scope)
        raw = scope["headers"]
        # Names repeat only where the decoded dict came out shorter (ASGI names are lower case).
        if len(headers) < len(raw):
            for single in SINGLE_HEADERS:
                if sum(1 for name, _ in raw if name.lower() == single) > 1:
                    title = single.decode().capitalize()
                    await _refusal(
                        400,
                        f"bad request: more than one {title} header (HTTP allows one)",
                        "bad-request",
                    )(scope, receive, send)
                    return
        if not host_is_loopback(headers.get("host", "")):
            await _refusal(
                403, "forbidden: the Host header is not a loopback address", "forbidden"
            )(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None and not origin_is_loopback(origin):
            await _refusal(
                403, f"forbidden: Origin {origin!r} is not a loopback address", "forbidden"
            )(scope, receive, send)
            return
        if not any(scope["path"].startswith(p) for p in self._open_paths):
            # The header as it came (decode_headers decodes latin-1, which round-trips).
            supplied = headers.get("authorization", "").encode("latin-1")
            if not presents_token(supplied, self._token()):
                response = _refusal(
                    401,
                    "unauthorized: send Authorization: Bearer <token> (mcp-tray token prints it)",
                    "unauthorized",
                )
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
            if self._on_trusted is not None:
                client = scope.get("client")
                self._on_trusted(tuple(client) if client else None)
        await self.app(scope, receive, send)


class ControlTarget(Protocol):
    """What the API needs from the running service."""

    supervisor: Supervisor
    sessions: SessionTable

    @property
    def approvals(self) -> Approvals: ...

    def status_extra(self) -> dict[str, Any]: ...

    def sessions_json(self) -> list[dict[str, Any]]: ...

    def workers_json(self) -> list[dict[str, Any]]: ...

    def warnings_json(self) -> list[dict[str, Any]]: ...

    def profiles_json(self) -> list[dict[str, Any]]: ...

    def metrics(self) -> bytes: ...

    def raise_window(self) -> bool: ...

    def quit(self) -> bool: ...

    async def call_tool(
        self,
        name: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None,
        door: str = "api",
    ) -> dict[str, Any]: ...

    async def calls_json(self, wanted: CallQuery) -> list[dict[str, Any]]: ...


def control_routes(target: ControlTarget) -> list[BaseRoute]:
    supervisor = target.supervisor

    async def status(request: Request) -> Response:
        snapshot = supervisor.snapshot()
        body: dict[str, Any] = {
            "version": snapshot.version,
            "config": snapshot.config_path,
            "config_error": snapshot.config_error,
            "servers": [server.to_json() for server in snapshot.servers],
        }
        body.update(target.status_extra())
        return JSONResponse(body)

    def action(verb: str, run: Callable[[str], Awaitable[None]]) -> Route:
        async def endpoint(request: Request) -> Response:
            name = request.path_params["name"]
            try:
                await run(name)
            except UnknownServer as exc:
                return _error(404, str(exc), "unknown-server")
            return JSONResponse(
                {"ok": True, "server": supervisor.server(name).snapshot().to_json()}
            )

        return Route(f"/api/v1/servers/{{name}}/{verb}", endpoint, methods=["POST"])

    async def call(request: Request) -> Response:
        name = request.path_params["name"]
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
            return _error(400, 'the body needs a "tool" string', "bad-request")
        arguments = body.get("arguments") or {}
        if not isinstance(arguments, dict):
            return _error(400, '"arguments" must be a JSON object', "bad-request")
        timeout = body.get("timeout", DEFAULT_CALL_TIMEOUT_SECONDS)
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not MIN_CALL_TIMEOUT_SECONDS <= timeout <= MAX_CALL_TIMEOUT_SECONDS
        ):
            return _error(
                400,
                f'"timeout" must be a number of seconds from {MIN_CALL_TIMEOUT_SECONDS:g} '
                f"to {MAX_CALL_TIMEOUT_SECONDS:g}",
                "bad-request",
            )
        try:
            cli = request.headers.get("user-agent", "").startswith(CLI_USER_AGENT)
            result = await target.call_tool(
                name, body["tool"], arguments, float(timeout), "cli" if cli else "api"
            )
        except UnknownServer as exc:
            return _error(404, str(exc), "unknown-server")
        except CallError as exc:
            return _error(502 if exc.transport_failure else 503, str(exc), exc.kind)
        return JSONResponse({"result": result})

    async def logs(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            lines = int(request.query_params.get("n", "100"))
            tail = list(supervisor.server(name).stderr_tail)
        except ValueError:
            return _error(400, "n must be a number of lines", "bad-request")
        except McpTrayError as exc:
            return _error(404, str(exc), "unknown-server")
        return JSONResponse({"lines": tail[-lines:] if lines > 0 else []})

    async def tools(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            server = supervisor.server(name)
        except UnknownServer as exc:
            return _error(404, str(exc), "unknown-server")
        return JSONResponse(offer_of(server).to_json())

    async def sessions(request: Request) -> Response:
        return JSONResponse({"sessions": target.sessions_json()})

    async def reset(request: Request) -> Response:
        session_id = request.path_params["session"]
        try:
            session = target.sessions.reset(session_id)
        except UnknownSession as exc:
            return _error(404, str(exc), "unknown-session")
        return JSONResponse({"ok": True, "session": session.to_json()})

    async def reset_all(request: Request) -> Response:
        return JSONResponse({"ok": True, "reset": target.sessions.reset_all()})

    async def workers(request: Request) -> Response:
        return JSONResponse({"workers": target.workers_json()})

    async def warnings(request: Request) -> Response:
        return JSONResponse({"warnings": target.warnings_json()})

    async def profiles(request: Request) -> Response:
        limits = [limit._asdict() for limit in CLIENT_TOOL_LIMITS]
        body = {"profiles": target.profiles_json(), "estimate": ESTIMATE, "client_limits": limits}
        return JSONResponse(body)

    async def calls(request: Request) -> Response:
        try:
            wanted = calls_query(request.query_params, time.time())
        except ValueError as exc:
            return _error(400, str(exc), "bad-request")
        return JSONResponse({"calls": await target.calls_json(wanted)})

    async def raise_window(request: Request) -> Response:
        if target.raise_window():
            return JSONResponse({"ok": True})
        return _error(409, "this mcp-tray runs headless: there is no window to raise", "headless")

    async def quit_tray(request: Request) -> Response:
        # Answered first; the runner stops every server by the stop contract, then exits.
        if target.quit():
            return JSONResponse({"ok": True, "stopping": True}, status_code=202)
        return _error(409, "this mcp-tray cannot be asked to quit (no runner listens)", "no-runner")

    async def approvals(request: Request) -> Response:
        held = target.approvals
        return JSONResponse(
            {
                "pending": [item.to_json() for item in held.snapshots()],
                "always": [grant.to_json() for grant in held.grants()],
            }
        )

    async def approve(request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        scope = body.get("scope", "once") if isinstance(body, dict) else None
        if scope not in SCOPES:
            return _error(400, f'"scope" must be one of {", ".join(SCOPES)}', "bad-request")
        try:
            text = await target.approvals.approve(request.path_params["id"], scope)
        except ApprovalError as exc:
            return _error(404, str(exc), "unknown-approval")
        return JSONResponse({"ok": True, "text": text})

    async def deny(request: Request) -> Response:
        try:
            text = target.approvals.deny(request.path_params["id"])
        except ApprovalError as exc:
            return _error(404, str(exc), "unknown-approval")
        return JSONResponse({"ok": True, "text": text})

    async def revoke(request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body, dict) or not all(
            isinstance(body.get(key), str) for key in ("server", "tool")
        ):
            return _error(400, 'the body needs "server" and "tool" strings', "bad-request")
        if not await target.approvals.revoke(body["server"], body["tool"]):
            return _error(
                404,
                f"{body['tool']!r} of {body['server']!r} is not always allowed "
                "(see mcp-tray approvals)",
                "unknown-grant",
            )
        return JSONResponse({"ok": True})

    async def metrics(request: Request) -> Response:
        return Response(target.metrics(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return [
        Route("/api/v1/status", status, methods=["GET"]),
        action("respawn", supervisor.respawn),
        action("stop", supervisor.stop_server),
        action("start", supervisor.start_server),
        Route("/api/v1/servers/{name}/call", call, methods=["POST"]),
        Route("/api/v1/servers/{name}/logs", logs, methods=["GET"]),
        Route("/api/v1/servers/{name}/tools", tools, methods=["GET"]),
        Route("/api/v1/sessions", sessions, methods=["GET"]),
        Route("/api/v1/sessions/reset-all", reset_all, methods=["POST"]),
        Route("/api/v1/sessions/{session}/reset", reset, methods=["POST"]),
        Route("/api/v1/workers", workers, methods=["GET"]),
        Route("/api/v1/warnings", warnings, methods=["GET"]),
        Route("/api/v1/profiles", profiles, methods=["GET"]),
        Route("/api/v1/calls", calls, methods=["GET"]),
        Route("/api/v1/ui/raise", raise_window, methods=["POST"]),
        Route("/api/v1/quit", quit_tray, methods=["POST"]),
        Route("/api/v1/approvals", approvals, methods=["GET"]),
        Route("/api/v1/approvals/revoke", revoke, methods=["POST"]),
        Route("/api/v1/approvals/{id}/approve", approve, methods=["POST"]),
        Route("/api/v1/approvals/{id}/deny", deny, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]


def gateway_server(path: str) -> str | None:
    """The server a gateway path names, as Starlette would match the gateway's two routes,
    ``/mcp/{server}`` then ``/{server}/mcp`` (a name is one non-empty path segment); ``""``
    for ``/mcp`` itself (every server, core.serving.aggregate.aggregate); else None."""
    if path == "/mcp":
        return ""
    if path.startswith("/mcp/") and _one_segment(name := path[5:]):
        return name
    if path.endswith("/mcp") and _one_segment(name := path[1:-4]):
        return name
    return None


def _one_segment(name: str) -> bool:
    return bool(name) and "/" not in name


class GatewayFront:
    """The gateway's paths straight to the gateway; everything else to the Starlette app.

    Every tool call of every client comes this way, and Starlette would first try the
    control routes one by one (a regular expression each) under two layers of
    exception middleware the gateway has no use for: it answers its own errors, and
    uvicorn turns anything it lets escape into a 500 as Starlette would. The app keeps
    the gateway's routes too, for what only Starlette does with them (the redirect of
    ``/mcp/echo/`` to ``/mcp/echo``).
    """

    def __init__(self, app: ASGIApp, gateway: ASGIApp) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (server := gateway_server(scope["path"])) is not None:
            scope["path_params"] = {"server": server}
            await self.gateway(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_app(
    routes: list[BaseRoute],
    token: Callable[[], str],
    on_trusted: Callable[[tuple[str, int] | None], None] | None = None,
    gateway: ASGIApp | None = None,
) -> ASGIApp:
    """The control API's routes behind the guard; with ``gateway``, its paths go to it first
    (``GatewayFront``)."""
    app: ASGIApp = Starlette(routes=routes)
    if gateway is not None:
        app = GatewayFront(app, gateway)
    return GuardMiddleware(app, token, on_trusted=on_trusted)
