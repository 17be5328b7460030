"""The local HTTP server under a local attacker without the token: no starvation.

Strategy: a real TrayService with small limits (a 0.3 s read deadline, a cap
of 20 connections) and raw sockets that connect and send nothing, half a
request, or a body that trickles; a real authenticated client must keep
being served throughout, and the child must not notice. The accept-error
summary runs on a fake clock. A burst past the file limit runs against a
headless tray subprocess started under a low RLIMIT_NOFILE.
"""

import asyncio
import contextlib
import json
import logging
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from core.base.errors import NotRunning
from core.serving.http.http_guard import AcceptErrorThrottle, HttpLimits
from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from core.settings.runtime import running_instance
from tests.conftest import ECHO, FAST_TIMING, python_server, wait_ready, wait_until
from tests.support.fakes import FakeClock

LIMITS = HttpLimits(read_seconds=0.3, max_connections=20)


@pytest.fixture
async def tray(tray_home: Paths) -> AsyncIterator[TrayService]:
    tray_home.config_file.write_text(
        json.dumps({"gateway": {"port": 0}, "mcpServers": {"echo": python_server(ECHO)}})
    )
    service = TrayService(
        load_config(tray_home.config_file), tray_home, timing=FAST_TIMING, limits=LIMITS
    )
    await service.start()
    await wait_ready(service.supervisor.server("echo"))
    yield service
    await service.aclose()


@contextlib.contextmanager
def raw_sockets(
    service: TrayService, count: int, send: bytes = b""
) -> Iterator[list[socket.socket]]:
    assert service.info is not None
    opened = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", service.info.port))
            if send:
                sock.sendall(send)
            opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            sock.close()


async def closed_by_server(sock: socket.socket, within: float) -> float:
    """Seconds until the server closed ``sock`` (asserting it did within ``within``)."""
    started = time.monotonic()
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        data = await asyncio.wait_for(loop.sock_recv(sock, 1024), within)
    except ConnectionResetError:
        data = b""
    assert data == b"", data  # no reply: just closed
    return time.monotonic() - started


@pytest.mark.parametrize(
    "sent",
    [
        b"",
        b"POST /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        # With the token, so the server waits for the body instead of refusing at once.
        b"POST /api/v1/servers/echo/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Authorization: Bearer {token}\r\nContent-Length: 1000\r\n\r\n{"tool"',
    ],
    ids=["nothing", "half-a-head", "half-a-body"],
)
async def test_a_connection_that_does_not_finish_its_request_in_time_is_closed(
    tray: TrayService, sent: bytes
) -> None:
    with raw_sockets(tray, 1, sent.replace(b"{token}", tray.token.encode())) as (sock,):
        took = await closed_by_server(sock, within=5)
    assert LIMITS.read_seconds * 0.8 <= took < LIMITS.read_seconds + 2


async def test_a_kept_alive_connection_gets_the_deadline_per_request_not_per_connection(
    tray: TrayService,
) -> None:
    auth = {"authorization": f"Bearer {tray.token}"}
    async with httpx.AsyncClient(base_url=tray.url, headers=auth) as http:
        first = await http.get("/api/v1/status")
        # Longer idle than the read deadline, shorter than uvicorn's keep-alive.
        await asyncio.sleep(LIMITS.read_seconds * 2)
        second = await http.get("/api/v1/status")
    assert first.status_code == second.status_code == 200


async def test_a_flood_of_idle_connections_never_starves_an_authenticated_client(
    tray: TrayService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    pid = tray.supervisor.server("echo").pid
    guard = tray.connections
    assert guard is not None
    auth = {"authorization": f"Bearer {tray.token}"}
    async with httpx.AsyncClient(base_url=tray.url, headers=auth, timeout=5) as http:
        assert (await http.get("/api/v1/status")).status_code == 200  # now trusted
        with raw_sockets(tray, 5 * LIMITS.max_connections):
            await wait_until(lambda: guard.shed >= 3 * LIMITS.max_connections, what="shedding")
            assert len(guard.open) <= guard.cap
            for _ in range(5):
                started = time.monotonic()
                reply = await http.get("/api/v1/status")
                assert reply.status_code == 200
                assert time.monotonic() - started < 1.0
            # A new client gets in too: an untrusted idle one is shed for it.
            async with httpx.AsyncClient(base_url=tray.url, headers=auth, timeout=5) as fresh:
                assert (await fresh.get("/api/v1/status")).status_code == 200

    assert tray.supervisor.server("echo").pid == pid
    assert [r for r in caplog.records if r.exc_info] == []


def test_accept_errors_are_summarised_once_a_minute_and_other_errors_pass_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    clock = FakeClock()
    passed: list[dict[str, object]] = []
    throttle = AcceptErrorThrottle(lambda _, context: passed.append(context), clock.monotonic)
    loop = asyncio.new_event_loop()
    try:
        failure = {
            "message": "socket.accept() out of system resource",
            "exception": OSError(24, "Too many open files"),
        }
        for _ in range(1000):
            throttle(loop, failure)
        clock.advance(60)
        throttle(loop, failure)
        throttle(loop, {"message": "something else"})
    finally:
        loop.close()

    reports = [r.getMessage() for r in caplog.records if "cannot accept" in r.getMessage()]
    assert len(reports) == 2
    assert "1 time(s)" in reports[0] and "1000 time(s)" in reports[1]
    assert throttle.count == 1001
    assert passed == [{"message": "something else"}]
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_request_without_the_token_is_refused_and_its_connection_closed(
    tray: TrayService,
) -> None:
    head = b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with raw_sockets(tray, 1, head) as (sock,):
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        reply = b""
        while chunk := await asyncio.wait_for(loop.sock_recv(sock, 4096), 5):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 401")
    assert b"connection: close" in reply.lower()


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX file limit")
def test_a_burst_past_the_file_limit_is_accepted_in_bites_and_accept_never_fails(
    headless: Any,
) -> None:
    # 300 descriptors: a cap of 44 connections (the limit minus 256 kept for
    # the rest); 400 connections at once would exhaust it if accepted in one go.
    tray = headless({"gateway": {"port": 0}, "mcpServers": {}}, file_limit=300)
    info = tray.wait_for(lambda: _running(tray), "the tray to listen")
    token = (tray.paths.token_file).read_text().strip()
    burst = []
    try:
        for _ in range(400):
            conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            conn.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                conn.connect(("127.0.0.1", info.port))
            burst.append(conn)
        reply = httpx.get(
            f"{info.url}/api/v1/status", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        assert reply.status_code == 200
    finally:
        for conn in burst:
            conn.close()
    said = tray.stop()
    assert "cannot accept connections" not in said, said


def _running(tray: Any) -> Any:
    with contextlib.suppress(NotRunning):
        return running_instance(tray.paths)
    return None
