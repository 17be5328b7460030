"""Saved sessions in a real tray: the aggregate's and a profile's go on after a restart, and
no saved-sessions file keeps a tray from starting.

Strategy: ``mcp-tray run --headless`` subprocesses on a fixed port (a direct
HTTP client comes back to the port its snippet names). SDK clients
(``ClientSession`` over ``streamable_http_client``) open handshake-era
sessions on ``/mcp`` and ``/mcp/@coding``; the tray is stopped and another
started under them; the same clients, never restarted, list and call again,
and every request they sent carried the session id they got at
``initialize``. An in-process TrayService, restarted the same way, shows
that an aggregate session's subscription and log level come back with it.
For the hostile files, the state folder is prepared as a hostile local
process would, a tray started on it, and its gateway and Warnings asked.
"""

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from core.base.errors import NotRunning
from core.serving.service import TrayService
from core.serving.sessions.session_file import SESSIONS_FILE
from core.settings.config import load_config
from core.settings.paths import Paths, default_paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token
from tests.conftest import ECHO, FAST_TIMING, make_fifo, python_server, wait_ready, wait_until
from tests.support.cli_support import post_jsonrpc
from tests.support.gateway_support import text
from tests.support.isolation_support import Seen, chatty, heard

#: How long a call after the restart may take (a cold start of the member included).
AFTER_RESTART_SECONDS = 30.0


class Sent:
    """The session id of every request one client sent, and how many ``initialize``."""

    def __init__(self) -> None:
        self.session_ids: list[str | None] = []
        self.initializes = 0

    async def hook(self, request: httpx2.Request) -> None:
        if request.method != "POST":
            return
        if b'"method":"initialize"' in request.content.replace(b" ", b""):
            self.initializes += 1
            return
        self.session_ids.append(request.headers.get("mcp-session-id"))


@contextlib.asynccontextmanager
async def client_at(
    url: str, token: str, sent: Sent, **session_kwargs: Any
) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=60),
        event_hooks={"request": [sent.hook]},
    ) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **session_kwargs) as session:
                await session.initialize()
                yield session


def tray_up(paths: Paths, pid: int) -> bool:
    with contextlib.suppress(NotRunning):
        return running_instance(paths).pid == pid
    return False


async def both_work(clients: dict[str, ClientSession], said: str) -> None:
    for path, client in clients.items():
        listed = await asyncio.wait_for(client.list_tools(), AFTER_RESTART_SECONDS)
        assert "echo__echo" in [tool.name for tool in listed.tools], path
        answer = await asyncio.wait_for(
            client.call_tool("echo__echo", {"text": said}), AFTER_RESTART_SECONDS
        )
        assert text(answer) == said, path


async def test_aggregate_and_profile_sessions_survive_a_headless_tray_restart(
    headless: Any, tmp_path: Path, free_tcp_port: int
) -> None:
    home = tmp_path / "home"
    config = {
        "gateway": {"port": free_tcp_port},
        "mcpServers": {"echo": python_server(ECHO)},
        "profiles": {"coding": {"servers": ["echo"]}},
    }
    first = headless(config, home)
    await wait_until(lambda: tray_up(first.paths, first.proc.pid), what="the tray up", timeout=30)
    token = read_token(first.paths.token_file)
    assert token
    url = f"http://127.0.0.1:{free_tcp_port}"
    sent = {"/mcp": Sent(), "/mcp/@coding": Sent()}
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            path: await stack.enter_async_context(client_at(url + path, token, sent[path]))
            for path in sent
        }
        await both_work(clients, "before")

        await asyncio.to_thread(first.stop)
        second = headless(config, home)
        await wait_until(
            lambda: tray_up(second.paths, second.proc.pid), what="the new tray up", timeout=30
        )

        # The same clients, the same sessions: no "Session not found", no new initialize.
        await both_work(clients, "after")

    for path, each in sent.items():
        assert each.initializes == 1, path
        (session_id,) = set(each.session_ids)
        assert session_id, path
    assert len({next(iter(each.session_ids)) for each in sent.values()}) == 2


