"""Everything one running mcp-tray is, put together: headless and GUI share it.

``TrayService.start`` takes the instance lock, binds 127.0.0.1 on the
configured gateway port (or, when that port is taken, on a free one, with a
warning: the tray is never the weak link, docs/design.md §3.10), loads the API token
(keyring, else a 0600 file with a warning), sweeps leftovers, starts the
supervisor, the worker registry watch and the gateway, serves HTTP, and
publishes the runtime file. ``aclose`` undoes it in reverse order, stopping
every child by the stop contract.
"""

import asyncio
import contextlib
import dataclasses
import errno
import logging
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import psutil
import uvicorn
from starlette.routing import Route

from core.base.errors import TelemetryUnavailable
from core.base.snapshot import ProfileSnapshot, WarningSnapshot, WorkerSnapshot
from core.platform.backends import backends
from core.platform.files import raise_file_limit
from core.platform.login_path import path_origin
from core.platform.memory import return_large_blocks
from core.platform.sockets import apply_listening_options
from core.registry.journal import JOURNAL_FILE, CallQuery, JournalStore, JournalWriter
from core.registry.journal_rows import CallRecord
from core.registry.worker_watch import WorkerWatch
from core.serving.calls.approvals import Approvals
from core.serving.config_watch import ConfigWatcher
from core.serving.http.api import build_app, control_routes
from core.serving.http.express import Express
from core.serving.http.gateway import Gateway
from core.serving.http.http_guard import (
    ACCEPTS_PER_WAKEUP,
    LISTEN_BACKLOG,
    AcceptErrorThrottle,
    ConnectionGuard,
    HttpLimits,
    connection_cap,
    guarded_protocol,
    lane_hook_missing,
)
from core.serving.observe.activity import attach as attach_activity
from core.serving.observe.call_journal import keyring_values
from core.serving.observe.metrics import Metrics, SnapshotCollector
from core.serving.observe.process_stats import ProcessStats
from core.serving.observe.telemetry import Telemetry
from core.serving.sessions.session_store import SESSIONS_FILE
from core.serving.sessions.sessions import ClientSession, SessionTable
from core.settings.config import ServerConfig, TrayConfig
from core.settings.paths import Paths
from core.settings.runtime import PORT_TAKEN_FAMILY, Instance, RuntimeInfo
from core.settings.secrets import load_or_create_token, resolve_env
from core.supervision.run import Timing
from core.supervision.supervisor import Supervisor, Views

logger = logging.getLogger(__name__)

#: How long an idle HTTP connection stays open (uvicorn's default is 5 s).
KEEP_ALIVE_SECONDS: Final = 75
#: While uvicorn starts, how often to look whether it listens.
HTTP_START_CHECK_SECONDS: Final = 0.005
#: At shutdown, how long the HTTP server gets to close its connections.
HTTP_STOP_SECONDS: Final = 5.0


