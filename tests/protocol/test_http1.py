"""The bridge's HTTP/1.1 client (Pool, Connection, Response) against a real socket server.

Strategy: each test runs a tiny HTTP/1.1 server on 127.0.0.1 port 0 written
on asyncio streams (tests/support/http_fakes.py), whose answer to each request the test
supplies as a coroutine: it writes raw bytes, so a test decides the framing
(Content-Length, chunked, read-to-close), when each chunk goes out, whether
the connection stays open, and whether the reply is HTTP at all. The server
counts connections and requests, so reuse and retries are observed from the
server's side, not inferred from the client's internals. Every wait is
bounded; a chunk "not yet sent" is held on an event the test releases.
"""

import asyncio
import contextlib
import gc
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest

from core.base.errors import HttpError
from core.protocol.http1 import POOL_SIZE, Pool
from tests.conftest import wait_until
from tests.support.http_fakes import Answer, RawServer, Request, answering, send, unused_port

PROMPT = 5.0


def reply_bytes(
    status: int = 200, body: bytes = b"ok", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever"]
    lines += [f"{k}: {v}" for k, v in {"Content-Length": str(len(body)), **(headers or {})}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def plain(request: Request, writer: asyncio.StreamWriter) -> bool:
    await send(writer, reply_bytes(body=b"reply to " + request.body))
    return True


@contextlib.asynccontextmanager
async def serving(answer: Answer = plain) -> AsyncIterator[tuple[RawServer, Pool]]:
    server = RawServer(answer)
    await server.start()
    pool = Pool("127.0.0.1", server.port)
    try:
        yield server, pool
    finally:
        pool.close()
        await server.aclose()


@contextlib.contextmanager
def resource_warnings() -> Iterator[list[str]]:
    """Record (instead of raising) the ResourceWarnings of objects collected inside."""
    leaked: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield leaked
        finally:
            gc.collect()
            leaked.extend(str(w.message) for w in caught if w.category is ResourceWarning)


async def fetch(pool: Pool, body: bytes = b"x", target: str = "/mcp/test") -> tuple[int, bytes]:
    async with pool.request("POST", target, {"content-type": "application/json"}, body) as reply:
        return reply.status, await reply.read()


# ------------------------------------------------------------- bodies


async def test_a_content_length_body_is_read_whole_with_status_and_lowercased_headers() -> None:
    answer = answering(reply_bytes(201, b"hello world", {"X-Thing": "Yes", "Mcp-Session-Id": "s1"}))

    async with serving(answer) as (server, pool):
        async with pool.request("POST", "/mcp/x", {"accept": "text/event-stream"}, b"{}") as reply:
            assert reply.status == 201
            assert reply.headers["x-thing"] == "Yes"
            assert reply.headers["mcp-session-id"] == "s1"
            assert await reply.read() == b"hello world"

        (request,) = server.requests
        assert (request.method, request.target, request.body) == ("POST", "/mcp/x", b"{}")
        assert request.headers["host"] == f"127.0.0.1:{server.port}"
        assert request.headers["content-length"] == "2"
        assert request.headers["accept"] == "text/event-stream"


async def test_a_chunked_body_is_yielded_chunk_by_chunk_as_each_arrives() -> None:
    first_seen = asyncio.Event()

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.body != b"stream":
            return await plain(request, writer)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        writer.write(b"6;ext=1\r\nevent1\r\n")
        await writer.drain()
        # The second chunk goes out only once the client has yielded the first.
        await asyncio.wait_for(first_seen.wait(), PROMPT)
        writer.write(b"C\r\nevent2-event\r\n0\r\n\r\n")
        await writer.drain()
        return True

    async with serving(answer) as (server, pool):
        chunks = []
        async with pool.request("POST", "/mcp/x", {}, b"stream") as reply:
            assert reply.headers["transfer-encoding"] == "chunked"
            async for chunk in reply.chunks():
                chunks.append(chunk)
                first_seen.set()
            assert reply.reusable
        assert chunks == [b"event1", b"event2-event"]

        # The chunked reply was consumed exactly, so the connection carries the next.
        assert await fetch(pool, b"next") == (200, b"reply to next")
        assert server.accepted == 1


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a part",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\nonly a part",
    ],
    ids=["content-length", "chunked"],
)
async def test_a_connection_that_closes_inside_the_body_is_an_http_error(head: bytes) -> None:
    async with serving(answering(head, keep_open=False)) as (_, pool):
        with pytest.raises(HttpError):
            await fetch(pool)


