"""A remote server of the older HTTP+SSE transport (MCP 2024-11-05), with a child's face.

The session is one GET stream: its first event (``endpoint``) names where to
POST, and every answer and server message comes back on it as a ``message``
event (the POSTs themselves are answered 202). So the stream's end is the
session's end, and nothing can be sent before the endpoint is known: writes
wait for it. The endpoint must be on the stream's own origin: a server naming
another host would have this machine send the entry's headers (an API key)
there.
"""

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2

from core.protocol.sse import MESSAGE, events
from core.supervision.remote import BODY_CHARS, RemoteChild


class LegacySseChild(RemoteChild):
    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        super().__init__(url, headers, transport=transport, auth=auth)
        self._endpoint: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._spawn(self._stream())

    async def _post(self, raw: bytes) -> None:
        waited: list[asyncio.Future[Any]] = [self._endpoint, self.exited]
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if not self._endpoint.done() or self.exited.done():
            return  # the session ended first: its end says why, and stdout is closed
        headers = {**self._headers, "content-type": "application/json"}
        try:
            async with self._wire.request("POST", self._endpoint.result(), headers, raw) as reply:
                status, answer = reply.status, await reply.read()
        except Exception as exc:
            if not self.ended_by(exc):
                raise
            return
        if status >= 400:
            body = answer.decode(errors="replace")[:BODY_CHARS]
            self._note(f"POST {status}: {body}")
            self._refused(raw, status, body)

    async def _stream(self) -> None:
        try:
            async with self._wire.request(
                "GET", self.url, {**self._headers, "accept": "text/event-stream"}
            ) as response:
                if response.status == 401 and self.asks_sign_in(response):
                    self.sign_in_needed("it answered HTTP 401 and asks for a sign-in")
                    return
                if response.status >= 400:
                    body = (await response.read()).decode(errors="replace")[:BODY_CHARS].strip()
                    reason = httpx2.codes.get_reason_phrase(response.status)
                    self._end(
                        f"the remote refused its event stream: HTTP {response.status} "
                        f"{reason}{': ' + body if body else ''} ({self.url})"
                    )
                    return
                async for name, data in events(response.chunks()):
                    if name == b"endpoint":
                        self._take_endpoint(data.decode(errors="replace"))
                    elif name == MESSAGE:
                        self._feed_bytes(data)
        except Exception as exc:
            if not self.ended_by(exc):
                raise
            return
        self._end(f"the remote closed its event stream, which ends the session ({self.url})")

    def _take_endpoint(self, data: str) -> None:
        endpoint = urljoin(self.url, data.strip())
        ours, theirs = urlsplit(self.url), urlsplit(endpoint)
        if (ours.scheme, ours.netloc) != (theirs.scheme, theirs.netloc):
            self._end(
                f"the remote named {theirs.scheme}://{theirs.netloc} to post to, not its own "
                f"{ours.scheme}://{ours.netloc}: nothing is sent there (its headers would go too)"
            )
            return
        if not self._endpoint.done():
            self._endpoint.set_result(endpoint)
