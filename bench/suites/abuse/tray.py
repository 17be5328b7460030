"""The abuse bench's main tray: started under a chosen file limit, watched over the
control API, stopped by its stop contract.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import asyncio
import contextlib
import resource
import time
from pathlib import Path
from typing import IO, Any

import httpx2

from bench.harness.errors import BenchAborted
from bench.harness.processes import stop_tray
from bench.harness.tray import SERVER, server_entry, spawn_tray
from bench.suites.abuse.constants import PROBE_SECONDS, READY_SECONDS, STOP_SECONDS
from core.base.errors import NotRunning
from core.settings.paths import Paths, default_paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token


class Tray:
    """The main headless tray on the private home; its output goes to a file."""

    def __init__(
        self, home: Path, config: Path, log: IO[bytes], file_limit: int | None = None
    ) -> None:
        self.home = home
        self.config = config
        #: Started under this RLIMIT_NOFILE (soft and hard), else under ours.
        self.file_limit = file_limit
        self.paths: Paths = default_paths({"MCP_TRAY_HOME": str(home)})
        self.log = log
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.port = 0
        self.token = ""
        self.api: httpx2.AsyncClient | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> None:
        if self.process is None or self.process.returncode is not None:
            code = None if self.process is None else self.process.returncode
            raise BenchAborted(f"the tray is gone (exit code {code})")

    async def start(self) -> None:
        limit = self.file_limit

        def limited() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.process = await spawn_tray(self.config, self.home, self.log, limited)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise BenchAborted(f"the tray exited with {self.process.returncode} at start-up")
            with contextlib.suppress(NotRunning):
                info = running_instance(self.paths)
                if info.pid == self.pid:
                    self.url, self.port = info.url, info.port
                    break
            await asyncio.sleep(0.05)
        else:
            raise BenchAborted(f"the tray was not up within {READY_SECONDS:g} s")
        self.token = read_token(self.paths.token_file) or ""
        if not self.token:
            raise BenchAborted(f"no API token in {self.paths.token_file}")
        self.api = httpx2.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx2.Timeout(PROBE_SECONDS),
        )
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx2.HTTPError, ValueError):
                if server_entry(await self.status(), SERVER).get("state") == "ready":
                    return
            await asyncio.sleep(0.1)
        raise BenchAborted(f"{SERVER} not ready within {READY_SECONDS:g} s")

    async def status(self) -> dict[str, Any]:
        """``/api/v1/status`` over the bench's own kept-alive connection."""
        assert self.api is not None
        reply = await self.api.get("/api/v1/status")
        reply.raise_for_status()
        body = reply.json()
        return body if isinstance(body, dict) else {}

    async def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL its group as a last resort (then None)."""
        if self.api is not None:
            await self.api.aclose()
            self.api = None
        return await stop_tray(self.process, STOP_SECONDS)