async def test_a_body_without_length_is_read_to_the_close_and_its_connection_not_reused() -> None:
    answer = answering(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", keep_open=False
    )

    async with serving(answer) as (server, pool):
        assert await fetch(pool) == (200, b"until the end")
        assert await fetch(pool) == (200, b"until the end")
        assert server.accepted == 2


async def test_a_request_without_a_body_carries_a_length_only_where_its_method_has_one() -> None:
    async with serving() as (server, pool):
        for method in ("GET", "DELETE", "POST"):
            async with pool.request(method, "/mcp", {}) as response:
                await asyncio.wait_for(response.read(), PROMPT)
    get, delete, post = (r.headers for r in server.requests)
    assert "content-length" not in get and "content-length" not in delete
    assert post["content-length"] == "0"


# --------------------------------------------------------- keep-alive


async def test_a_keep_alive_connection_serves_the_next_request() -> None:
    async with serving() as (server, pool):
        assert await fetch(pool, b"one") == (200, b"reply to one")
        assert await fetch(pool, b"two") == (200, b"reply to two")

        assert server.accepted == 1
        assert [r.connection for r in server.requests] == [0, 0]


async def test_an_empty_body_reply_leaves_its_connection_reusable() -> None:
    async with serving(answering(reply_bytes(202, b""))) as (server, pool):
        assert await fetch(pool) == (202, b"")
        assert await fetch(pool) == (202, b"")
        assert server.accepted == 1


async def test_a_reply_with_connection_close_is_not_reused() -> None:
    answer = answering(reply_bytes(body=b"bye", headers={"Connection": "close"}), keep_open=False)

    async with serving(answer) as (server, pool):
        assert await fetch(pool) == (200, b"bye")
        assert await fetch(pool) == (200, b"bye")

        assert server.accepted == 2
        assert [r.connection for r in server.requests] == [0, 1]


async def test_a_response_left_unread_closes_its_connection_instead_of_pooling_it() -> None:
    async with serving() as (server, pool):
        async with pool.request("POST", "/mcp/x", {}, b"unread") as reply:
            assert reply.status == 200
            assert not reply.reusable
        await wait_until(lambda: server.closed == 1, timeout=PROMPT, what="the server to see EOF")

        assert await fetch(pool, b"next") == (200, b"reply to next")
        assert server.accepted == 2


async def test_an_idle_connection_the_server_closed_is_left_for_a_fresh_one() -> None:
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        await send(writer, reply_bytes(body=b"reply to " + request.body))  # keep-alive by default
        return request.connection != 0  # ...but the first connection is then dropped

    async with serving(answer) as (server, pool):
        assert await fetch(pool, b"one") == (200, b"reply to one")
        await wait_until(lambda: server.closed == 1, timeout=PROMPT, what="the idle drop")

        assert await fetch(pool, b"two") == (200, b"reply to two")

        assert server.accepted == 2
        # Request "two" was processed once, on the fresh connection.
        assert [(r.body, r.connection) for r in server.requests] == [(b"one", 0), (b"two", 1)]


async def test_a_drop_the_loop_has_not_read_yet_is_seen_on_the_socket_itself() -> None:
    """The check asks the socket, not the loop: with the kept connection's reading paused,
    its EOF reaches no reader, and the next request still goes on a fresh connection."""

    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        await send(writer, reply_bytes(body=b"reply to " + request.body))
        return request.connection != 0

    async with serving(answer) as (server, pool):
        assert await fetch(pool, b"one") == (200, b"reply to one")
        (kept,) = pool._idle
        transport = kept.writer.transport
        assert isinstance(transport, asyncio.ReadTransport)
        transport.pause_reading()
        await wait_until(lambda: server.closed == 1, timeout=PROMPT, what="the idle drop")
        assert not kept.reader.at_eof()

        assert await fetch(pool, b"two") == (200, b"reply to two")

        assert [(r.body, r.connection) for r in server.requests] == [(b"one", 0), (b"two", 1)]


