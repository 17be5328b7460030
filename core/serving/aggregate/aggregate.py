"""One endpoint for many servers: ``/mcp`` (every enabled server) and ``/mcp/@NAME`` (a profile).

A client of an aggregate endpoint sees one MCP server whose tools and
prompts are its members' under ``SERVER__NAME`` and whose resources are
theirs under their own URIs (core.serving.aggregate.profile_view). Its session there
(a ``Parent``) reaches each member through a session of its own with that
member (a ``Link``, core.serving.aggregate.aggregate_links), and every request for a
member goes through the one request pipeline (core.serving.calls.pipeline) as a
request of ``/mcp/SERVER`` would: placement (a ``per-session`` or
``per-workspace`` child of the link's own), the link's breaker, the call
path (a respawn, one retry when it is safe), era translation. So what a
server's own endpoint guarantees holds per member, in both eras:

- a parked or breaker-open member answers its own calls with its own
  reason, and only its link's breaker counts them: the others keep working;
- isolation: the router attributes a member's request or log line to the
  link whose call it belongs to, so it reaches only that client session;
- ``list_changed``: when a member's lists change, a member restarts, or a
  config edit changes what a profile offers, its clients are told, once
  per kind for a burst (``LIST_CHANGED_COALESCE_SECONDS``).

What the aggregate answers itself: ``initialize`` and ``server/discover``
(its members' offer joined), ``ping``, the four lists (from the profile's
``Listing``, built off the call path and encoded once per change:
core.serving.aggregate.view_cache), ``logging/setLevel`` (handed on to every link),
and a discovery profile's ``search_tools`` and ``describe_tools``
(core.serving.aggregate.discovery; its ``call_tool`` is the member's call, routed
like any). A call to a tool the profile leaves out is refused with a
message naming the profile.
"""

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from core.base.errors import CallError, RpcError, shown
from core.base.snapshot import Event, EventKind, ProfileSnapshot
from core.base.states import ServerState
from core.protocol.eras import MODERN_PROTOCOL_VERSIONS, REMOVED_IN_MODERN, as_complete
from core.protocol.http_session import HttpSession
from core.protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND
from core.protocol.stateless import StatelessContext
from core.protocol.streamable import StreamableHttp
from core.serving.aggregate.aggregate_eras import AggregateHandshake, AggregateStateless
from core.serving.aggregate.aggregate_links import Link, Parent
from core.serving.aggregate.discovery import (
    CALL_TOOL,
    DESCRIBE_TOOL,
    META_NAMES,
    SEARCH_TOOL,
    call_params,
    describe_answer,
    search_answer,
)
from core.serving.aggregate.profile_view import KINDS, ProfileView
from core.serving.aggregate.view_cache import DISCOVERY_TOKENS, Listing, Views, server_info
from core.serving.calls.answers import LIST_METHODS, shared_version
from core.serving.calls.pipeline import Pipeline
from core.serving.calls.placement import started
from core.serving.calls.request import NoReply, Request
from core.serving.eras.identity import StatelessClients, WorkerView
from core.serving.eras.stateless import (
    RESOURCE_SUBSCRIPTIONS,
    Listener,
    acknowledge,
    listen_filters,
)
from core.serving.observe.telemetry import client_trace
from core.serving.sessions.session_store import SessionStore
from core.serving.sessions.sessions import ClientSession, SessionTable
from core.settings.profiles import ALL_PROFILE, endpoint_path, find_profile, profile_name, target
from core.supervision.routing import Caller

logger = logging.getLogger(__name__)

#: A burst of list changes (a restart, a config edit, several members at once)
#: is told to each client once per kind, this long after its first change.
LIST_CHANGED_COALESCE_SECONDS: Final = 0.05
#: Requests routed by a resource URI.
URI_METHODS: Final = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
#: The view kind each list_changed kind (or list) belongs to.
KIND_OF: Final = {"tools": "tools", "prompts": "prompts", "resources": "resources"}