# Subscriptions and log levels are handshake-era things (the SDK warns of 2026-07-28).
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_an_aggregate_sessions_subscription_and_level_come_back_after_a_restart(
    tray_home: Paths, tmp_path: Path, free_tcp_port: int
) -> None:
    log = tmp_path / "chatty.jsonl"
    tray_home.config_file.write_text(
        json.dumps({"gateway": {"port": free_tcp_port}, "mcpServers": {"chatty": chatty(log)}})
    )
    seen = Seen("A")
    sent = Sent()
    service: TrayService | None = None

    async def start() -> TrayService:
        started = TrayService(load_config(tray_home.config_file), tray_home, timing=FAST_TIMING)
        await started.start()
        for server in started.supervisor.servers.values():
            await wait_ready(server)
        return started

    try:
        service = await start()
        url = f"http://127.0.0.1:{free_tcp_port}/mcp"
        async with client_at(url, service.token, sent, **seen.kwargs()) as client:
            await client.subscribe_resource("chatty://a")
            await client.set_logging_level("warning")
            (session_id,) = service.gateway.aggregate.parents
            await service.aclose()
            service = None
            service = await start()

            answered = await asyncio.wait_for(
                client.call_tool("chatty__touch", {"uri": "chatty://a"}), AFTER_RESTART_SECONDS
            )
            assert list(service.gateway.aggregate.parents) == [session_id]
            await wait_until(lambda: seen.updated() == ["chatty://a"], what="its subscription")
    finally:
        if service is not None:
            await service.aclose()

    assert text(answered) == "touched"
    assert sent.initializes == 1 and set(sent.session_ids) == {session_id}
    # The new child was told what the session had set, through its link.
    events = [(e["event"], e.get("uri") or e.get("level")) for e in heard(log)]
    assert events.count(("subscribe", "chatty://a")) == 2
    assert events.count(("setLevel", "warning")) == 2


# ------------------------------------------------------------ hostile files


def good_row(session_id: str, **changes: Any) -> dict[str, Any]:
    return {
        "id": session_id,
        "server": "echo",
        "protocol_version": "2025-06-18",
        "kind": "http",
        "client_name": "test",
        "capabilities": {},
        "subscriptions": [],
        "last_active": time.time() - 10,
        **changes,
    }


def hostile_fifo(path: Path) -> None:
    make_fifo(path)


def hostile_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def hostile_nesting(path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(f'{{"format": 1, "sessions": [{deep}]}}')


def hostile_rows(path: Path) -> None:
    rows = [
        good_row("kept"),
        good_row("string-time", last_active="yesterday"),
        good_row("null-time", last_active=None),
        good_row("bad-capabilities", capabilities="everything"),
        good_row("string-subscriptions", subscriptions="file:///etc/passwd"),
    ]
    path.write_text(json.dumps({"format": 1, "sessions": rows}))


posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero are POSIX")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        pytest.param(hostile_fifo, "named pipe (FIFO)", marks=posix_only, id="fifo"),
        pytest.param(hostile_dev_zero, "symbolic link", marks=posix_only, id="dev-zero"),
        pytest.param(hostile_nesting, "nested deeper than", id="nesting"),
        pytest.param(hostile_rows, "'last_active' is a number of seconds", id="rows"),
    ],
)
async def test_a_tray_starts_whatever_the_saved_sessions_file_holds_and_says_what_it_dropped(
    headless: Any, tmp_path: Path, make: Any, said: str
) -> None:
    home = tmp_path / "home"
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    make(paths.state_dir / SESSIONS_FILE)

    tray = headless({"gateway": {"port": 0}, "mcpServers": {"echo": python_server(ECHO)}}, home)
    await wait_until(lambda: tray_up(paths, tray.proc.pid), what="the tray up", timeout=30)
    token = read_token(paths.token_file)
    assert token
    url = running_instance(paths).url

    reply = await asyncio.to_thread(
        httpx2.get, f"{url}/api/v1/warnings", headers={"Authorization": f"Bearer {token}"}
    )
    problems = [w["message"] for w in reply.json()["warnings"] if w["family"] == "saved-sessions"]
    assert problems and any(said in p and str(paths.state_dir) in p for p in problems), problems

    async def post(session_id: str) -> Any:
        return await asyncio.to_thread(
            post_jsonrpc, f"{url}/mcp/echo", token, 1, "tools/list", {}, session_id
        )

    if make is hostile_rows:
        assert len(problems) == 4 and all(p.endswith("; dropped") for p in problems)
        # The good row's session goes on; a dropped one is unknown, never a -32603.
        kept = await post("kept")
        assert kept.status_code == 200 and "tools" in kept.json()["result"]
        for dropped in ("string-time", "bad-capabilities", "string-subscriptions"):
            refused = await post(dropped)
            assert refused.status_code == 404 and "Session not found" in refused.text
    else:
        aside = paths.state_dir / f"{SESSIONS_FILE}.bad"
        assert aside.exists() or aside.is_symlink()
        assert "moved aside" in problems[0]
