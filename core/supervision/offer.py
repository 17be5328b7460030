"""What a server offers, as rows a person reads: its tools, and how many resources and prompts.

One function for every surface (the window's details pane, the control
API's ``GET /api/v1/servers/{name}/tools``, ``mcp-tray tools NAME``), from
the server's ``Catalog`` (its last listings, kept across respawns).

Each tool says whether mcp-tray retries a call to it that a crash cut
(docs/design.md §3.3): the one replay rule (core.protocol.replay) that the call path
and the bridge apply too — the server's ``retry`` config ``"always"`` or
``"never"`` decides outright; otherwise the tool's ``readOnlyHint`` or
``idempotentHint`` makes it safe.
"""

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from core.protocol.replay import replay_verdict
from core.supervision.catalog import Catalog
from core.supervision.server import ManagedServer


@dataclass(frozen=True)
class ToolRow:
    name: str
    #: The tool's ``title`` (or its annotations' title); "" when it has none.
    title: str
    description: str
    read_only: bool
    idempotent: bool
    #: Whether a call cut by a crash is sent once more on the fresh child.
    retried_after_crash: bool
    #: Why (or why not), in words.
    retry_reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ServerOffer:
    server: str
    #: The server's ``retry`` config: ``safe``, ``always`` or ``never``.
    retry: str
    #: False until a handshake listed the server's offer at least once.
    known: bool
    tools: tuple[ToolRow, ...]
    resources: int
    resource_templates: int
    prompts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "retry": self.retry,
            "known": self.known,
            "tools": [tool.to_json() for tool in self.tools],
            "resources": self.resources,
            "resource_templates": self.resource_templates,
            "prompts": self.prompts,
        }


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def offer(name: str, catalog: Catalog, retry: str) -> ServerOffer:
    """The rows for ``name``'s catalog, tools in the order the server listed them."""
    rows = []
    for tool in catalog.lists.get("tools", []):
        tool_name = tool.get("name")
        if not isinstance(tool_name, str):
            continue
        annotations = tool.get("annotations")
        hints: Mapping[str, Any] = annotations if isinstance(annotations, dict) else {}
        retried, reason = replay_verdict("tools/call", None, hints, retry)
        rows.append(
            ToolRow(
                name=tool_name,
                title=_text(tool.get("title")) or _text(hints.get("title")),
                description=_text(tool.get("description")),
                read_only=bool(hints.get("readOnlyHint")),
                idempotent=bool(hints.get("idempotentHint")),
                retried_after_crash=retried,
                retry_reason=reason,
            )
        )
    return ServerOffer(
        server=name,
        retry=retry,
        known=catalog.known,
        tools=tuple(rows),
        resources=len(catalog.lists.get("resources", [])),
        resource_templates=len(catalog.lists.get("resourceTemplates", [])),
        prompts=len(catalog.lists.get("prompts", [])),
    )


def offer_of(server: ManagedServer) -> ServerOffer:
    return offer(server.name, server.catalog, server.config.retry)