async def test_a_fresh_connection_closed_without_a_reply_is_an_error_and_not_retried() -> None:
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        return False  # read the request, then hang up

    async with serving(answer) as (server, pool):
        with pytest.raises(HttpError, match="closed before a reply"):
            await fetch(pool)
        assert server.accepted == 1
        assert len(server.requests) == 1


async def test_a_reused_connection_closed_without_a_reply_is_an_error_and_not_replayed() -> None:
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.body == b"x":
            await send(writer, reply_bytes())
            return True
        return False  # read the request, then hang up: it may have acted on it

    async with serving(answer) as (server, pool):
        await fetch(pool)
        with pytest.raises(HttpError, match="closed before a reply"):
            await fetch(pool, b"two")
        assert server.accepted == 1
        assert [r.body for r in server.requests] == [b"x", b"two"]


async def test_a_failed_request_leaves_no_connection_open() -> None:
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.connection == 0:
            await send(writer, reply_bytes())
        return False

    async with serving(answer) as (server, pool):
        await fetch(pool)
        await wait_until(lambda: server.closed == 1, timeout=PROMPT, what="the idle drop")

        with resource_warnings() as leaked:
            with pytest.raises(HttpError):
                await fetch(pool, b"two")

        assert leaked == []


async def test_a_request_the_server_read_before_closing_a_reused_connection_is_not_replayed() -> (
    None
):
    async def answer(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.body == b"write once" and request.connection == 0:
            return False  # read, (acted on,) then the connection dies unanswered
        await send(writer, reply_bytes())
        return True

    async with serving(answer) as (server, pool):
        await fetch(pool, b"warm up")  # leaves an idle connection in the pool

        with contextlib.suppress(HttpError):  # an honest failure would be fine
            await fetch(pool, b"write once")

        assert [r.body for r in server.requests].count(b"write once") == 1


# ------------------------------------------------------------- errors


async def test_a_reply_that_is_not_http_is_an_http_error() -> None:
    async with serving(answering(b"SSH-2.0-OpenSSH_9.6\r\n", keep_open=False)) as (_, pool):
        with pytest.raises(HttpError, match=r"not an HTTP/1\.1 reply: b'SSH-2\.0"):
            await fetch(pool)


@pytest.mark.parametrize(
    "head",
    [b"HTTP/1.1 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n"],
    ids=["no-status-code", "bad-content-length"],
)
async def test_a_malformed_status_code_or_content_length_is_an_http_error(head: bytes) -> None:
    raised: type[BaseException] | None = None
    async with serving(answering(head, keep_open=False)) as (_, pool):
        with resource_warnings():  # the connection leaks on this path too
            try:
                await fetch(pool)
            except Exception as exc:  # noted by type, so its traceback is freed here
                raised = type(exc)
    assert raised is HttpError


async def test_a_refused_connection_is_an_http_error_naming_host_and_port() -> None:
    port = unused_port()  # nothing listens there
    pool = Pool("127.0.0.1", port)

    with pytest.raises(HttpError, match=f"cannot connect to 127.0.0.1:{port}"):
        await fetch(pool)


# --------------------------------------------------------------- pool


async def test_concurrent_requests_get_their_own_connections_and_at_most_pool_size_stay_idle() -> (
    None
):
    extra = 2
    async with serving() as (server, pool):
        async with contextlib.AsyncExitStack() as held:
            for n in range(POOL_SIZE + extra):
                reply = await held.enter_async_context(
                    pool.request("POST", "/mcp/x", {}, str(n).encode())
                )
                assert await reply.read() == b"reply to %d" % n
            assert server.accepted == POOL_SIZE + extra
        # All released: POOL_SIZE go back to the pool, the rest are closed.
        await wait_until(lambda: server.closed == extra, timeout=PROMPT, what="surplus closes")

        async with contextlib.AsyncExitStack() as held:
            for _ in range(POOL_SIZE + extra):
                reply = await held.enter_async_context(pool.request("POST", "/mcp/x", {}, b"again"))
                await reply.read()
        # The pooled ones were reused; only the surplus needed new connections.
        assert server.accepted == POOL_SIZE + 2 * extra
