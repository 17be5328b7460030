"""What a server offers, as its last handshake and listings said.

Kept across respawns: the gateway answers ``initialize`` and
``server/discover`` and the list methods from here while a child restarts,
and the call path reads tool annotations here to decide whether a cut call
may be replayed. A child of either era fills it: from its ``initialize``
result (the handshake era) or its ``server/discover`` result (2026-07-28).
"""

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.base.errors import RpcError
from core.protocol.eras import SERVER_INFO_META_KEY, with_envelope
from core.supervision.tool_review import ToolScreen
from core.supervision.upstream import OWN_ENVELOPE, Handshake, Upstream

#: Listable kinds, the capability that announces each, and its list method.
LIST_KINDS: Final = {
    "tools": "tools/list",
    "resources": "resources/list",
    "prompts": "prompts/list",
}


@dataclass(frozen=True)
class KeptCatalog:
    """A catalog as an earlier run of the same entry left it, checked field by field."""

    version: str | None
    modern: bool
    discover: dict[str, Any]
    capabilities: dict[str, Any]
    server_info: dict[str, Any]
    instructions: str | None
    listed_tools: list[dict[str, Any]]
    lists: dict[str, list[dict[str, Any]]]
    hints: dict[str, dict[str, Any]]


class Catalog:
    """Capabilities, server info, instructions and the tool/resource/prompt lists."""

    def __init__(self, review: ToolScreen | None = None) -> None:
        #: Screens each listing of tools: a changed tool is left out (docs/design.md §3.14).
        self.review = review
        #: The tools as the child last listed them, held ones included.
        self.listed_tools: list[dict[str, Any]] = []
        #: The protocol revision the child agreed to (None until a handshake).
        self.version: str | None = None
        #: True when the child speaks the stateless 2026-07-28 era.
        self.modern = False
        #: The child's own ``server/discover`` result (2026-07-28 children only).
        self.discover: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.instructions: str | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.lists: dict[str, list[dict[str, Any]]] = {}
        #: Caching hints (ttlMs, cacheScope) a 2026-07-28 child gave per list.
        self.hints: dict[str, dict[str, Any]] = {}
        #: True once a handshake listed tools/resources/prompts at least once.
        self.known = False
        #: Moves at every handshake and listing: what is built on the catalog (a
        #: profile's view, core.serving.aggregate.profile_view) knows when to build again.
        self.revision = 0

    def adopt(self, handshake: Handshake) -> None:
        """Take what an ``initialize`` or ``server/discover`` result says about the server."""
        result = handshake.result
        self.revision += 1
        self.modern = handshake.modern is not None
        if handshake.modern is not None:
            self.version = handshake.modern
            self.discover = dict(result)
            meta = result.get("_meta")
            info = meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
        else:
            version = result.get("protocolVersion")
            self.version = version if isinstance(version, str) else None
            self.discover = {}
            info = result.get("serverInfo")
        capabilities = result.get("capabilities")
        self.capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        self.server_info = dict(info) if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None

    @property
    def era(self) -> str | None:
        """The protocol revision the child speaks, for status and metrics."""
        return self.version

    async def refresh(self, upstream: Upstream, only: str | None = None) -> list[str]:
        """Re-list every kind (or ``only`` one); returns the kinds whose list changed."""
        try:
            return await self._relist(upstream, only)
        finally:
            # Also when a listing failed half-way: what was replaced before counts.
            self.revision += 1

    async def _relist(self, upstream: Upstream, only: str | None) -> list[str]:
        base = with_envelope(None, OWN_ENVELOPE) if self.modern else None
        changed = []
        for kind, method in LIST_KINDS.items():
            if only is not None and kind != only:
                continue
            before = self.lists.get(kind, [])
            if kind not in self.capabilities:
                self.lists[kind] = []
            else:
                self.lists[kind], self.hints[kind] = await upstream.list_all(method, kind, base)
            if kind == "resources" and self.capabilities.get("resources"):
                with contextlib.suppress(RpcError):
                    templates, hints = await upstream.list_all(
                        "resources/templates/list", "resourceTemplates", base
                    )
                    self.lists["resourceTemplates"], self.hints["resourceTemplates"] = (
                        templates,
                        hints,
                    )
            if kind == "tools" and kind in self.capabilities:
                self.listed_tools = self.lists["tools"]
                self.lists["tools"] = self.screened(self.listed_tools)
                if self.review is not None:
                    await self.review.flush()
            if self.lists[kind] != before:
                changed.append(kind)
        self._index_tools()
        return changed

    async def take_lists(self, learnt: "Catalog") -> list[str]:
        """The lists a standby spare learnt on its own (no review: a bare Catalog), as
        this server's; returns the kinds whose list changed, as ``refresh`` does."""
        before = {kind: self.lists.get(kind, []) for kind in LIST_KINDS}
        self.lists = dict(learnt.lists)
        self.hints = dict(learnt.hints)
        if "tools" in self.capabilities:
            # Screened here, not by the spare: what the person approved is this server's.
            self.listed_tools = learnt.listed_tools
            self.lists["tools"] = self.screened(self.listed_tools)
            if self.review is not None:
                await self.review.flush()
        self._index_tools()
        self.revision += 1
        return [kind for kind in LIST_KINDS if self.lists.get(kind, []) != before[kind]]

    def screened(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What of ``tools`` may be offered (all of them where nothing reviews them)."""
        return tools if self.review is None else self.review.screen(tools)

    def rescreen(self) -> bool:
        """Screen the last listing again (a change was approved); True when the offer moved."""
        before = self.lists.get("tools", [])
        self.lists["tools"] = self.screened(self.listed_tools)
        self._index_tools()
        self.revision += 1
        return self.lists["tools"] != before

    def _index_tools(self) -> None:
        self.tools = {
            t["name"]: t for t in self.lists.get("tools", []) if isinstance(t.get("name"), str)
        }

    def kept(self) -> dict[str, Any]:
        """What an on-demand server's catalog keeps on disk (core.supervision.catalog_store)."""
        return {
            "version": self.version,
            "modern": self.modern,
            "discover": self.discover,
            "capabilities": self.capabilities,
            "server_info": self.server_info,
            "instructions": self.instructions,
            "listed_tools": self.listed_tools,
            "lists": {k: v for k, v in self.lists.items() if k != "tools"},
            "hints": self.hints,
        }

    def restore(self, kept: "KeptCatalog") -> None:
        """Take a kept catalog (checked by core.supervision.catalog_store) as the last run's."""
        self.version = kept.version
        self.modern = kept.modern
        self.discover = kept.discover
        self.capabilities = kept.capabilities
        self.server_info = kept.server_info
        self.instructions = kept.instructions
        self.listed_tools = kept.listed_tools
        self.lists = dict(kept.lists)
        self.hints = kept.hints
        # Screened again: a tool held since (or approved) is offered as the review says now.
        self.lists["tools"] = self.screened(self.listed_tools)
        self._index_tools()
        self.known = True
        self.revision += 1

    def tool_annotations(self, name: object) -> Mapping[str, Any]:
        tool = self.tools.get(name) if isinstance(name, str) else None
        annotations = (tool or {}).get("annotations")
        return annotations if isinstance(annotations, dict) else {}
