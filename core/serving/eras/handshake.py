"""A handshake-era client session on the gateway: the ``Handler`` of one streamable HTTP session.

A thin adapter: each message of the session is decoded once into the
pipeline's era-neutral ``Request`` (core.serving.calls.request) and answered by
the pipeline (core.serving.calls.pipeline). What only this era has lives here:
the session itself (opened by ``initialize``), its GET stream, and the
requests in flight that the server's log lines and requests may ride on.
"""

import asyncio
import contextlib
import itertools
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from core.base.errors import CallError, RpcError
from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.protocol.http_session import HttpSession, RequestContext
from core.serving.calls.fanout import Share
from core.serving.calls.pipeline import SHARE_METHODS, Pipeline
from core.serving.calls.request import Client, NoReply, Request
from core.serving.sessions.session_rows import SavedSession
from core.serving.sessions.session_store import SessionStore
from core.serving.sessions.sessions import ClientSession
from core.supervision.routing import Caller


def handshake_session(session_id: str, where: str, headers: Mapping[str, str]) -> ClientSession:
    """A handshake-era session as its ``initialize`` request shows it: a bridge names its
    client and worker row in headers; anything else is a direct HTTP client."""
    bridge_client = headers.get(CLIENT_HEADER)
    session = ClientSession(
        id=session_id,
        server=where,
        kind="bridge" if bridge_client else "http",
        worker_identity=headers.get(WORKER_HEADER),
    )
    if bridge_client:
        session.client_name = bridge_client
    return session


def restored_client(saved: SavedSession) -> Client:
    """A previous tray's session as its client declared it (core.serving.sessions.session_store)."""
    session = ClientSession(
        id=saved.id,
        server=saved.server,
        kind="bridge" if saved.kind == "bridge" else "http",
        client_name=saved.client_name,
        worker_identity=saved.worker_identity,
    )
    return Client(session, modern=False, capabilities=saved.capabilities, info=saved.client_info)


def saved_session(
    client: Client,
    http: HttpSession,
    subscriptions: list[str],
    log_level: str | None,
    version: object = None,
) -> SavedSession:
    """What a handshake-era session needs to go on in the next tray."""
    session = client.session
    return SavedSession(
        id=session.id,
        server=session.server,
        protocol_version=version if isinstance(version, str) else http.protocol_version,
        kind=session.kind,
        client_name=session.client_name,
        worker_identity=session.worker_identity,
        capabilities=dict(client.capabilities),
        client_info=dict(client.info) if client.info else None,
        subscriptions=sorted(subscriptions),
        log_level=log_level,
        last_active=time.time(),
    )


async def ask_client(
    client: Client,
    http: HttpSession,
    method: str,
    params: Mapping[str, Any] | None,
    *,
    via: RequestContext | None = None,
) -> dict[str, Any]:
    """A server's request to a handshake-era client, if it declared what it takes: made during
    the client's request ``via``, on that request's stream; else on the session's GET stream."""
    client.may_be_asked(method)
    return await http.client_request(method, params, via=via)


class HandshakeSession:
    """One handshake-era client session: a member of its child's share."""

    def __init__(
        self,
        pipeline: Pipeline,
        http: HttpSession,
        client: Client,
        registry: dict[str, "HandshakeSession"],
        store: SessionStore,
    ) -> None:
        self.pipeline = pipeline
        self.http = http
        self.client = client
        #: The open sessions (the gateway's): this one from its initialize to its end.
        self._registry = registry
        #: Where the session is kept for the next tray.
        self._store = store
        #: An adopted session's seat, subscriptions and level, being restored.
        self._restoring: asyncio.Future[None] | None = None
        client.ask = self._ask_outside
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
        store: SessionStore,
    ) -> "HandshakeSession":
        client = Client(handshake_session(http.id, name, headers), modern=False)
        return cls(pipeline, http, client, registry, store)

    @classmethod
    def adopt(
        cls,
        pipeline: Pipeline,
        saved: SavedSession,
        registry: dict[str, "HandshakeSession"],
        store: SessionStore,
    ) -> "HandshakeSession":
        """A previous tray's session, going on where it was (core.serving.sessions.session_store)."""
        http = HttpSession(saved.id, saved.protocol_version)
        http.numbering_resumes = True
        client = restored_client(saved)
        adopted = cls(pipeline, http, client, registry, store)
        http.handler = adopted
        registry[saved.id] = adopted
        pipeline.open_session(client.session)
        adopted._restoring = asyncio.ensure_future(adopted._restore(saved))
        return adopted

    async def _restore(self, saved: SavedSession) -> None:
        """Seat the session again, and set its subscriptions and level as they were."""
        with contextlib.suppress(RpcError, CallError):
            request = Request(self.client, "initialize", {}, NoReply(), None)
            server = await self.pipeline.seats.server_for(request, self)
            share = self.pipeline.seats.share(server)
            caller = Caller(session=self.session.id)
            for uri in saved.subscriptions:
                await share.subscribe(self.key, uri, caller)
            if saved.log_level is not None:
                await share.set_level(self.key, saved.log_level, caller)
        self._save()

    def _save(self, version: object = None) -> None:
        """What this session needs to go on in the next tray."""
        seat = self.pipeline.seats.seat(self.session)
        share = seat.share if seat is not None else None
        subscriptions = [
            uri for uri, who in (share.subscribers if share else {}).items() if self.key in who
        ]
        level = share.levels.get(self.key) if share else None
        self._store.put(saved_session(self.client, self.http, subscriptions, level, version))

    @property
    def session(self) -> ClientSession:
        return self.client.session

    # ------------------------------------------------- asking the client

    async def _ask_outside(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return await ask_client(self.client, self.http, method, params)

    async def _ask_during(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return await ask_client(self.client, self.http, method, params, via=ctx)

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
        seat = self.pipeline.seats.seat(self.client.session)
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
        if self._registry.pop(self.session.id, None) is None:
            return
        if self.http.stopping:
            # The tray is going away, not the session: the next tray adopts it.
            self._store.touch(self.session.id, time.time())
        else:
            self._store.drop(self.session.id)
        self.pipeline.close_session(self.session)

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/roots/list_changed":
            await self.pipeline.seats.roots_changed(self.client, self)

    async def on_request(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        values = params or {}
        if method == "initialize":
            return await self._initialize(values)
        if self._restoring is not None:
            await asyncio.shield(self._restoring)
        request = Request(
            self.client, method, values, ctx, partial(self._ask_during, ctx), ctx.headers
        )
        call_id = next(self._call_ids)
        self._calls[call_id] = ctx
        try:
            result = await self.pipeline.handle(request, self)
        finally:
            self._calls.pop(call_id, None)
        self._store.touch(self.session.id, time.time())
        if method in SHARE_METHODS:
            self._save()
        return result

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        client = self.client
        session = client.session
        client.declare(params)
        pipeline = self.pipeline
        if session.id not in self._registry:
            self._registry[session.id] = self
            pipeline.open_session(session)
            # The client name is known now: normalise it through the session table.
            pipeline.sessions.identify(session, session.client_name)
        result = await pipeline.hello(client, self, params.get("protocolVersion"))
        self._save(result.get("protocolVersion"))
        return result
