"""The two eras' adapters of an aggregate endpoint: thin, like a server's own (core.serving.handshake,
core.serving.stateless).

Each decodes a client's message once into the pipeline's ``Request`` and
hands it to the aggregate (core.serving.aggregate). What only an era has
stays here: a handshake-era session (opened by ``initialize``, its GET
stream, the client asked on its request's stream), and a 2026-07-28
client's session, keyed by its process like on a server's own endpoint
(core.serving.identity).
"""

from collections.abc import Mapping
from functools import partial
from typing import Any, Protocol

from starlette.types import Scope

from core.protocol.eras import Envelope
from core.protocol.headers import scope_headers
from core.protocol.http_session import HttpSession, RequestContext
from core.protocol.stateless import StatelessContext
from core.serving.aggregate_links import Parent
from core.serving.handshake import ask_client, handshake_session
from core.serving.identity import StatelessClients
from core.serving.request import Client, Request
from core.serving.sessions import SessionTable
from core.serving.stateless import seat
from core.settings.profiles import profile_name


class Aggregate(Protocol):
    """What the adapters hand their requests to (core.serving.aggregate)."""

    @property
    def parents(self) -> Mapping[str, Parent]: ...

    @property
    def stateless(self) -> StatelessClients: ...

    @property
    def sessions(self) -> SessionTable: ...

    def told(self, parent: Parent, kind: str) -> None: ...

    def open(self, parent: Parent) -> None: ...

    def close(self, parent: Parent) -> None: ...

    async def hello(self, parent: Parent, params: Mapping[str, Any]) -> dict[str, Any]: ...

    async def handle(self, parent: Parent, request: Request) -> dict[str, Any]: ...

    async def listen(self, parent: Parent, request: Request) -> dict[str, Any]: ...

    async def roots_changed(self, parent: Parent) -> None: ...


class AggregateHandshake:
    """One handshake-era client session of an aggregate endpoint (the HTTP session's ``Handler``)."""

    def __init__(self, aggregate: Aggregate, parent: Parent, http: HttpSession) -> None:
        self.aggregate = aggregate
        self.parent = parent
        self.http = http
        self.client = Client(parent.session, modern=False, ask=self._ask_outside)
        parent.client = self.client
        parent.http = http

    @classmethod
    def open(
        cls, aggregate: Aggregate, where: str, http: HttpSession, scope: Scope
    ) -> "AggregateHandshake":
        session = handshake_session(http.id, where, scope_headers(scope))
        parent = Parent(session, profile_name(where), modern=False, on_lists=aggregate.told)
        return cls(aggregate, parent, http)

    async def _ask_outside(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return await ask_client(self.client, self.http, method, params)

    async def _ask_during(
        self, ctx: RequestContext, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return await ask_client(self.client, self.http, method, params, via=ctx)

    # ------------------------------------------------------ Handler protocol

    def on_close(self) -> None:
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
        request = Request(self.client, method, values, ctx, ask=partial(self._ask_during, ctx))
        return await self.aggregate.handle(self.parent, request)

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        session = self.client.session
        self.client.declare(params)
        aggregate = self.aggregate
        if session.id not in aggregate.parents:
            aggregate.open(self.parent)
            aggregate.sessions.identify(session, session.client_name)
        return await aggregate.hello(self.parent, params)


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
