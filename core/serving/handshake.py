"""A handshake-era client session on the gateway: the ``Handler`` of one streamable HTTP session.

A thin adapter: each message of the session is decoded once into the
pipeline's era-neutral ``Request`` (core.serving.request) and answered by
the pipeline (core.serving.pipeline). What only this era has lives here:
the session itself (opened by ``initialize``), its GET stream, and the
requests in flight that the server's log lines and requests may ride on.
"""

import itertools
from collections.abc import Mapping
from typing import Any

from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.protocol.streamable import HttpSession, RequestContext
from core.serving.fanout import Share
from core.serving.pipeline import Pipeline
from core.serving.request import Client, Request
from core.serving.sessions import ClientSession


class HandshakeSession:
    """One handshake-era client session: a member of its child's share."""

    def __init__(
        self,
        pipeline: Pipeline,
        http: HttpSession,
        client: Client,
        registry: dict[str, "HandshakeSession"],
    ) -> None:
        self.pipeline = pipeline
        self.http = http
        self.client = client
        #: The open sessions (the gateway's): this one from its initialize to its end.
        self._registry = registry
        #: Requests of this session in flight on the server, oldest first.
        self._calls: dict[int, RequestContext] = {}
        self._call_ids = itertools.count(1)
        client.session.release = lambda: pipeline.release(client.session)

    @classmethod
    def open(
        cls,
        pipeline: Pipeline,
        name: str,
        http: HttpSession,
        headers: Mapping[str, str],
        registry: dict[str, "HandshakeSession"],
    ) -> "HandshakeSession":
        bridge_client = headers.get(CLIENT_HEADER)
        session = ClientSession(
            id=http.id,
            server=name,
            kind="bridge" if bridge_client else "http",
            worker_identity=headers.get(WORKER_HEADER),
        )
        if bridge_client:
            session.client_name = bridge_client
        client = Client(session, modern=False, ask=lambda m, p: http.client_request(m, p))
        return cls(pipeline, http, client, registry)

    @property
    def session(self) -> ClientSession:
        return self.client.session

    # ------------------------------------------------------- share member

    @property
    def key(self) -> str:
        return self.client.session.id

    @property
    def session_id(self) -> str:
        return self.client.session.id

    @property
    def exclusive(self) -> bool:
        """This session has its child to itself (per-session sharing)."""
        seat = self.pipeline.seat(self.client.session)
        return seat is not None and seat.server.config.sharing == "per-session"

    def log_level(self, share: Share) -> str | None:
        return share.levels.get(self.key)

    def hears_unlevelled(self) -> bool:
        return True

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        """Put a message on this session's newest call in flight; False when none is."""
        if not self._calls:
            return False
        self._calls[max(self._calls)].related(message)
        return True

    def post(self, message: dict[str, Any]) -> bool:
        """A message not tied to a call: the session's GET stream, if the client opened one."""
        return self.http.post(message)

    # ------------------------------------------------------ Handler protocol

    def on_close(self) -> None:
        if self._registry.pop(self.session.id, None) is not None:
            self.pipeline.close_session(self.session)

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/roots/list_changed":
            await self.pipeline.roots_changed(self.client, self)

    async def on_request(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        values = params or {}
        if method == "initialize":
            return await self._initialize(values)
        request = Request(
            self.client,
            method,
            values,
            ctx,
            ask=lambda m, p: self.http.client_request(m, p, via=ctx),
        )
        call_id = next(self._call_ids)
        self._calls[call_id] = ctx
        try:
            return await self.pipeline.handle(request, self)
        finally:
            self._calls.pop(call_id, None)

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        client = self.client
        session = client.session
        info = params.get("clientInfo")
        if (
            session.kind != "bridge"  # a bridge names the client it speaks for
            and isinstance(info, dict)
            and isinstance(info.get("name"), str)
        ):
            session.client_name = info["name"]
        capabilities = params.get("capabilities")
        client.capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        client.info = dict(info) if isinstance(info, dict) else None
        pipeline = self.pipeline
        if session.id not in self._registry:
            self._registry[session.id] = self
            pipeline.open_session(session)
            # The client name is known now: normalise it through the session table.
            pipeline.sessions.identify(session, session.client_name)
        return await pipeline.hello(client, self, params.get("protocolVersion"))
