"""``mcp-tray connect NAME``: a stdio MCP server that AI clients launch, relaying to the gateway.

The client speaks newline-delimited JSON-RPC on our stdin/stdout; each
message is POSTed as is to ``/mcp/NAME`` on the running tray, and whatever
comes back (a JSON body, or SSE events: progress, a sampling request, then
the answer) is written back line by line. The standalone GET stream carries
notifications not tied to a request. Messages are relayed as bytes, never
re-modelled, so nothing the client or server says is lost in translation.

The bridge registers itself as a worker (client identity from
``MCP_TRAY_CLIENT``/``_INSTANCE``/``_SESSION``, else its parent process) and
heartbeats from a daemon thread. A second bridge for the same client session
claims the row: this one is fenced, says so on stderr, and exits. On stdin
EOF it deregisters and exits 0. When the tray is not running it says so in
one line and exits 3 (it does not start a tray of its own: a tray started
inside a client's process tree would die with the client).
"""

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import psutil

from core import __version__
from core.base.envvars import CLIENT_INSTANCE_ENV, CLIENT_NAME_ENV, CLIENT_SESSION_ENV
from core.base.errors import HttpError, NotRunning, RegistryFileError
from core.bridge.http1 import Pool, Response
from core.protocol.headers import CLIENT_HEADER, PROTOCOL_HEADER, SESSION_HEADER, WORKER_HEADER
from core.registry.heartbeat import WorkerHeartbeatSupervisor, heartbeat_settings
from core.registry.identity import normalize_client_name, worker_identity
from core.registry.records import ROLE_BRIDGE, HeartbeatOutcome
from core.registry.store import WorkerRegistry
from core.settings.paths import Paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_NOT_RUNNING: Final = 3
#: At stdin EOF, how long requests already sent may still deliver answers.
DRAIN_SECONDS: Final = 2.0
#: At exit, how long the DELETE that ends the gateway session may take.
DELETE_SECONDS: Final = 2.0
#: After the standalone GET stream drops, how long before it is reopened.
GET_STREAM_RETRY_SECONDS: Final = 1.0


@dataclass(frozen=True)
class BridgeIdentity:
    client: str
    instance: str
    session: str


def bridge_identity(environ: dict[str, str] | os._Environ[str], parent_pid: int) -> BridgeIdentity:
    """Who launched us: the MCP_TRAY_CLIENT* variables, else the parent process."""
    parent_name, parent_started = "unknown", 0
    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(parent_pid)
        parent_name = parent.name()
        parent_started = int(parent.create_time())
    client = environ.get(CLIENT_NAME_ENV) or parent_name
    instance = environ.get(CLIENT_INSTANCE_ENV) or str(parent_pid)
    session = (
        environ.get(CLIENT_SESSION_ENV)
        or f"{normalize_client_name(client)}-{parent_pid}-{parent_started}"
    )
    return BridgeIdentity(client, instance, session)


class Attachment:
    """This bridge's worker row and its heartbeat."""

    def __init__(
        self, registry: WorkerRegistry, identity: str, supervisor: WorkerHeartbeatSupervisor
    ) -> None:
        self.registry = registry
        self.identity = identity
        self.supervisor = supervisor

    @classmethod
    def attach(cls, paths: Paths, server: str, who: BridgeIdentity, on_fenced: Any) -> "Attachment":
        settings = heartbeat_settings(os.environ)
        registry = WorkerRegistry(paths.registry_file)
        client = normalize_client_name(who.client)
        pid = os.getpid()
        holder = next(
            (
                row
                for row in registry.list_workers(session_id=who.session)
                if row.role == ROLE_BRIDGE and row.server == server and registry.is_live(row).live
            ),
            None,
        )
        if holder is not None:
            # Same client session, newer bridge: take the row over; the old
            # holder's next beat is refused as fenced.
            claim = registry.claim_generation(holder.worker_identity, pid=pid)
            identity, epoch = (
                holder.worker_identity,
                claim.fencing_epoch or holder.fencing_epoch + 1,
            )
        else:
            identity = worker_identity(client, who.session, registry.wall_clock())
            registration = registry.register(
                worker_identity=identity,
                client_name=client,
                client_instance=who.instance,
                session_id=who.session,
                role=ROLE_BRIDGE,
                server=server,
                pid=pid,
                heartbeat_ttl_seconds=settings.ttl_seconds,
                runtime_version=__version__,
            )
            epoch = registration.fencing_epoch
        supervisor = WorkerHeartbeatSupervisor(
            registry,
            worker_identity=identity,
            fencing_epoch=epoch,
            ttl_seconds=settings.ttl_seconds,
            session_id=who.session,
            client_name=client,
            pid=pid,
            interval_seconds=settings.interval_seconds,
            on_refused=on_fenced,
        )
        supervisor.start()
        return cls(registry, identity, supervisor)

    def detach(self) -> None:
        fenced = self.supervisor.stopped_reason is not None
        self.supervisor.stop("bridge exiting")
        if not fenced:
            # Still ours: remove it. A fenced row belongs to the newer bridge.
            self.registry.remove(self.identity)
        self.registry.close()


