"""A raw line client of a real `mcp-tray connect` bridge, for what the SDK client cannot send.

The SDK's stdio client sends nothing before ``initialize`` but a ping, never a
2025-03-26 batch, and never closes its input under a call it awaits; this
one writes any JSON line and reads the bridge's lines, each within a bound.
"""

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from tests.support.gateway_support import REPO


def hello(request_id: int, version: str = "2025-06-18") -> dict[str, Any]:
    """A handshake-era initialize."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "lines", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


class LineClient:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls, env: dict[str, str], name: str, *extra: str
    ) -> AsyncIterator["LineClient"]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "core.cli.main",
            "connect",
            name,
            *extra,
            env=env,
            cwd=str(REPO),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        try:
            yield cls(proc)
        finally:
            # Closed even when the bridge already exited: an open stdin transport
            # outlives the test and warns (ResourceWarning) in whichever test GC meets it.
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
            if proc.returncode is None:
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()

    async def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def read(self, timeout: float = 10.0) -> Any:
        """The bridge's next line, parsed (AssertionError when none comes in time)."""
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        except TimeoutError:
            raise AssertionError(f"the bridge wrote nothing within {timeout} s") from None
        assert line, "the bridge closed its output"
        return json.loads(line)

    async def ask(self, message: dict[str, Any], timeout: float = 10.0) -> Any:
        """Send a request, and read lines until its answer (notifications skipped)."""
        await self.send(message)
        while True:
            answer = await self.read(timeout)
            if isinstance(answer, dict) and answer.get("id") == message["id"]:
                return answer

    async def close_input(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    async def exit_code(self, timeout: float = 10.0) -> int:
        return await asyncio.wait_for(self.proc.wait(), timeout)
