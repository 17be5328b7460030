"""What each profile offers, built once per change and off the call path, and its lists encoded once.

A profile's view (core.serving.aggregate.profile_view) is built from its members'
catalogs; building one of ten 50-tool members takes tens of milliseconds,
and encoding its tools/list for every request as much again per request.
So the aggregate keeps, per profile, a ``Listing``: the view, each list's
answer for both eras already encoded (``EncodedResult``, spliced into the
response as bytes), and for a discovery profile its search index.

- **When it is built.** What a view is built from is stamped (the config's
  reloads, every member's catalog revision). An event that moves it (a
  member listed, restarted, a config edit, core.serving.aggregate.aggregate) starts a
  rebuild of every profile on a worker thread, from copies of the catalogs
  taken on core's loop; the result is kept only if nothing moved meanwhile
  (else it is built again). A request that finds its profile's stamp moved
  before the rebuild landed builds that one view itself: never a stale
  answer, only a slower one (``built_on_call`` counts them).
- **What it costs then.** A list from the cache is a dict lookup and a byte
  copy into the response.
"""

import asyncio
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core import __version__
from core.base.errors import RpcError
from core.protocol.eras import as_complete
from core.protocol.jsonrpc import INVALID_PARAMS, EncodedResult, dumps
from core.serving.aggregate.discovery import META_TOOLS, ToolIndex
from core.serving.aggregate.profile_view import BYTES_PER_TOKEN, ProfileView, build_view
from core.settings.config import ServerConfig, TrayConfig
from core.settings.profiles import (
    ALL_PROFILE,
    EVERYTHING,
    ProfileConfig,
    endpoint_path,
    find_profile,
    target,
)
from core.supervision.catalog import Catalog
from core.supervision.server import ManagedServer

#: The view's list each list kind answers from.
VIEW_LISTS: Final = {
    "tools": "tools",
    "prompts": "prompts",
    "resources": "resources",
    "resourceTemplates": "templates",
}
#: The list method of each kind (a 2026-07-28 result names it).
LIST_METHOD: Final = {
    "tools": "tools/list",
    "prompts": "prompts/list",
    "resources": "resources/list",
    "resourceTemplates": "resources/templates/list",
}
#: Bytes of a discovery profile's tools/list: the same three tools for every profile.
DISCOVERY_BYTES: Final = len(dumps({"tools": list(META_TOOLS)}))
DISCOVERY_TOKENS: Final = -(-DISCOVERY_BYTES // BYTES_PER_TOKEN)

#: Rebuilds in a row while what they are built from keeps moving; after them, the
#: next request builds its own view (the event that moved it starts another anyway).
REBUILD_TRIES: Final = 3

Stamp = tuple[object, ...]


def server_info(view: ProfileView) -> dict[str, Any]:
    """Who an aggregate endpoint says it is."""
    return {
        "name": "mcp-tray",
        "title": f"mcp-tray {target(view.name)}: {', '.join(view.members) or 'no servers'}",
        "version": __version__,
    }


@dataclass
class Listing:
    """One profile's view, its lists as clients get them (encoded), its search index."""

    view: ProfileView
    #: A discovery profile's tools, searchable (None for a full-list profile).
    index: ToolIndex | None = None
    answers: dict[tuple[str, bool], EncodedResult] = field(default_factory=dict)

    def answer(self, kind: str, modern: bool) -> EncodedResult:
        """The list of ``kind`` in the client's era, encoded once."""
        return self.answers[(kind, modern)]


def prepare(
    profile: ProfileConfig, servers: Mapping[str, ServerConfig], catalogs: Mapping[str, Catalog]
) -> Listing:
    """A profile's view and everything answered from it (no I/O: a worker thread runs it)."""
    view = build_view(profile, servers, catalogs)
    listing = Listing(view)
    if profile.searched:
        listing.index = ToolIndex(view.tools)
    info = server_info(view)
    for kind, attribute in VIEW_LISTS.items():
        items = (
            list(META_TOOLS) if kind == "tools" and profile.searched else getattr(view, attribute)
        )
        listed = {kind: list(items)}
        listing.answers[(kind, False)] = EncodedResult(listed)
        listing.answers[(kind, True)] = EncodedResult(as_complete(listed, LIST_METHOD[kind], info))
    return listing


def prepare_all(
    profiles: list[ProfileConfig],
    servers: Mapping[str, ServerConfig],
    catalogs: Mapping[str, Catalog],
) -> list[Listing]:
    return [prepare(profile, servers, catalogs) for profile in profiles]


def frozen(catalog: Catalog) -> Catalog:
    """What a view reads of a catalog, copied on core's loop for a worker thread (a
    listing replaces a catalog's lists, never changes one in place)."""
    copied = copy.copy(catalog)
    copied.lists = dict(catalog.lists)
    copied.capabilities = dict(catalog.capabilities)
    return copied


class Views:
    """Every profile's ``Listing``, kept current off the call path."""

    def __init__(
        self, config: Callable[[], TrayConfig], servers: Callable[[], Mapping[str, ManagedServer]]
    ) -> None:
        self._config = config
        self._servers = servers
        self._cache: dict[str, tuple[Stamp, Listing]] = {}
        self.reloads = 0
        #: Views a request had to build itself (its profile moved before the rebuild landed).
        self.built_on_call = 0
        #: Rebuilds landed (all profiles at once).
        self.rebuilds = 0
        self._task: asyncio.Task[None] | None = None
        self._again = False

    def stamp(self) -> Stamp:
        servers = self._servers()
        return (self.reloads, *((s.catalog.revision, s.catalog.known) for s in servers.values()))

    def get(self, profile: str) -> Listing:
        """What ``profile`` offers now (built here only when a change has not been built yet)."""
        config = self._config()
        chosen = find_profile(config.profiles, profile)
        if chosen is None:
            raise RpcError(
                INVALID_PARAMS,
                f"profile {profile!r} is no longer in the config ({config.path}); "
                f"connect to another profile, or to {endpoint_path(target(ALL_PROFILE))}",
            )
        stamp = self.stamp()
        cached = self._cache.get(profile)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        catalogs = {name: server.catalog for name, server in self._servers().items()}
        listing = prepare(chosen, config.servers, catalogs)
        self.built_on_call += 1
        self._cache[profile] = (stamp, listing)
        return listing

    def changed(self) -> None:
        """What views are built from may have moved: rebuild them all, off the call path."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop runs (a tray not started yet): the next request builds its view
        self._task = loop.create_task(self._rebuild())

    def settled(self) -> "asyncio.Task[None] | None":
        """The rebuild under way, if one is."""
        return self._task if self._task is not None and not self._task.done() else None

    async def _rebuild(self) -> None:
        for _ in range(REBUILD_TRIES):
            self._again = False
            stamp = self.stamp()
            config = self._config()
            catalogs = {name: frozen(server.catalog) for name, server in self._servers().items()}
            profiles = [EVERYTHING, *config.profiles.values()]
            listings = await asyncio.to_thread(prepare_all, profiles, config.servers, catalogs)
            if self.stamp() == stamp and self._config() is config:
                self._cache = {listing.view.name: (stamp, listing) for listing in listings}
                self.rebuilds += 1
            if not self._again and self.stamp() == stamp:
                return

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