class Relay:
    """Stdin lines to POSTs, replies (JSON or SSE events) to stdout lines."""

    def __init__(self, url: str, headers: dict[str, str], out: asyncio.StreamWriter | Any) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self._pool = Pool(parts.hostname or "127.0.0.1", parts.port or 80)
        self._headers = headers
        self._out = out
        self._write_lock = asyncio.Lock()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._get_stream: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        if self._get_stream is not None:
            self._get_stream.cancel()
        if self._tasks:
            # Let answers already on their way reach the client.
            await asyncio.wait(list(self._tasks), timeout=DRAIN_SECONDS)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(
            *self._tasks, *([self._get_stream] if self._get_stream else []), return_exceptions=True
        )
        if self.session_id is not None:
            with contextlib.suppress(HttpError, OSError, TimeoutError):
                async with asyncio.timeout(DELETE_SECONDS):
                    async with self._pool.request(
                        "DELETE", self.path, self._session_headers()
                    ) as reply:
                        await reply.read()
        self._pool.close()

    def _session_headers(self) -> dict[str, str]:
        headers = {
            **self._headers,
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version:
            headers[PROTOCOL_HEADER] = self.protocol_version
        return headers

    async def emit(self, data: bytes) -> None:
        async with self._write_lock:
            self._out.write(data.rstrip(b"\n") + b"\n")
            await self._out.drain()

    def submit(self, line: bytes) -> None:
        task = asyncio.get_running_loop().create_task(self._forward(line))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            await self.emit(
                _error(None, -32700, "Parse error: the bridge got a line that is not JSON")
            )
            return
        is_initialize = isinstance(message, dict) and message.get("method") == "initialize"
        request_id = (
            message.get("id") if isinstance(message, dict) and "method" in message else None
        )
        try:
            async with self._pool.request(
                "POST", self.path, self._session_headers(), line.strip()
            ) as reply:
                if is_initialize:
                    self.session_id = reply.headers.get(SESSION_HEADER)
                content_type = reply.headers.get("content-type", "")
                if content_type.startswith("text/event-stream"):
                    await self._relay_events(reply)
                    return
                body = await reply.read()
                if reply.status == 202:
                    return
                if body:
                    if is_initialize and reply.status == 200:
                        self._note_version(body)
                    await self.emit(body)
                elif request_id is not None:
                    await self.emit(
                        _error(request_id, -32603, f"mcp-tray answered HTTP {reply.status}")
                    )
        except (HttpError, OSError) as exc:
            if request_id is not None:
                await self.emit(
                    _error(
                        request_id,
                        -32603,
                        f"mcp-tray's gateway did not answer ({exc}); is mcp-tray still running?",
                    )
                )
            return
        finally:
            if is_initialize and self.session_id and self._get_stream is None:
                self._get_stream = asyncio.get_running_loop().create_task(self._listen())

    def _note_version(self, body: bytes) -> None:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            self.protocol_version = json.loads(body)["result"]["protocolVersion"]

    async def _relay_events(self, reply: Response) -> None:
        buffer = b""
        data: list[bytes] = []
        async for chunk in reply.chunks():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                text = raw.rstrip(b"\r")
                if text.startswith(b"data:"):
                    data.append(text[5:].lstrip(b" "))
                elif not text and data:
                    await self.emit(b"\n".join(data))
                    data = []
        if data:
            await self.emit(b"\n".join(data))

    async def _listen(self) -> None:
        """The session's GET stream: notifications not tied to a request."""
        while True:
            try:
                headers = {**self._session_headers(), "accept": "text/event-stream"}
                async with self._pool.request("GET", self.path, headers) as reply:
                    if reply.status != 200:
                        return
                    await self._relay_events(reply)
            except (HttpError, OSError):
                pass
            await asyncio.sleep(GET_STREAM_RETRY_SECONDS)


def _error(request_id: Any, code: int, message: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    ).encode()


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout.buffer
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(name: str, paths: Paths) -> int:
    try:
        info = running_instance(paths)
    except NotRunning:
        print(
            f"mcp-tray: not running, so {name!r} is unavailable. Start it (mcp-tray, or mcp-tray run --headless), "
            "then restart this client's MCP server.",
            file=sys.stderr,
        )
        return EXIT_NOT_RUNNING
    token = await asyncio.to_thread(read_token, paths.token_file)
    if token is None:
        print(
            f"mcp-tray: no API token found (keyring or {paths.token_file}); restart mcp-tray",
            file=sys.stderr,
        )
        return EXIT_NOT_RUNNING
    who = bridge_identity(os.environ, os.getppid())
    fenced = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_fenced(outcome: HeartbeatOutcome) -> None:
        print(
            f"mcp-tray connect {name}: {outcome}; a newer bridge took over this session, exiting",
            file=sys.stderr,
        )
        loop.call_soon_threadsafe(fenced.set)

    try:
        attachment = await asyncio.to_thread(Attachment.attach, paths, name, who, on_fenced)
    except RegistryFileError as exc:
        print(f"mcp-tray connect {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    headers = {
        "authorization": f"Bearer {token}",
        CLIENT_HEADER: normalize_client_name(who.client),
        WORKER_HEADER: attachment.identity,
    }
    reader, writer = await _stdio()
    relay = Relay(f"{info.url}/mcp/{name}", headers, writer)
    try:
        stdin_done = asyncio.ensure_future(_pump_stdin(reader, relay))
        fenced_wait = asyncio.ensure_future(fenced.wait())
        await asyncio.wait([stdin_done, fenced_wait], return_when=asyncio.FIRST_COMPLETED)
        stdin_done.cancel()
        fenced_wait.cancel()
    finally:
        await relay.aclose()
        await asyncio.to_thread(attachment.detach)
    return EXIT_FAILED if fenced.is_set() else EXIT_OK


async def _pump_stdin(reader: asyncio.StreamReader, relay: Relay) -> None:
    while True:
        line = await reader.readline()
        if not line:
            return
        if line.strip():
            relay.submit(line)


def run(name: str, paths: Paths) -> int:
    return asyncio.run(serve(name, paths))
