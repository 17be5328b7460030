"""The two eras' adapters of an aggregate endpoint: thin, like a server's own (core.serving.eras.handshake,
core.serving.eras.stateless).

Each decodes a client's message once into the pipeline's ``Request`` and
hands it to the aggregate (core.serving.aggregate.aggregate). What only an era has
stays here: a handshake-era session (opened by ``initialize``, its GET
stream, the client asked on its request's stream, kept for the next tray
like a server's own: core.serving.sessions.session_store), and a 2026-07-28
client's session, keyed by its process like on a server's own endpoint
(core.serving.eras.identity).
"""

import asyncio
import contextlib
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, Protocol

from starlette.types import Scope

from core.base.errors import CallError, RpcError
from core.protocol.eras import Envelope
from core.protocol.headers import scope_headers
from core.protocol.http_session import HttpSession, RequestContext
from core.protocol.stateless import StatelessContext
from core.serving.aggregate.aggregate_links import Parent
from core.serving.calls.pipeline import SHARE_METHODS
from core.serving.calls.request import Client, Request
from core.serving.eras.handshake import (
    ask_client,
    handshake_session,
    restored_client,
    saved_session,
)
from core.serving.eras.identity import StatelessClients
from core.serving.eras.stateless import seat
from core.serving.sessions.session_rows import SavedSession
from core.serving.sessions.session_store import SessionStore
from core.serving.sessions.sessions import SessionTable
from core.settings.profiles import profile_name


class Aggregate(Protocol):
    """What the adapters hand their requests to (core.serving.aggregate.aggregate)."""

    @property
    def parents(self) -> Mapping[str, Parent]: ...

    @property
    def stateless(self) -> StatelessClients: ...

    @property
    def sessions(self) -> SessionTable: ...

    @property
    def store(self) -> SessionStore | None: ...

    def told(self, parent: Parent, kind: str) -> None: ...

    def open(self, parent: Parent) -> None: ...

    def close(self, parent: Parent) -> None: ...

    async def hello(self, parent: Parent, params: Mapping[str, Any]) -> dict[str, Any]: ...

    async def handle(self, parent: Parent, request: Request) -> dict[str, Any]: ...

    async def listen(self, parent: Parent, request: Request) -> dict[str, Any]: ...

    async def roots_changed(self, parent: Parent) -> None: ...

    def subscriptions(self, parent: Parent) -> list[str]: ...

    async def resume(self, parent: Parent, subscriptions: list[str], level: str | None) -> None: ...


class AggregateHandshake:
    """One handshake-era client session of an aggregate endpoint (the HTTP session's ``Handler``)."""

    def __init__(
        self, aggregate: Aggregate, parent: Parent, http: HttpSession, client: Client | None = None
    ) -> None:
        self.aggregate = aggregate
        self.parent = parent
        self.http = http
        self.client = client or Client(parent.session, modern=False)
        self.client.ask = self._ask_outside
        parent.client = self.client
        parent.http = http
        #: An adopted session's subscriptions and level, being set again.
        self._restoring: asyncio.Future[None] | None = None

    @classmethod
    def open(
        cls, aggregate: Aggregate, where: str, http: HttpSession, scope: Scope
    ) -> "AggregateHandshake":
        session = handshake_session(http.id, where, scope_headers(scope))
        parent = Parent(session, profile_name(where), modern=False, on_lists=aggregate.told)
        return cls(aggregate, parent, http)

    @classmethod
    def adopt(cls, aggregate: Aggregate, saved: SavedSession) -> "AggregateHandshake":
        """A previous tray's session, going on where it was (core.serving.sessions.session_store)."""
        http = HttpSession(saved.id, saved.protocol_version)
        # Its bridge numbers on from where the last tray saw it (core.protocol.http_session).
        http.numbering_resumes = True
        client = restored_client(saved)
        parent = Parent(
            client.session, profile_name(saved.server), modern=False, on_lists=aggregate.told
        )
        adopted = cls(aggregate, parent, http, client)
        http.handler = adopted
        aggregate.open(parent)
        adopted._restoring = asyncio.ensure_future(adopted._restore(saved))
        return adopted

    async def _restore(self, saved: SavedSession) -> None:
        # A member that cannot take them now answers the client's own requests with why.
        with contextlib.suppress(RpcError, CallError):
            await self.aggregate.resume(self.parent, saved.subscriptions, saved.log_level)
        self._save()

    def _save(self, version: object = None) -> None:
        store = self.aggregate.store
        if store is not None:
            subscriptions = self.aggregate.subscriptions(self.parent)
            saved = saved_session(self.client, self.http, subscriptions, self.parent.level, version)
            store.put(saved)

    async def _ask_outside(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return await ask_client(self.client, self.http, method, params)

    async def _ask_during(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return await ask_client(self.client, self.http, method, params, via=ctx)

    # ------------------------------------------------------ Handler protocol

    def on_close(self) -> None:
        store = self.aggregate.store
        if store is not None and self.parent.session.id in self.aggregate.parents:
            if self.http.stopping:
                # The tray is going away, not the session: the next tray adopts it.
                store.touch(self.parent.session.id, time.time())
            else:
                store.drop(self.parent.session.id)
        self.aggregate.close(self.parent)

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/roots/list_changed":
            await self.aggregate.roots_changed(self.parent)

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
        result = await self.aggregate.handle(self.parent, request)
        store = self.aggregate.store
        if store is not None:
            store.touch(self.parent.session.id, time.time())
            if method in SHARE_METHODS:
                self._save()
        return result

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        session = self.client.session
        self.client.declare(params)
        aggregate = self.aggregate
        if session.id not in aggregate.parents:
            aggregate.open(self.parent)
            aggregate.sessions.identify(session, session.client_name)
        result = await aggregate.hello(self.parent, params)
        self._save(result.get("protocolVersion"))
        return result


class AggregateStateless:
    """An aggregate endpoint's ``StatelessHandler``: what a 2026-07-28 client asks of it."""

    def __init__(self, aggregate: Aggregate, where: str) -> None:
        self.aggregate = aggregate
        self.where = where

    async def on_stateless(
        self,
        ctx: StatelessContext,
        method: str,
        params: Mapping[str, Any],
        envelope: Envelope,
        scope: Scope,
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        clients = self.aggregate.stateless
        seated, client = await seat(clients, self.where, envelope, scope, headers)
        parent = self.aggregate.parents[seated.session.id]
        request = Request(client, method, params, ctx, ask=None, headers=headers)
        if method == "subscriptions/listen":
            return await self.aggregate.listen(parent, request)
        return await self.aggregate.handle(parent, request)
