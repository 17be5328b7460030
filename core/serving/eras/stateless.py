"""Clients of the stateless era (2026-07-28) on the gateway: a thin adapter to the pipeline.

Each request stands alone: its ``_meta`` envelope says who the client is and
what it can do, and it is decoded once into the pipeline's era-neutral
``Request`` (core.serving.calls.request). What only this era has lives here:

- **who is calling** (the session breaker, the Sessions tab, a per-session
  child): core.serving.eras.identity keys a stateless client's session by what
  stays the same for one client process;
- **change notifications** come on a ``subscriptions/listen`` stream, a
  member of the child's share for as long as the client holds it open.
"""

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from starlette.types import Scope

from core.protocol.eras import SUBSCRIPTION_ID_META_KEY, Envelope
from core.protocol.stateless import StatelessContext
from core.serving.calls.fanout import Share
from core.serving.calls.pipeline import Pipeline
from core.serving.calls.request import Client, Request
from core.serving.eras.identity import StatelessClients, StatelessSession
from core.supervision.routing import Caller

#: The filter keys of ``subscriptions/listen`` and the notification each lets through.
LISTEN_FILTERS: Final = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
RESOURCE_SUBSCRIPTIONS: Final = "resourceSubscriptions"


class Listener:
    """A ``subscriptions/listen`` stream, as a member of its child's share."""

    def __init__(
        self, session: str, key: str, ctx: StatelessContext, wanted: Mapping[str, Any]
    ) -> None:
        self.key = key
        self.session_id = session
        self.ctx = ctx
        self.exclusive = False
        self.methods = {
            method for flag, method in LISTEN_FILTERS.items() if wanted.get(flag) is True
        }

    def log_level(self, share: Share) -> str | None:
        return None

    def hears_unlevelled(self) -> bool:
        return False

    def deliver_with_call(self, message: dict[str, Any]) -> bool:
        return False

    def post(self, message: dict[str, Any]) -> bool:
        method = message.get("method")
        # resources/updated only reaches a listener subscribed to its URI (the share checks).
        if method not in self.methods and method != "notifications/resources/updated":
            return False
        params = dict(message.get("params") or {})
        params["_meta"] = {
            **(params.get("_meta") or {}),
            SUBSCRIPTION_ID_META_KEY: self.ctx.request_id,
        }
        self.ctx.related({**message, "params": params})
        return True


class StatelessEndpoint:
    """One server's ``StatelessHandler``: what a 2026-07-28 client asks of it."""

    def __init__(self, pipeline: Pipeline, clients: StatelessClients, name: str) -> None:
        self.pipeline = pipeline
        self.clients = clients
        self.name = name

    async def on_stateless(
        self,
        ctx: StatelessContext,
        method: str,
        params: Mapping[str, Any],
        envelope: Envelope,
        scope: Scope,
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        seated, client = await seat(self.clients, self.name, envelope, scope, headers)
        request = Request(client, method, params, ctx, ask=None, headers=headers)
        if method == "subscriptions/listen":
            return await self._listen(request, ctx, seated)
        return await self.pipeline.handle(request, seated)

    async def _listen(self, request: Request, ctx: StatelessContext, seated: Any) -> dict[str, Any]:
        honoured, subscribed = listen_filters(request.params)
        if subscribed:
            honoured[RESOURCE_SUBSCRIPTIONS] = subscribed
        pipeline = self.pipeline
        server = await pipeline.seats.server_for(request, seated)
        share = pipeline.seats.share(server)
        session = request.client.session.id
        listener = Listener(session, f"{session}/listen/{ctx.request_id}", ctx, honoured)
        share.join(listener)
        try:
            for uri in subscribed:
                await share.subscribe(listener.key, uri, Caller(session=session))
            acknowledge(ctx, honoured)
            await asyncio.Event().wait()  # until the client hangs up (it cancels us)
        finally:
            share.leave(listener, pipeline.spawn)
        return {}  # pragma: no cover - only a hang-up ends a listen stream


async def seat(
    clients: StatelessClients,
    name: str,
    envelope: Envelope,
    scope: Scope,
    headers: Mapping[str, str],
) -> tuple[StatelessSession, Client]:
    """The client's session on endpoint ``name`` (found, or made), and the client as this
    request's envelope declares it."""
    seated = clients.known(name, envelope, scope, headers)
    if seated is None:
        seated = await clients.session_for(name, envelope, scope, headers)
    client = Client(
        seated.session,
        modern=True,
        capabilities=envelope.capabilities,
        info=envelope.client_info,
        log_level=envelope.log_level,
    )
    return seated, client


def listen_filters(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What a ``subscriptions/listen`` asks for: the list changes honoured, the URIs."""
    wanted = params.get("notifications")
    filters = wanted if isinstance(wanted, dict) else {}
    honoured: dict[str, Any] = {k: True for k in LISTEN_FILTERS if filters.get(k) is True}
    uris = filters.get(RESOURCE_SUBSCRIPTIONS)
    return honoured, [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []


def acknowledge(ctx: StatelessContext, honoured: Mapping[str, Any]) -> None:
    """The first message of a listen stream: what it will hear."""
    ctx.related(
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "notifications": dict(honoured),
                "_meta": {SUBSCRIPTION_ID_META_KEY: ctx.request_id},
            },
        }
    )
