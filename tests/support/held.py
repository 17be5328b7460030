"""Waiting for a call held for the person's approval (docs/design.md §3.14), as the tests do."""

from typing import Any

from core.serving.service import TrayService
from tests.conftest import wait_until


async def held_calls(service: TrayService, count: int = 1) -> list[dict[str, Any]]:
    """What waits for the person once ``count`` calls are held, as ``mcp-tray approvals --json``
    shows it (held tools' changes included)."""
    await wait_until(lambda: len(service.approvals.pending) >= count, what=f"{count} held call(s)")
    return [item.to_json() for item in service.approvals.snapshots()]
