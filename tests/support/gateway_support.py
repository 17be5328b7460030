"""Fixtures for gateway tests: a real TrayService in-process, real SDK clients."""

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import keyring
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageResult, ElicitResult
from mcp_types import TextContent

from core.base.envvars import AUTOSTART_ENV
from core.protocol.headers import SESSION_HEADER
from core.registry.journal import CallQuery
from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from core.settings.profiles import endpoint_path
from tests.conftest import ECHO, FAST_TIMING, python_server, wait_ready, wait_until
from tests.support import paths
from tests.support.fake_keyring import PATH_ENV, FileKeyring

REPO = paths.REPO


@pytest.fixture
def fake_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FileKeyring]:
    # Before the env points at the test keyring: keyring detects its backend
    # lazily, and must not adopt this one as "the" backend for later tests.
    previous = keyring.get_keyring()
    path = tmp_path / "keyring.json"
    monkeypatch.setenv(PATH_ENV, str(path))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "tests.support.fake_keyring.FileKeyring")
    backend = FileKeyring(path)
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def text(result: Any) -> str:
    """The text of an SDK tool result."""
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def worker_rows(service: TrayService, session: str) -> list[dict[str, Any]]:
    """The registry rows of a client session, freshly read."""
    assert service.workers is not None
    await service.workers.refresh()
    return [row for row in service.workers_json() if row["session_id"] == session]


async def worker_row(service: TrayService, session: str) -> dict[str, Any]:
    """A client session's one registry row, freshly read ({} when it has none)."""
    return next(iter(await worker_rows(service, session)), {})


class Services:
    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.started: list[TrayService] = []

    async def start(
        self,
        servers: dict[str, dict[str, Any]],
        profiles: dict[str, Any] | None = None,
        **sections: Any,
    ) -> TrayService:
        """A tray on these servers (and profiles, and other top-level ``sections``)."""
        document: dict[str, Any] = {"mcpServers": servers, **sections}
        if profiles is not None:
            document["profiles"] = profiles
        self.paths.config_file.write_text(json.dumps(document))
        service = TrayService(load_config(self.paths.config_file), self.paths, timing=FAST_TIMING)
        self.started.append(service)
        await service.start()
        return service


@pytest.fixture
async def services(tray_home: Paths) -> AsyncIterator[Services]:
    holder = Services(tray_home)
    yield holder
    for service in holder.started:
        await service.aclose()


@pytest.fixture
async def echo(services: Services) -> AsyncIterator[tuple[TrayService, httpx.AsyncClient]]:
    """A tray serving tests/servers/echo.py, ready, and a plain HTTP client for it."""
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    async with httpx.AsyncClient(timeout=30) as http:
        yield service, http


@contextlib.asynccontextmanager
async def http_client(
    service: TrayService, server: str, *, token: str | None = None, **session_kwargs: Any
) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token or service.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        async with streamable_http_client(
            service.url + endpoint_path(server), http_client=http
        ) as (
            read,
            write,
        ):
            async with ClientSession(read, write, **session_kwargs) as session:
                await session.initialize()
                yield session