class Aggregate:
    """The aggregate endpoints, their client sessions, and what each profile offers."""

    def __init__(
        self,
        pipeline: Pipeline,
        worker_alive: WorkerView,
        *,
        max_body_bytes: int,
        coalesce_seconds: float = LIST_CHANGED_COALESCE_SECONDS,
        store: SessionStore | None = None,
    ) -> None:
        self.pipeline = pipeline
        #: Handshake-era sessions kept for the next tray (the gateway's store).
        self.store = store
        self.supervisor = pipeline.supervisor
        self.max_body_bytes = max_body_bytes
        self.coalesce_seconds = coalesce_seconds
        #: Open client sessions, by id.
        self.parents: dict[str, Parent] = {}
        #: 2026-07-28 clients, keyed by their process like a server's own endpoint's.
        self.stateless = StatelessClients(self, worker_alive)
        self._endpoints: dict[str, StreamableHttp] = {}
        #: Each profile's view and lists, kept current off the call path.
        self.views = Views(lambda: self.supervisor.config, lambda: self.supervisor.servers)
        #: What each profile's clients were last told of (signatures), to see what changed.
        self._announced: dict[str, dict[str, str]] = {}
        self._generations: dict[str, int] = {}
        #: Changes not yet told: kinds per member (restarts, lists) and per client session.
        self._forced: dict[str, set[str]] = {}
        self._pending: dict[str, set[str]] = {}
        self._flush_at: asyncio.TimerHandle | None = None
        #: A flush waits for the views' rebuild to land.
        self._after_rebuild = False
        self._unsubscribe = self.supervisor.subscribe(self._on_event)

    async def aclose(self) -> None:
        self._unsubscribe()
        if self._flush_at is not None:
            self._flush_at.cancel()
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
        await self.views.aclose()

    # ------------------------------------------------------------- HTTP

    async def serve(self, name: str, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP request to ``/mcp`` or ``/mcp/@NAME``."""
        profile = profile_name(name)
        endpoint = self._endpoints.get(profile)
        if endpoint is None and find_profile(self.supervisor.config.profiles, profile) is None:
            known = ", ".join([ALL_PROFILE, *sorted(self.supervisor.config.profiles)])
            message = f"no profile named {shown(profile)} (configured: {known})"
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        if endpoint is None:
            where = target(profile)
            endpoint = StreamableHttp(
                lambda http, scope: AggregateHandshake.open(self, where, http, scope),
                max_body_bytes=self.max_body_bytes,
                stateless=AggregateStateless(self, where),
                adopt=lambda session_id, scope: self._adopt(where, session_id),
            )
            endpoint.start()
            self._endpoints[profile] = endpoint
        await endpoint.handle(scope, receive, send)

    def _adopt(self, where: str, session_id: str) -> HttpSession | None:
        """A previous tray's session of this endpoint, brought back the first time its id
        returns."""
        saved = self.store.adopt(where, session_id) if self.store is not None else None
        if saved is None:
            return None
        logger.info("adopted session %s of %s from the previous mcp-tray", session_id, where)
        return AggregateHandshake.adopt(self, saved).http

    # ------------------------------------------------- sessions (SessionHost)

    @property
    def sessions(self) -> SessionTable:
        return self.pipeline.sessions

    def open_session(self, session: ClientSession) -> None:
        """A 2026-07-28 client's new session (core.serving.eras.identity made it)."""
        self.open(Parent(session, profile_name(session.server), modern=True, on_lists=self.told))

    def close_session(self, session: ClientSession) -> None:
        parent = self.parents.get(session.id)
        if parent is not None:
            self.close(parent)

    def release(self, session: ClientSession) -> None:
        """A parent holds nothing of its own: each link releases what it holds."""

    def open(self, parent: Parent) -> None:
        self.parents[parent.session.id] = parent
        self.pipeline.hooks.session_opened(parent.session)
        self.supervisor.publish(Event(EventKind.SESSIONS, text=f"opened {parent.session.id}"))

    def close(self, parent: Parent) -> None:
        if self.parents.pop(parent.session.id, None) is None:
            return
        parent.session.closed = True
        for link in parent.links.values():
            self.pipeline.close_session(link.session)
        self._pending.pop(parent.session.id, None)
        self.pipeline.hooks.session_closed(parent.session)
        self.supervisor.publish(Event(EventKind.SESSIONS, text=f"closed {parent.session.id}"))

    async def link(self, parent: Parent, server: str, request: Request) -> Link:
        """The parent's session with ``server`` (made at its first request for it)."""
        found = parent.links.get(server)
        if found is not None:
            return found
        session = ClientSession(
            id=parent.link_id(server),
            server=server,
            kind=parent.session.kind,
            client_name=parent.session.client_name,
            worker_identity=parent.session.worker_identity,
            roots=parent.session.roots,
            via=target(parent.profile),
        )
        session.release = lambda: self.pipeline.release(session)
        link = parent.links[server] = Link(parent, server, session, self.pipeline.seats.seat)
        # In the session table (its breaker, the Sessions tab); the parent has the registry row.
        self.sessions.open(session)
        if parent.level is not None:
            await self._give_level(link, request, parent.level)
        return link

    # ------------------------------------------------------------- views

    def view(self, profile: str) -> ProfileView:
        """What ``profile`` offers now (built again when a member's catalog or the config moved)."""
        return self.views.get(profile).view

    def profile_views(self) -> list[ProfileView]:
        return [self.view(name) for name in (ALL_PROFILE, *self.supervisor.config.profiles)]

    def snapshots(self) -> tuple[ProfileSnapshot, ...]:
        """Every profile's figures, and the client sessions connected to it."""
        connected: dict[str, list[str]] = {}
        for parent in self.parents.values():
            connected.setdefault(parent.profile, []).append(parent.session.client_name)
        return tuple(
            ProfileSnapshot(
                name=view.name,
                path=endpoint_path(target(view.name)),
                servers=view.members,
                tools=len(view.tools),
                prompts=len(view.prompts),
                resources=len(view.resources) + len(view.templates),
                tokens=view.tokens,
                tools_bytes=view.tools_bytes,
                discovery=view.profile.discovery,
                discovery_tokens=DISCOVERY_TOKENS,
                renamed=tuple(view.renamed),
                warnings=tuple(view.warnings()),
                sessions=tuple(sorted(connected.get(view.name, ()))),
            )
            for view in self.profile_views()
        )

    async def _members_started(self, profile: str) -> ProfileView:
        """The view once its members starting for the first time have listed (bounded)."""
        view = self.view(profile)
        if view.waiting:
            servers = self.supervisor.servers
            await asyncio.gather(*(started(servers[name]) for name in view.waiting))
            view = self.view(profile)
        self._announced.setdefault(profile, view.signature)
        return view

    # ----------------------------------------------------------- answers

    def _offer(self, view: ProfileView) -> dict[str, Any]:
        resources: dict[str, Any] = {"listChanged": True}
        if view.subscribe:
            resources["subscribe"] = True
        capabilities: dict[str, Any] = {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": resources,
        }
        if view.logging:
            capabilities["logging"] = {}
        if view.completions:
            capabilities["completions"] = {}
        return capabilities

    async def hello(self, parent: Parent, params: Mapping[str, Any]) -> dict[str, Any]:
        """``initialize``: the members' offer, joined."""
        view = await self._members_started(parent.profile)
        result: dict[str, Any] = {
            "protocolVersion": shared_version(params.get("protocolVersion"), view.oldest_version),
            "capabilities": self._offer(view),
            "serverInfo": server_info(view),
        }
        if view.instructions:
            result["instructions"] = view.instructions
        return result

    async def discover(self, profile: str) -> dict[str, Any]:
        """``server/discover``: the same offer, for a 2026-07-28 client."""
        view = await self._members_started(profile)
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
            "capabilities": self._offer(view),
        }
        if view.instructions:
            result["instructions"] = view.instructions
        return as_complete(result, "server/discover", server_info(view))

    def subscriptions(self, parent: Parent) -> list[str]:
        """The resources a parent's links are subscribed to, on every member."""
        uris: set[str] = set()
        for link in parent.links.values():
            seat = self.pipeline.seats.seat(link.session)
            if seat is not None:
                uris.update(u for u, who in seat.share.subscribers.items() if link.key in who)
        return sorted(uris)

    async def resume(self, parent: Parent, subscriptions: list[str], level: str | None) -> None:
        """A previous tray's session: its level and subscriptions set again on its members."""
        assert parent.client is not None
        view = await self._members_started(parent.profile)
        if level is not None:
            request = Request(parent.client, "logging/setLevel", {"level": level}, NoReply(), None)
            await self._set_level(parent, request)
        for uri in subscriptions:
            request = Request(parent.client, "resources/subscribe", {"uri": uri}, NoReply(), None)
            with contextlib.suppress(CallError, RpcError):
                await self._to_member(parent, view, request)

    async def handle(self, parent: Parent, request: Request) -> dict[str, Any]:
        """One request of a parent: answered here, or routed to its member."""
        client = request.client
        method = request.method
        if client.modern:
            if method == "server/discover":
                return await self.discover(parent.profile)
            if method in REMOVED_IN_MODERN:
                raise RpcError(METHOD_NOT_FOUND, f"{shown(method)} is not part of MCP 2026-07-28")
        elif method == "ping":
            return {}
        listing = self.views.get(parent.profile)
        parent.session.requests += 1
        if method in LIST_METHODS:
            return listing.answer(LIST_METHODS[method], client.modern)
        if method == "logging/setLevel":
            return await self._set_level(parent, request)
        if (
            method == "tools/call"
            and listing.view.profile.searched
            and request.params.get("name") in META_NAMES
        ):
            return await self._discovery_call(parent, listing, request)
        return await self._to_member(parent, listing.view, request)

    async def _discovery_call(
        self, parent: Parent, listing: Listing, request: Request
    ) -> dict[str, Any]:
        """``search_tools`` and ``describe_tools`` answered here; ``call_tool`` routed to
        its member as the direct call of that tool would be (every guarantee of it)."""
        name = request.params.get("name")
        arguments = request.params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        assert listing.index is not None  # a discovery profile's listing has one
        if name == SEARCH_TOOL:
            result = search_answer(listing.index, arguments)
        elif name == DESCRIBE_TOOL:
            result = describe_answer(listing.index, arguments)
        else:
            assert name == CALL_TOOL
            try:
                params = call_params(arguments)
                inner = Request(
                    request.client,
                    "tools/call",
                    {**request.params, **params},
                    request.reply,
                    request.ask,
                    request.headers,
                    # The client's headers mirror call_tool's own arguments, not the tool's.
                    mirrored=False,
                )
                return await self._to_member(parent, listing.view, inner)
            except RpcError as exc:
                # A tool's refusal: the model reads it (an unknown or left-out name).
                result = {"content": [{"type": "text", "text": exc.message}], "isError": True}
        if request.client.modern:
            return as_complete(result, "tools/call", server_info(listing.view))
        return result

    async def _to_member(
        self, parent: Parent, view: ProfileView, request: Request
    ) -> dict[str, Any]:
        client = request.client
        method = request.method
        try:
            server, params = self._route(view, method, request.params)
        except RpcError as exc:
            if view.name != ALL_PROFILE and method in ("tools/call", "prompts/get"):
                named = str(request.params.get("name") or "")
                self.pipeline.journal.refused(
                    parent.session,
                    client.modern,
                    named.partition("__")[0] if "__" in named else "",
                    method,
                    request.params,
                    "profile",
                    exc.message,
                    client_trace(request.headers, request.params),
                )
            raise
        link = parent.links.get(server) or await self.link(parent, server, request)
        routed = Request(
            link.client(client), method, params, request.reply, request.ask, request.headers
        )
        call = parent.calling(server, request.reply)
        try:
            return await self.pipeline.handle(routed, link)
        finally:
            parent.called(call)
            if parent.session.roots is None:
                parent.session.roots = link.session.roots  # later links start from them

    def _route(
        self, view: ProfileView, method: str, params: Mapping[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """The member a request goes to, and its params as that member knows them."""
        if method in ("tools/call", "prompts/get"):
            kind = "tool" if method == "tools/call" else "prompt"
            name = params.get("name")
            routes = view.tool_routes if kind == "tool" else view.prompt_routes
            route = None
            if isinstance(name, str):
                # A member that never listed answers for itself (its tools' globs apply).
                route = routes.get(name) or (view.pending_route(name) if kind == "tool" else None)
            if route is None:
                raise RpcError(INVALID_PARAMS, self._refusal(view, kind, name))
            return route.server, {**params, "name": route.name}
        if method in URI_METHODS:
            return self._owner(view, params.get("uri")), dict(params)
        if method == "completion/complete":
            ref = params.get("ref")
            ref = ref if isinstance(ref, dict) else {}
            if ref.get("type") == "ref/prompt":
                server, inner = self._route(view, "prompts/get", {"name": ref.get("name")})
                return server, {**params, "ref": {**ref, "name": inner["name"]}}
            return self._owner(view, ref.get("uri")), dict(params)
        raise RpcError(
            METHOD_NOT_FOUND,
            f"{shown(method)} is not served by an aggregate endpoint; a server's own endpoint "
            "(/mcp/SERVER) relays it",
        )

    def _owner(self, view: ProfileView, uri: object) -> str:
        owner = view.resource_owner(uri) if isinstance(uri, str) else None
        if owner is None:
            where = "no server" if view.name == ALL_PROFILE else f"no server of {view.name!r}"
            raise RpcError(INVALID_PARAMS, f"{where} offers the resource {shown(uri)}")
        return owner

    def _refusal(self, view: ProfileView, kind: str, name: object) -> str:
        everything = self.view(ALL_PROFILE) if view.name != ALL_PROFILE else None
        text = view.refusal(kind, str(name), everything)
        if view.name != ALL_PROFILE:
            text += f' (see "profiles": {{"{view.name}": ...}} in {self.supervisor.config.path})'
        return text

    async def _set_level(self, parent: Parent, request: Request) -> dict[str, Any]:
        level = request.params.get("level")
        if not isinstance(level, str):
            raise RpcError(INVALID_PARAMS, "logging/setLevel needs a string 'level'")
        parent.level = level
        for link in list(parent.links.values()):
            seat = self.pipeline.seats.seat(link.session)
            if seat is not None:
                with contextlib.suppress(CallError, RpcError):
                    await seat.share.set_level(link.key, level, Caller(session=link.key))
        return {}

    async def _give_level(self, link: Link, request: Request, level: str) -> None:
        """A new link hears the member's log lines at the level its client set."""
        seated = Request(link.client(request.client), "logging/setLevel", {}, NoReply(), None)
        with contextlib.suppress(CallError, RpcError):
            server = await self.pipeline.seats.server_for(seated, link)
            await self.pipeline.seats.share(server).set_level(
                link.key, level, Caller(session=link.key)
            )

    async def roots_changed(self, parent: Parent) -> None:
        """A handshake-era client says its roots changed: each link learns them again."""
        parent.session.roots = None
        assert parent.client is not None
        for link in list(parent.links.values()):
            await self.pipeline.seats.roots_changed(link.client(parent.client), link)

    async def listen(self, parent: Parent, request: Request) -> dict[str, Any]:
        """A 2026-07-28 client's ``subscriptions/listen``: list changes come from here,
        resource updates from the members that own the URIs."""
        ctx = request.reply
        assert isinstance(ctx, StatelessContext)
        honoured, wanted = listen_filters(request.params)
        view = self.view(parent.profile)
        owned = [(uri, owner) for uri in wanted if (owner := view.resource_owner(uri))]
        if owned:
            honoured[RESOURCE_SUBSCRIPTIONS] = [uri for uri, _ in owned]
        key = f"{parent.session.id}/listen/{ctx.request_id}"
        parent.listeners[key] = Listener(parent.session.id, key, ctx, honoured)
        joined = []
        try:
            for uri, owner in owned:
                link = await self.link(parent, owner, request)
                routed = Request(link.client(request.client), request.method, {}, ctx, None)
                share = self.pipeline.seats.share(
                    await self.pipeline.seats.server_for(routed, link)
                )
                # Resource updates only: list changes come once, from the aggregate.
                member = Listener(link.key, f"{link.key}/listen/{ctx.request_id}", ctx, {})
                share.join(member)
                joined.append((share, member))
                await share.subscribe(member.key, uri, Caller(session=link.key))
            acknowledge(ctx, honoured)
            await asyncio.Event().wait()  # until the client hangs up (it cancels us)
        finally:
            parent.listeners.pop(key, None)
            for share, member in joined:
                share.leave(member, self.pipeline.spawn)
        return {}  # pragma: no cover - only a hang-up ends a listen stream

    # ------------------------------------------------------- list_changed

    def told(self, parent: Parent, kind: str) -> None:
        """A member's share told one of this parent's links that a list changed."""
        if kind in KIND_OF:
            self._pending.setdefault(parent.session.id, set()).add(KIND_OF[kind])
            self._schedule()

    def _on_event(self, event: Event) -> None:
        server = event.server
        if event.kind is EventKind.CONFIG:
            if event.alert is not None:
                return  # a refused edit changes nothing
            self.views.reloads += 1
            self.views.changed()
        elif server not in self.supervisor.servers:
            return  # a child made for a session: its links hear it themselves
        elif event.kind is EventKind.LISTS and event.text in KIND_OF:
            self.views.changed()
            self._forced.setdefault(server, set()).add(KIND_OF[event.text])
        elif (
            event.kind is EventKind.STATE
            and event.snapshot is not None
            and event.snapshot.state is ServerState.READY
            and self._generations.get(server) != event.snapshot.generation
        ):
            # A member (re)started: what it offers may be new, whatever it says.
            self.views.changed()
            self._generations[server] = event.snapshot.generation
            offered = self.supervisor.servers[server].catalog.capabilities
            self._forced[server] = {kind for kind in KINDS if kind in offered}
        else:
            return
        self._schedule()

    def _schedule(self) -> None:
        if self._after_rebuild:
            return  # a flush waits for the rebuild under way, and takes this change too
        if self._flush_at is None and self.parents:
            loop = asyncio.get_running_loop()
            self._flush_at = loop.call_later(self.coalesce_seconds, self._flush)
        elif not self.parents:
            self._forced.clear()

    def _flush(self) -> None:
        self._flush_at = None
        rebuilding = self.views.settled()
        if rebuilding is not None:
            # Told once the new lists are built: the clients' next list is answered from them.
            self._after_rebuild = True
            rebuilding.add_done_callback(lambda _: self._flush_now())
            return
        self._flush_now()

    def _flush_now(self) -> None:
        self._after_rebuild = False
        forced, self._forced = self._forced, {}
        pending, self._pending = self._pending, {}
        by_profile: dict[str, list[Parent]] = {}
        for parent in self.parents.values():
            by_profile.setdefault(parent.profile, []).append(parent)
        for profile, parents in by_profile.items():
            try:
                view = self.view(profile)
            except RpcError:
                changed = set(KINDS)  # the profile went: its lists are gone
            else:
                before = self._announced.get(profile, view.signature)
                changed = {kind for kind in KINDS if before.get(kind) != view.signature.get(kind)}
                self._announced[profile] = view.signature
                for member in view.members:
                    changed |= forced.get(member, set())
            for parent in parents:
                for kind in sorted(changed | pending.pop(parent.session.id, set())):
                    parent.post({"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"})