class TrayService:
    def __init__(
        self,
        config: TrayConfig,
        paths: Paths,
        *,
        timing: Timing | None = None,
        watch_config: bool = True,
        limits: HttpLimits | None = None,
        subreaper: bool = False,
    ) -> None:
        self.config = config
        self.watch_config = watch_config
        #: Whether this process is the tray, the one process that makes itself
        #: the subreaper of what its children leave (core.platform.reaper).
        self.subreaper = subreaper
        self.paths = paths
        self.timing = timing
        self.instance: Instance | None = None
        #: Values the servers' env took from the keyring: the call journal never keeps them.
        self._secrets: frozenset[str] = frozenset()
        self.supervisor = Supervisor(config, paths, timing=timing, env_resolver=self._resolve_env)
        self.sessions = SessionTable(self.supervisor.publish)
        self.sessions.on_reset = self._session_reset
        self.workers: WorkerWatch | None = None
        self.gateway = Gateway(
            self.supervisor,
            self.sessions,
            self,
            config.gateway.max_body_bytes,
            sessions_file=paths.state_dir / SESSIONS_FILE,
        )
        self._metrics = Metrics(
            SnapshotCollector(
                self.supervisor.snapshot,
                lambda: {
                    s.name: (s.calls, s.failures, s.respawn_requests)
                    for s in self.supervisor.all_servers()
                },
                self.sessions_json,
                self.workers_json,
            )
        )
        self.supervisor.on_call_done = self._metrics.observe
        #: Calls, failures and restarts per server over the last minutes (the
        #: window's sparklines); chained after the metrics on the same hook.
        self.activity = attach_activity(self.supervisor)
        #: The window samples CPU/RSS through it while it shows (app/usage.py).
        self.stats = ProcessStats()
        self.supervisor.views = Views(
            sessions=lambda: self.sessions.snapshots(
                self.workers.session_ownership if self.workers else None
            ),
            workers=lambda: tuple(WorkerSnapshot.from_row(row) for row in self.workers_json()),
            warnings=lambda: tuple(WarningSnapshot.from_row(row) for row in self.warnings_json()),
            profiles=self.profiles,
            approvals=lambda: self.approvals.snapshots(),
            grants=lambda: self.approvals.grants(),
        )
        self.watcher = ConfigWatcher(self.supervisor, config.path)
        self.watcher.on_applied = self._telemetry_for
        #: Every call through every door (core.serving.observe.call_journal); written from ``start``.
        self.journal = self.gateway.pipeline.journal
        self.journal.pid_of = self._worker_pid
        self._journal_writer: JournalWriter | None = None
        #: Set by the GUI: brings the window up when a second launch asks.
        self.on_raise: Callable[[], None] | None = None
        #: Set by whoever runs the service (headless, the GUI): asks it to stop and exit.
        self.on_quit: Callable[[], None] | None = None
        self.info: RuntimeInfo | None = None
        self.token = ""
        self._server: _QuietServer | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        #: Why the gateway does not listen on its configured port (one line), else None.
        self.port_notice: str | None = None
        self.limits = limits or HttpLimits()
        self.connections: ConnectionGuard | None = None
        #: The express lane's judge of plain calls (core.serving.http.express), kept for tests
        #: that compare it with the full path.
        self.express = Express(self.gateway, lambda: self.token)
        self._accept_errors: AcceptErrorThrottle | None = None

    @property
    def approvals(self) -> Approvals:
        """Held calls and changed tools waiting for the person (docs/design.md §3.14)."""
        return self.gateway.pipeline.approvals

    @property
    def url(self) -> str:
        return self.info.url if self.info else ""

    async def start(self) -> None:
        """Take the instance lock and bring everything up (``AlreadyRunning`` if taken)."""
        return_large_blocks()  # a large result must not leave its memory behind
        self.instance = Instance.acquire(self.paths)
        if self.subreaper:
            backends().reaper.enable(self.supervisor.owner)
        try:
            # The previous tray's sessions: only the instance holding the lock may read them.
            session_problems = await asyncio.to_thread(self.gateway.store.load)
            # Bound before any child starts, so a port problem is known (and
            # listed) from the first snapshot on; the lookup of who holds a
            # taken port reads /proc, hence the thread.
            sock, self.port_notice = await asyncio.to_thread(
                bind_gateway, self.config.gateway.port, self.config.path
            )
            self._sock = sock
            if self.port_notice is not None:
                logger.warning("mcp-tray: %s", self.port_notice)
            token = await asyncio.to_thread(load_or_create_token, self.paths.token_file)
            self.token = token.value
            self.workers = await asyncio.to_thread(
                WorkerWatch.open,
                self.paths.registry_file,
                self.supervisor.publish,
                servers_env=lambda: {n: s.env for n, s in self.supervisor.config.servers.items()},
            )
            if token.warning:
                self.workers.own_warnings.append(token.warning)
            self.workers.own_warnings.extend(session_problems)
            if self.port_notice is not None:
                self.workers.own_warnings.append(f"{PORT_TAKEN_FAMILY}: {self.port_notice}")
            await self.approvals.load()
            await asyncio.to_thread(self._open_journal, asyncio.get_running_loop())
            await self._telemetry_for(self.config)
            await self.supervisor.start()
            self.workers.start()
            if self.watch_config:
                self.watcher.start()
            await self._serve(sock)
            self.info = self.instance.publish(
                sock.getsockname()[1],
                self.supervisor.owner,
                configured_port=self.config.gateway.port,
            )
        except BaseException:
            await self.aclose()
            raise

    # ------------------------------------------------------------- views

    def status_extra(self) -> dict[str, Any]:
        return {
            "gateway": {
                "url": self.url,
                "port": self.info.port if self.info else None,
                "configured_port": self.config.gateway.port,
                "fallback": self.port_notice,
            },
            "sessions": self.sessions_json(),
            "workers": self.workers_json(),
            # Where the PATH its servers are spawned with came from (core.platform.login_path).
            "path": path_origin().to_json(),
        }

    def sessions_json(self) -> list[dict[str, Any]]:
        return self.sessions.to_json(self.workers.session_ownership if self.workers else None)

    def workers_json(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self.workers.rows] if self.workers else []

    def warnings_json(self) -> list[dict[str, Any]]:
        """Every finding, each with its ``severity`` (core.base.severity's one rule)."""
        found = self.workers.warnings_json() if self.workers else []
        rows = [WarningSnapshot.from_row(row) for row in found] + list(self.supervisor.notices())
        return [row.to_json() for row in rows]

    def profiles(self) -> tuple[ProfileSnapshot, ...]:
        """Each profile (and ``all``): its servers, tools, what it costs, who is connected."""
        return self.gateway.aggregate.snapshots()

    def profiles_json(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(profile) for profile in self.profiles()]

    def metrics(self) -> bytes:
        return self._metrics.render()

    def raise_window(self) -> bool:
        """A second launch asked for the window; False when headless."""
        if self.on_raise is None:
            return False
        self.on_raise()
        return True

    def quit(self) -> bool:
        """``mcp-tray quit`` asked the tray to stop (the polite stop on every OS,
        Windows' included, where no SIGTERM exists); False when nobody can."""
        if self.on_quit is None:
            return False
        self.on_quit()
        return True

    # ------------------------------------------------------ gateway hooks

    def session_opened(self, session: ClientSession) -> None:
        if self.workers is not None:
            self.workers.session_opened(session)

    def session_closed(self, session: ClientSession) -> None:
        if self.workers is not None:
            self.workers.session_closed(session)

    def worker_alive(self, identity: str) -> bool | None:
        """Whether a bridge's worker row is live (None: no registry to ask)."""
        if self.workers is None or self.workers.registry is None:
            return None
        row = next((r for r in self.workers.rows if r.get("worker_identity") == identity), None)
        return row is not None and row.get("status") == "live"

    async def call_tool(
        self,
        name: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None,
        door: str = "api",
    ) -> dict[str, Any]:
        """A tool call of mcp-tray's own (the command line): through the gateway's pipeline."""
        return await self.gateway.pipeline.own_call(name, tool, arguments, timeout, door)

    # ------------------------------------------------------------ journal

    def _resolve_env(self, config: ServerConfig) -> dict[str, str]:
        env = resolve_env(config)
        found = keyring_values(config.secret_values, env)
        if not found <= self._secrets:
            self._secrets = self._secrets | found
        return env

    def _open_journal(self, loop: asyncio.AbstractEventLoop) -> None:
        """The call journal's file and writer (a thread); a file that cannot be used is a
        warning, never a failed start."""
        path = self.paths.state_dir / JOURNAL_FILE
        try:
            store, warning = JournalStore.open(path, time.time())
        except (sqlite3.Error, OSError) as exc:
            self._journal_warning(
                f"journal-unusable: the call journal {path} cannot be used ({exc})"
            )
            return
        if warning is not None:
            self._journal_warning(warning)

        def written(records: list[CallRecord]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed first
                loop.call_soon_threadsafe(self.journal.published, records)

        def warn(text: str) -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._journal_warning, text)

        self._journal_writer = JournalWriter(
            store,
            retention=lambda: self.supervisor.config.journal,
            secrets=lambda: self._secrets,
            on_written=written,
            on_warning=warn,
        )
        self._journal_writer.start()
        self.journal.writer = self._journal_writer

    async def _telemetry_for(self, config: TrayConfig) -> None:
        """Spans to the endpoint ``config`` names: the exporter made anew when it changed,
        a missing ``otel`` extra a warning (the calls go on without spans)."""
        endpoint = config.otlp_endpoint
        current = self.journal.telemetry
        if current is not None and current.endpoint == endpoint:
            return
        await self._end_telemetry()
        if endpoint is None:
            return
        try:
            # The SDK's first import takes a moment: off the loop.
            self.journal.telemetry = await asyncio.to_thread(Telemetry, endpoint)
        except TelemetryUnavailable as exc:
            self._journal_warning(str(exc))
            return
        logger.info("mcp-tray: spans of every call go to %s", endpoint)

    async def _end_telemetry(self) -> None:
        telemetry, self.journal.telemetry = self.journal.telemetry, None
        if telemetry is not None:
            await asyncio.to_thread(telemetry.close)

    def _journal_warning(self, text: str) -> None:
        logger.warning("mcp-tray: %s", text)
        if self.workers is not None:
            self.workers.own_warnings.append(text)

    def _worker_pid(self, identity: str) -> int | None:
        if self.workers is None:
            return None
        row = next((r for r in self.workers.rows if r.get("worker_identity") == identity), None)
        pid = row.get("pid") if row else None
        return pid if isinstance(pid, int) else None

    async def calls_json(self, wanted: CallQuery) -> list[dict[str, Any]]:
        """The journal's records ``wanted`` names (read on a thread, beside the writer)."""
        writer = self._journal_writer
        if writer is None:
            return []
        records = await asyncio.to_thread(writer.query, wanted)
        return [record.to_json() for record in records]

    def _session_reset(self, session: ClientSession) -> None:
        """A reset session's server, and the children made from its entry, are tried
        again at once: their breakers close (not a parked or stopped one's)."""
        for server in self.supervisor.all_servers():
            if server.name == session.server or server.name.startswith(f"{session.server}@"):
                server.close_breaker(f"session {session.id} was reset")

    # ------------------------------------------------------------ HTTP

    async def _serve(self, sock: socket.socket) -> None:
        routes = [
            *control_routes(self),
            # Every enabled server at once (core.serving.aggregate.aggregate).
            Route("/mcp", self.gateway),
            Route("/mcp/{server}", self.gateway),
            # The MCP Inspector rewrites any URL that does not end in /mcp.
            Route("/{server}/mcp", self.gateway),
        ]
        guard = ConnectionGuard(
            self.limits, connection_cap(self.limits.max_connections, raise_file_limit())
        )
        self.connections = guard
        lane_off = lane_hook_missing()
        if lane_off is not None:
            logger.warning(
                "mcp-tray: the express lane is off (%s); calls take the full path", lane_off
            )
        loop = asyncio.get_running_loop()
        self._accept_errors = AcceptErrorThrottle(loop.get_exception_handler())
        loop.set_exception_handler(self._accept_errors)
        app = build_app(routes, lambda: self.token, on_trusted=guard.trust, gateway=self.gateway)
        config = uvicorn.Config(
            app,
            http=guarded_protocol(guard, self.express),
            log_level="warning",
            lifespan="off",
            access_log=False,
            # Bridges keep their connection between a client's calls.
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            # Loopback clients have no use for it, and it needs a 1 Hz refresh.
            date_header=False,
            # No proxy stands in front of a loopback tray: X-Forwarded-For from a local
            # process must not rename the peer that connection trust and stateless
            # identity go by (uvicorn believes it from 127.0.0.1 by default).
            proxy_headers=False,
            # asyncio accepts this many per wake-up (and listens with it):
            # bounded, so the cap sheds between bites of a burst.
            backlog=ACCEPTS_PER_WAKEUP,
        )
        server = _QuietServer(config)
        self._server = server
        self._serve_task = asyncio.create_task(server.serve(sockets=[sock]), name="mcp-tray:http")
        while not server.started:
            if self._serve_task.done():
                self._serve_task.result()
                raise RuntimeError("the local HTTP server stopped during start-up")
            await asyncio.sleep(HTTP_START_CHECK_SECONDS)
        # asyncio listened with the bite size: the kernel's queue gets its own.
        sock.listen(LISTEN_BACKLOG)

    async def aclose(self) -> None:
        # Held calls are answered first: they would hold up the HTTP server's stop.
        self.approvals.close()
        if self._server is not None and self._serve_task is not None:
            self._server.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._serve_task, HTTP_STOP_SECONDS)
            self._server = None
        if self._sock is not None:
            # uvicorn closed it if it served; if start failed before, nobody did.
            self._sock.close()
            self._sock = None
        if self._accept_errors is not None:
            loop = asyncio.get_running_loop()
            if loop.get_exception_handler() is self._accept_errors:
                loop.set_exception_handler(self._accept_errors.previous)
            self._accept_errors = None
        await self.watcher.aclose()
        await self.gateway.aclose()
        if self._journal_writer is not None:
            self.journal.writer = None
            await asyncio.to_thread(self._journal_writer.stop)
            self._journal_writer = None
        await self._end_telemetry()
        if self.workers is not None:
            await self.workers.aclose()
        await self.supervisor.aclose()
        if self.instance is not None:
            self.instance.release()
            self.instance = None


