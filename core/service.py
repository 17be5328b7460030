"""Everything one running mcp-tray is, put together: headless and GUI share it.

``TrayService`` takes the instance lock, sweeps leftovers, starts the
supervisor, serves the local HTTP API on 127.0.0.1, and publishes the
runtime file. ``aclose`` undoes it in reverse order, stopping every child by
the stop contract.
"""

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from core.api import build_app, control_routes
from core.config import TrayConfig
from core.managed import Timing
from core.paths import Paths
from core.runtime import Instance, RuntimeInfo, load_or_create_token
from core.supervisor import Supervisor

logger = logging.getLogger(__name__)


class TrayService:
    def __init__(self, config: TrayConfig, paths: Paths, *, timing: Timing | None = None) -> None:
        self.config = config
        self.paths = paths
        self.timing = timing
        self.instance: Instance | None = None
        self.supervisor: Supervisor | None = None
        self.info: RuntimeInfo | None = None
        self._server: uvicorn.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self.token = ""

    @property
    def url(self) -> str:
        return self.info.url if self.info else ""

    async def start(self) -> None:
        """Take the instance lock and bring everything up (``AlreadyRunning`` if taken)."""
        self.instance = Instance.acquire(self.paths)
        try:
            self.token = await asyncio.to_thread(load_or_create_token, self.paths.token_file)
            self.supervisor = Supervisor(self.config, self.paths, timing=self.timing)
            await self.supervisor.start()
            sock = _bind_loopback(self.config.gateway_port)
            port = sock.getsockname()[1]
            await self._serve(sock)
            self.info = self.instance.publish(port, self.supervisor.owner)
        except BaseException:
            await self.aclose()
            raise

    def _status_extra(self) -> dict[str, Any]:
        return {"gateway": {"url": self.url}}

    async def _serve(self, sock: socket.socket) -> None:
        assert self.supervisor is not None
        app = build_app(control_routes(self.supervisor, self._status_extra), lambda: self.token)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        server = _QuietServer(config)
        self._server = server
        self._serve_task = asyncio.create_task(server.serve(sockets=[sock]), name="mcp-tray:http")
        while not server.started:
            if self._serve_task.done():
                self._serve_task.result()
                raise RuntimeError("the local HTTP server stopped during start-up")
            await asyncio.sleep(0.005)

    async def aclose(self) -> None:
        if self._server is not None and self._serve_task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._serve_task, 5)
            self._server = None
        if self.supervisor is not None:
            await self.supervisor.aclose()
        if self.instance is not None:
            self.instance.release()
            self.instance = None


class _QuietServer(uvicorn.Server):
    """uvicorn without its own SIGINT/SIGTERM handlers: the owner of the loop
    (the headless runner or the Qt app) decides how mcp-tray stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind_loopback(port: int) -> socket.socket:
    """Bind 127.0.0.1 only, never a wildcard address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise OSError(
            exc.errno,
            f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); set gateway.port to 0 or a free port",
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def demo_config_path() -> Path:
    return Path(__file__).resolve().parent.parent / "resources" / "demo" / "config.json"