def bridge_env(paths: Paths, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_") or k == PATH_ENV}
    env["MCP_TRAY_HOME"] = str(paths.state_dir.parent)
    env["PYTHONPATH"] = str(REPO)
    # A bridge here never starts a tray of its own: each test says which tray
    # runs (tests/bridge/test_bridge_autostart.py turns it back on).
    env[AUTOSTART_ENV] = "0"
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def bridge_client(
    paths: Paths,
    server: str,
    errlog: Any = None,
    session_kwargs: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", server],
        env=bridge_env(paths, **(env or {})),
        cwd=str(REPO),
    )
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
        async with ClientSession(read, write, **(session_kwargs or {})) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def sdk_client(
    service: TrayService, server: str, mode: str = "auto", **callbacks: Any
) -> AsyncIterator[Client]:
    """The SDK's high-level ``Client`` over HTTP (``mode="auto"`` speaks 2026-07-28 to the gateway)."""
    headers = {"Authorization": f"Bearer {service.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(service.url + endpoint_path(server), http_client=http)
        async with Client(transport, mode=mode, cache=None, **callbacks) as client:
            yield client


@contextlib.asynccontextmanager
async def sdk_bridge(
    paths: Paths,
    server: str,
    mode: str = "auto",
    env: dict[str, str] | None = None,
    **callbacks: Any,
) -> AsyncIterator[Client]:
    """The SDK's high-level ``Client`` through a real ``mcp-tray connect`` bridge."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core.cli.main", "connect", server],
        env=bridge_env(paths, **(env or {})),
        cwd=str(REPO),
    )
    async with Client(params, mode=mode, cache=None, **callbacks) as client:
        yield client


def modern_request(
    method: str, params: dict[str, Any] | None = None, request_id: int = 1, **envelope: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """A raw 2026-07-28 request and the headers it must carry (its envelope declares
    ``envelope`` as client capabilities)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": envelope,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if params and isinstance(params.get("name"), str):
        headers["mcp-name"] = params["name"]
    return body, headers


async def modern_post(
    service: TrayService,
    server: str,
    method: str,
    params: dict[str, Any] | None = None,
    **envelope: Any,
) -> dict[str, Any]:
    """One 2026-07-28 request on a connection of its own (opened and closed for it)."""
    body, headers = modern_request(method, params, **envelope)
    headers["authorization"] = f"Bearer {service.token}"
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        reply = await http.post(service.url + endpoint_path(server), json=body, headers=headers)
    answer: dict[str, Any] = reply.json()
    return answer


# A hand-held HTTP client for the gateway's own tests: every status, header and byte seen.

BOTH = "application/json, text/event-stream"


def initialize(version: str = "2025-06-18", request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


def call(request_id: int, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class Raw:
    """A hand-held HTTP client for one gateway endpoint."""

    def __init__(self, http: httpx.AsyncClient, service: TrayService, path: str) -> None:
        self.http = http
        self.url = f"{service.url}{path}"
        self.token = service.token
        self.session: str | None = None

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "accept": BOTH,
        }
        if self.session:
            headers[SESSION_HEADER] = self.session
        headers.update(extra)
        return headers

    async def post(self, body: Any, **headers: str) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.http.post(self.url, content=content, headers=self.headers(**headers))

    async def open(self, version: str = "2025-06-18") -> None:
        reply = await self.post(initialize(version))
        assert reply.status_code == 200, reply.text
        self.session = reply.headers[SESSION_HEADER]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, in order."""
    return [
        json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")
    ]


#: A POST from a process of its own (argv: url, token, body, headers; prints the answer).
OTHER_PROCESS = """
import json, sys, httpx
url, token, body, headers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
headers["authorization"] = "Bearer " + token
print(json.dumps(httpx.post(url, json=body, headers=headers, timeout=30).json()))
"""


def post_from_another_process(
    service: TrayService, server: str, body: Any, headers: Any
) -> dict[str, Any]:
    """One request to ``/mcp/SERVER`` from another process: its peer is not this one."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            OTHER_PROCESS,
            f"{service.url}/mcp/{server}",
            service.token,
            json.dumps(body),
            json.dumps(headers),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=str(REPO),
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


async def journaled(
    service: TrayService, arguments: object = None, **wanted: Any
) -> dict[str, Any]:
    """The newest record ``wanted`` names (with these ``arguments``, when given), waited for:
    the writer is a thread."""

    async def found() -> dict[str, Any] | None:
        records = await service.calls_json(CallQuery(**wanted))
        if arguments is not None:
            records = [r for r in records if r["arguments"] == arguments]
        return records[-1] if records else None

    record: dict[str, Any] = await wait_until(found, timeout=10, what=f"a record for {wanted}")
    return record


async def sampling(context: Any, params: Any) -> CreateMessageResult:
    """A client's model that answers "model says QUESTION" (a sampling callback)."""
    question = params.messages[0].content.text
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=f"model says {question}"), model="m"
    )


async def elicitation(context: Any, params: Any) -> ElicitResult:
    """A person who accepts (an elicitation callback)."""
    return ElicitResult(action="accept", content={"ok": True})