class _QuietServer(uvicorn.Server):
    """uvicorn without its own SIGINT/SIGTERM handlers (the owner of the loop,
    the headless runner or the Qt app, decides how mcp-tray stops), and
    without its 10 Hz housekeeping tick: an idle tray should sleep."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        # No Date header (date_header=False), no request limit: the tick has
        # nothing to do but notice should_exit, which stop() signals instead.
        await self.on_tick(0)
        await self._stopping.wait()

    def stop(self) -> None:
        self.should_exit = True
        # Open SSE streams would hold a graceful shutdown forever.
        self.force_exit = True
        self._stopping.set()


def bind_gateway(port: int, config_path: Path) -> tuple[socket.socket, str | None]:
    """The gateway's listening socket: on ``port`` when it can, else on a free one.

    Returns the socket and, after a fallback, the one line that says so (for
    the log and the ``port-taken`` warning). A tray that refused to start
    over a busy port would take every client down with it, bridges included
    (they find the tray through the runtime file, whatever its port); only
    HTTP clients configured for ``port`` lose it, and the line says until when.
    Raises ``OSError`` only when no loopback port at all can be bound.
    """
    try:
        return _bind_loopback(port), None
    except OSError as exc:
        if port == 0:
            raise OSError(
                exc.errno,
                f"cannot listen on any port of 127.0.0.1 ({exc.strerror}); "
                "is the loopback interface up?",
            ) from None
        problem = _why_unusable(port, exc)
    try:
        sock = _bind_loopback(0)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"port {port} {problem}, and no other port of 127.0.0.1 can be bound "
            f"either ({exc.strerror}); is the loopback interface up?",
        ) from None
    actual = sock.getsockname()[1]
    notice = (
        f"port {port} {problem}; mcp-tray listens on {actual} instead — HTTP clients "
        f"configured for {port} will not reach it until port {port} is free and mcp-tray "
        f"restarts (bridges reach it anyway). Fix: stop what holds port {port}, or set "
        f"gateway.port in {config_path} to a free port and re-run mcp-tray client-config"
    )
    return sock, notice


def _why_unusable(port: int, exc: OSError) -> str:
    """``is taken (by pid 1234, node)``, or what else kept ``port`` from being bound."""
    if exc.errno == errno.EADDRINUSE:
        return f"is taken ({_port_holder(port)})"
    if exc.errno == errno.EACCES and port < 1024:
        return "cannot be used (ports below 1024 need root)"
    return f"cannot be used ({exc.strerror or exc})"


def _port_holder(port: int) -> str:
    """Who listens on ``port``, as far as this user may see (best effort)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return "address already in use"
    for conn in connections:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid is None:
            # Linux shows the socket but not the process when another user owns it.
            return "by a process of another user"
        try:
            name = psutil.Process(conn.pid).name()
        except psutil.Error:
            return f"by pid {conn.pid}"
        return f"by pid {conn.pid}, {name}"
    return "address already in use"


def _bind_loopback(port: int) -> socket.socket:
    """Bind 127.0.0.1 only, never a wildcard address."""
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted
    # sockets whose proto says TCP, and without it every SSE reply waits
    # ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # A restarted tray takes its port back over TIME_WAIT, and a *listening*
    # holder still makes bind fail, on every OS (core.platform.sockets).
    apply_listening_options(sock)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock
