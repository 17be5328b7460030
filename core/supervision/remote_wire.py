"""The HTTP under a remote server's session: the lean client where it can serve, httpx2 where not.

Every call to a remote crosses this hop, in series with the call. httpx2 (its
pool, anyio streams, h11, its models) was ~40 % of the tray's busy time per
remote call (py-spy, bench/remote_latency.py), so a plain entry goes over
core.protocol.http1's keep-alive pool instead, the client the bridge already
uses for its hop. httpx2 stays where that client has nothing to offer:

- a sign-in (the SDK's OAuth is an ``httpx2.Auth`` that drives the exchange);
- a proxy named by the environment (``HTTPS_PROXY``, ``ALL_PROXY``...): httpx2
  honours them as users expect, with ``NO_PROXY``;
- a transport handed in (the tests' ``MockTransport``).

The lean client asks for ``Accept-Encoding: identity`` (without the header any
coding would be acceptable, RFC 9110 §12.5.3) and still decodes gzip and
deflate, which some front ends send regardless; another coding is an
exchange it cannot read, said in words.

Both give the session the same reply (``status``, lower-case ``headers``,
``chunks()``, ``read()``); a failure of the lean one is core.base.errors'
``HttpError``, of httpx2 its ``TransportError``, and the session takes both
for "unreachable" (core.supervision.remote).
"""

import contextlib
import functools
import ssl
import urllib.request
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Final, Protocol
from urllib.parse import urlsplit

import httpx2

from core import __version__
from core.base.errors import HttpError
from core.protocol.http1 import Pool

#: A failure of either wire to reach the remote or to finish an exchange with it (the lean
#: one's ``HttpError``, httpx2's ``TransportError``): the session takes it for "unreachable".
WIRE_FAILURES: Final = (httpx2.TransportError, HttpError)
WireFailure = httpx2.TransportError | HttpError

#: What the lean client tells a server it is (some front ends refuse a request without one).
USER_AGENT: Final = f"mcp-tray/{__version__}"
#: zlib's window bits by content coding: gzip's header, or zlib's (deflate as sent).
_CODINGS: Final = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 15}
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class Reply(Protocol):
    status: int

    @property
    def headers(self) -> Mapping[str, str]: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def read(self) -> bytes: ...


class Wire(Protocol):
    def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> AbstractAsyncContextManager[Reply]: ...

    async def aclose(self) -> None: ...


def wire_for(
    url: str,
    *,
    connect_seconds: float,
    transport: httpx2.AsyncBaseTransport | None = None,
    auth: httpx2.Auth | None = None,
) -> Wire:
    """The wire for a session with ``url``: lean unless a sign-in, a proxy or a transport
    asks for httpx2."""
    if transport is None and auth is None and not _proxied(url):
        return LeanWire(url)
    client = httpx2.AsyncClient(
        transport=transport,
        timeout=httpx2.Timeout(None, connect=connect_seconds),
        follow_redirects=False,
        auth=auth,
    )
    return HttpxWire(client)


def _proxied(url: str) -> bool:
    """Whether the environment names a proxy for this URL's scheme (httpx2 then decides
    with NO_PROXY, as it does for every other client of ours)."""
    proxies = urllib.request.getproxies()
    return urlsplit(url).scheme in proxies or "all" in proxies


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying context for the process, trusting what httpx2 trusts (its CA bundle,
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``): loading the bundle takes tens of ms."""
    return httpx2.create_ssl_context()


class LeanWire:
    """Keep-alive connections to the entry's origin (a legacy SSE endpoint is on it too)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._origin = (parts.scheme, parts.netloc)
        host = parts.hostname or ""
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
        self._pool = Pool(host, port, _tls() if parts.scheme == "https" else None)

    @contextlib.asynccontextmanager
    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> AsyncIterator[Reply]:
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc) != self._origin:
            raise ValueError(f"{url} is not on the origin of this session")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        given = {key.lower() for key in headers}
        # The entry's own (its case kept) win over ours.
        ours = {"user-agent": USER_AGENT, "accept-encoding": "identity"}
        sent = {**{k: v for k, v in ours.items() if k not in given}, **headers}
        async with self._pool.request(method, target, sent, body) as reply:
            coding = reply.headers.get("content-encoding", "identity").strip().lower()
            yield reply if coding == "identity" else _Decoded(reply, coding)

    async def aclose(self) -> None:
        self._pool.close()


class _Decoded:
    """A reply whose body came in a content coding: what it says, decoded as it arrives."""

    def __init__(self, reply: Reply, coding: str) -> None:
        if coding not in _CODINGS:
            raise HttpError(f"the body came in {coding!r} coding, which mcp-tray cannot read")
        self._reply = reply
        self._bits = _CODINGS[coding]
        self.status = reply.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._reply.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        decoder = zlib.decompressobj(self._bits)
        try:
            async for chunk in self._reply.chunks():
                if data := decoder.decompress(chunk):
                    yield data
            if tail := decoder.flush():
                yield tail
        except zlib.error as exc:
            raise HttpError(f"the body's coding is broken: {exc}") from None

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


class _HttpxReply:
    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self.status = response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.aiter_bytes()

    async def read(self) -> bytes:
        return await self._response.aread()


class HttpxWire:
    def __init__(self, client: httpx2.AsyncClient) -> None:
        self._client = client

    @contextlib.asynccontextmanager
    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> AsyncIterator[Reply]:
        content = body if body or method != "GET" else None
        async with self._client.stream(method, url, content=content, headers=headers) as response:
            yield _HttpxReply(response)

    async def aclose(self) -> None:
        await self._client.aclose()
