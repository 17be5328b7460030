"""The wire under a remote's session (core.supervision.remote_wire): which client carries it,
and the lean one over TLS, against a real socket server.

The server is tests/support/http_fakes.py's raw HTTP/1.1 server, over TLS with a
certificate from a test authority (tests/support/certs.py) that the client trusts
through ``SSL_CERT_FILE``; what it received is read from its side.
"""

import asyncio
import contextlib
import gzip
import json
import socket
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx2
import pytest

from core import __version__
from core.base.errors import HttpError
from core.supervision import remote_wire
from core.supervision.remote import RemoteChild, describe
from core.supervision.remote_wire import HttpxWire, LeanWire, wire_for
from tests.support.certs import Authority, authority
from tests.support.http_fakes import Answer, RawServer, Request, send, unused_port

PROMPT = 5.0
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_and_fresh_trust(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from an environment that names no proxy and no CA of its own."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    remote_wire._tls.cache_clear()
    yield
    remote_wire._tls.cache_clear()


async def echo_json(request: Request, writer: asyncio.StreamWriter) -> bool:
    body = json.dumps({"got": request.body.decode(), "target": request.target}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    await send(writer, head.encode() + b"\r\n\r\n" + body)
    return True


@contextlib.asynccontextmanager
async def tls_server(ca: Authority) -> AsyncIterator[RawServer]:
    server = RawServer(echo_json)
    await server.start(tls=ca.server_context())
    try:
        yield server
    finally:
        await server.aclose()


async def test_a_plain_entry_takes_the_lean_wire() -> None:
    wire = wire_for("https://mcp.example.com/mcp", connect_seconds=1.0)
    assert isinstance(wire, LeanWire)
    await wire.aclose()


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("HTTPS_PROXY", "https://mcp.example.com/mcp"),
        ("https_proxy", "https://mcp.example.com/mcp"),
        ("HTTP_PROXY", "http://127.0.0.1:9/mcp"),
        ("ALL_PROXY", "https://mcp.example.com/mcp"),
    ],
)
async def test_a_proxy_in_the_environment_keeps_httpx2_which_honours_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    monkeypatch.setenv(variable, "http://proxy.example:3128")
    wire = wire_for(url, connect_seconds=1.0)
    assert isinstance(wire, HttpxWire)
    await wire.aclose()


async def test_a_proxy_for_the_other_scheme_leaves_the_lean_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    wire = wire_for("https://mcp.example.com/mcp", connect_seconds=1.0)
    assert isinstance(wire, LeanWire)
    await wire.aclose()


async def test_a_sign_in_or_a_handed_in_transport_keeps_httpx2() -> None:
    class Noop(httpx2.Auth):
        pass

    handed = httpx2.MockTransport(lambda request: httpx2.Response(204))
    for wire in (
        wire_for("https://mcp.example.com/mcp", connect_seconds=1.0, auth=Noop()),
        wire_for("https://mcp.example.com/mcp", connect_seconds=1.0, transport=handed),
    ):
        assert isinstance(wire, HttpxWire)
        await wire.aclose()


