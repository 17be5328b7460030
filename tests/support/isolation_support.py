"""What the isolation suites share: chatty.py's config and log, and a client that records.

``Seen`` is one SDK client's callbacks: it answers sampling with its own
name, lists its own roots, and records every request, log line and
notification that reached it. ``heard`` reads what chatty.py recorded of
what reached the server.
"""

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.types import (
    CallToolResult,
    CreateMessageResult,
    ListRootsResult,
    LoggingMessageNotificationParams,
    Root,
    TextContent,
)

from core.serving.service import TrayService
from tests.conftest import SERVERS, python_server, wait_ready, wait_until
from tests.support.gateway_support import Services

CHATTY = SERVERS / "chatty.py"
LEGACY = SERVERS / "legacy_2024.py"


def chatty(log: Path, **env: str) -> dict[str, Any]:
    # Pinned to the handshake era: its tools ask the client the old way (a
    # server->client request on the pipe), which the stateless era has no
    # room for; there, input requests are part of the call's own result.
    return python_server(CHATTY, CHATTY_LOG=str(log), **env) | {"protocol": "handshake"}


@dataclass
class Seen:
    """What one client session received from the server, in order."""

    name: str
    roots: list[str] = field(default_factory=list)
    roots_asked: int = 0
    sampled: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    notifications: list[tuple[str, Any]] = field(default_factory=list)

    async def sampling(self, context: Any, params: Any) -> CreateMessageResult:
        question = params.messages[0].content.text
        self.sampled.append(question)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=f"{self.name} answers {question}"),
            model="fake",
        )

    async def list_roots(self, context: Any) -> ListRootsResult:
        self.roots_asked += 1
        return ListRootsResult(roots=[Root(uri=uri) for uri in self.roots])  # type: ignore[arg-type]

    async def logging(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(str(params.data))

    async def messages(self, message: Any) -> None:
        if isinstance(message, Exception):
            return
        root = getattr(message, "root", message)
        params = getattr(root, "params", None)
        self.notifications.append((root.method, getattr(params, "uri", None)))

    def updated(self) -> list[str]:
        return [
            str(uri)
            for method, uri in self.notifications
            if method == "notifications/resources/updated"
        ]

    def kwargs(self, *, sampling: bool = True) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "list_roots_callback": self.list_roots,
            "logging_callback": self.logging,
            "message_handler": self.messages,
        }
        if sampling:
            kwargs["sampling_callback"] = self.sampling
        return kwargs


def heard(log: Path) -> list[dict[str, Any]]:
    """What chatty recorded: what reached the server, and the answers it got."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


async def start_chatty(
    services: Services, tmp_path: Path, **entry: str
) -> tuple[TrayService, Path]:
    """A tray whose one server is chatty.py (``entry`` adds keys: sharing...), once ready."""
    log = tmp_path / "chatty.jsonl"
    env = {k: v for k, v in entry.items() if k.startswith("CHATTY_")}
    keys = {k: v for k, v in entry.items() if not k.startswith("CHATTY_")}
    service = await services.start({"chatty": chatty(log, **env) | keys})
    await wait_ready(service.supervisor.server("chatty"))
    return service, log


async def slow_call_in_flight(
    service: TrayService, client: ClientSession
) -> "asyncio.Future[CallToolResult]":
    """chatty's ``slow`` tool (1 s), once the tray has it in flight."""
    task = asyncio.ensure_future(client.call_tool("slow", {"seconds": 1.0}))
    await wait_until(
        lambda: service.supervisor.server("chatty").routing.sessions_in_flight(),
        what="the slow call in flight",
    )
    return task
