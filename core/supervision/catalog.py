"""What a server offers, as its last handshake and listings said.

Kept across respawns: the gateway answers ``initialize`` and the list
methods from here while a child restarts, and the call path reads tool
annotations here to decide whether a cut call may be replayed.
"""

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from core.base.errors import RpcError
from core.supervision.upstream import Upstream

#: Listable kinds, the capability that announces each, and its list method.
LIST_KINDS: Final = {
    "tools": "tools/list",
    "resources": "resources/list",
    "prompts": "prompts/list",
}


class Catalog:
    """Capabilities, server info, instructions and the tool/resource/prompt lists."""

    def __init__(self) -> None:
        #: The protocol revision the child agreed to (None until a handshake).
        self.version: str | None = None
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.instructions: str | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.lists: dict[str, list[dict[str, Any]]] = {}
        #: True once a handshake listed tools/resources/prompts at least once.
        self.known = False

    def adopt_handshake(self, result: Mapping[str, Any]) -> None:
        """Take what an ``initialize`` result says about the server."""
        version = result.get("protocolVersion")
        self.version = version if isinstance(version, str) else None
        capabilities = result.get("capabilities")
        self.capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        info = result.get("serverInfo")
        self.server_info = dict(info) if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None

    async def refresh(self, upstream: Upstream, only: str | None = None) -> list[str]:
        """Re-list every kind (or ``only`` one); returns the kinds whose list changed."""
        changed = []
        for kind, method in LIST_KINDS.items():
            if only is not None and kind != only:
                continue
            before = self.lists.get(kind, [])
            if kind not in self.capabilities:
                self.lists[kind] = []
            else:
                self.lists[kind] = await upstream.list_all(method, kind)
            if kind == "resources" and self.capabilities.get("resources"):
                with contextlib.suppress(RpcError):
                    self.lists["resourceTemplates"] = await upstream.list_all(
                        "resources/templates/list", "resourceTemplates"
                    )
            if self.lists[kind] != before:
                changed.append(kind)
        self.tools = {
            t["name"]: t for t in self.lists.get("tools", []) if isinstance(t.get("name"), str)
        }
        return changed

    def tool_annotations(self, name: object) -> Mapping[str, Any]:
        tool = self.tools.get(name) if isinstance(name, str) else None
        annotations = (tool or {}).get("annotations")
        return annotations if isinstance(annotations, dict) else {}