@pytest.mark.timeout(30)
async def test_a_tls_remote_is_served_over_the_lean_wire_trusting_the_environments_ca(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = authority(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    async with tls_server(ca) as server:
        wire = LeanWire(f"https://localhost:{server.port}/mcp")
        try:
            for number in range(2):
                url = f"https://localhost:{server.port}/mcp?n={number}"
                async with wire.request("POST", url, {"x-api-key": "k"}, b"hello") as reply:
                    assert reply.status == 200
                    assert reply.headers.get("content-type") == "application/json"
                    answer = json.loads(await asyncio.wait_for(reply.read(), PROMPT))
                assert answer == {"got": "hello", "target": f"/mcp?n={number}"}
        finally:
            await wire.aclose()
    first, second = server.requests
    assert first.headers["host"] == f"localhost:{server.port}"
    assert first.headers["user-agent"] == f"mcp-tray/{__version__}"
    assert first.headers["x-api-key"] == "k"
    # One kept-alive TLS connection carried both (one handshake per session, not per call).
    assert (first.connection, second.connection, server.accepted) == (0, 0, 1)


@pytest.mark.timeout(30)
async def test_a_certificate_nobody_here_trusts_is_a_failed_connection_naming_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served, trusted = authority(tmp_path, "served"), authority(tmp_path, "trusted")
    monkeypatch.setenv("SSL_CERT_FILE", str(trusted.ca_file))
    async with tls_server(served) as server:
        wire = LeanWire(f"https://localhost:{server.port}/mcp")
        try:
            with pytest.raises(HttpError) as failed:
                async with wire.request("POST", f"https://localhost:{server.port}/mcp", {}, b"x"):
                    pass
        finally:
            await wire.aclose()
    assert failed.value.never_sent
    words = describe(failed.value)
    assert words.startswith(f"could not connect: localhost:{server.port}: TLS failed"), words
    assert "CERTIFICATE_VERIFY_FAILED" in words, words
    assert server.requests == []


async def test_a_request_off_the_sessions_origin_is_refused_before_anything_is_sent() -> None:
    wire = LeanWire("http://127.0.0.1:9/mcp")
    try:
        with pytest.raises(ValueError, match="not on the origin"):
            async with wire.request("POST", "http://elsewhere.example:9/mcp", {}, b"x"):
                pass
    finally:
        await wire.aclose()


def _ipv6_loopback() -> bool:
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::1", 0))
        return True
    return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
async def test_an_ipv6_remote_is_named_in_brackets_in_the_host_header() -> None:
    server = RawServer(echo_json)
    await server.start(host="::1")
    wire = LeanWire(f"http://[::1]:{server.port}/mcp")
    try:
        async with wire.request("POST", f"http://[::1]:{server.port}/mcp", {}, b"x") as reply:
            assert reply.status == 200
            await reply.read()
    finally:
        await wire.aclose()
        await server.aclose()
    assert server.requests[0].headers["host"] == f"[::1]:{server.port}"


@pytest.mark.timeout(30)
async def test_a_refused_remote_ends_its_session_unreachable_in_words() -> None:
    port = unused_port()
    child = RemoteChild(f"http://127.0.0.1:{port}/mcp")
    await child.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    await asyncio.wait_for(child.exited, PROMPT)
    assert child.unreachable
    assert child.end_text is not None
    assert child.end_text.startswith(f"unreachable: could not connect: 127.0.0.1:{port}: ")
    assert child.end_text.endswith(f"(http://127.0.0.1:{port}/mcp)")
    await child.end_group()


def cut_after(message: dict[str, object]) -> Answer:
    """An SSE answer carrying ``message``, its connection then closed inside the chunked
    body (a remote stopping as it finishes the stream)."""

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        event = b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        await send(writer, head + f"{len(event):x}\r\n".encode() + event + b"\r\n")
        return False

    return answer


@pytest.mark.timeout(30)
async def test_a_stream_cut_after_its_answer_lost_nothing_and_ends_no_session() -> None:
    server = RawServer(cut_after({"jsonrpc": "2.0", "id": 1, "result": {}}))
    await server.start()
    child = RemoteChild(f"http://127.0.0.1:{server.port}/mcp")
    try:
        for _ in range(2):
            await child.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
            line = await asyncio.wait_for(child.stdout.readline(), PROMPT)
            assert json.loads(line) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert child.is_alive() and not child.exited.done()
        assert server.accepted == 2  # the cut connection was not reused
    finally:
        await child.end_group()
        await server.aclose()


@pytest.mark.timeout(30)
async def test_a_stream_cut_before_its_answer_ends_the_session_unreachable() -> None:
    # A request from the server, then the cut: the call's answer never came.
    asked = {"jsonrpc": "2.0", "id": 7, "method": "roots/list"}
    server = RawServer(cut_after(asked))
    await server.start()
    child = RemoteChild(f"http://127.0.0.1:{server.port}/mcp")
    try:
        await child.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        await asyncio.wait_for(child.exited, PROMPT)
        assert child.unreachable
        assert child.end_text is not None and "chunked" in child.end_text, child.end_text
    finally:
        await child.end_group()
        await server.aclose()


def encoded_answer(coding: str, body: bytes, kind: str = "application/json") -> Answer:
    """``body`` in ``coding``, sent in two chunks (a stream's parts arrive apart)."""

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Encoding: {coding}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        half = len(body) // 2
        parts = [body[:half], body[half:]]
        framed = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in parts if part)
        await send(writer, head.encode() + framed + b"0\r\n\r\n")
        return True

    return answer


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress)],
)
async def test_a_body_sent_compressed_though_identity_was_asked_is_decoded(
    coding: str, encode: Callable[[bytes], bytes]
) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "x" * 5000}}
    stream = b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"
    server = RawServer(encoded_answer(coding, encode(stream), "text/event-stream"))
    await server.start()
    child = RemoteChild(f"http://127.0.0.1:{server.port}/mcp")
    try:
        await child.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        line = await asyncio.wait_for(child.stdout.readline(), PROMPT)
        assert json.loads(line) == message
        assert server.requests[0].headers["accept-encoding"] == "identity"
    finally:
        await child.end_group()
        await server.aclose()


@pytest.mark.timeout(30)
async def test_a_body_in_a_coding_nobody_here_reads_ends_the_session_saying_so() -> None:
    server = RawServer(encoded_answer("br", b"\x0b\x02\x80{}\x03"))
    await server.start()
    child = RemoteChild(f"http://127.0.0.1:{server.port}/mcp")
    try:
        await child.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        await asyncio.wait_for(child.exited, PROMPT)
        assert child.end_text is not None
        assert "the body came in 'br' coding, which mcp-tray cannot read" in child.end_text
    finally:
        await child.end_group()
        await server.aclose()


@pytest.mark.timeout(30)
async def test_an_entrys_own_accept_encoding_and_user_agent_are_sent_instead_of_ours() -> None:
    server = RawServer(echo_json)
    await server.start()
    wire = LeanWire(f"http://127.0.0.1:{server.port}/mcp")
    try:
        own = {"Accept-Encoding": "gzip", "User-Agent": "theirs/1"}
        async with wire.request("POST", f"http://127.0.0.1:{server.port}/mcp", own, b"x") as r:
            await r.read()
    finally:
        await wire.aclose()
        await server.aclose()
    sent = server.requests[0].headers
    assert (sent["accept-encoding"], sent["user-agent"]) == ("gzip", "theirs/1")
