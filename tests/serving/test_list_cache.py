"""The aggregate's lists: built off the call path once per change, encoded once, and current.

Strategy: the views' cache is driven by hand over real catalogs (what it
reads of a server); the splice of a pre-encoded result into a response is checked
against the plain encoder byte for byte. The cache is shown on a real tray
in the test's loop with a real child (tests/servers/growing.py) that adds a
tool while it runs and says so with ``notifications/tools/list_changed``;
a real SDK client of ``/mcp`` (handshake era, its GET stream) and of a
discovery profile (2026-07-28) sees the notice and then the new list. The
aggregate's own counters say whether the view was rebuilt off the call path
(``rebuilds``) or by a request (``built_on_call``). Timings are in
bench/list_cache.py, never asserted here.
"""

import json
from pathlib import Path
from typing import Any, cast

from mcp.client.session import IncomingMessage

from core.protocol.jsonrpc import SLICE_CHARS, EncodedResult, dumps, encoded
from core.serving.aggregate.view_cache import Views
from core.settings.config import load_config
from core.supervision.catalog import Catalog
from core.supervision.server import ManagedServer
from tests.conftest import SERVERS, python_server, wait_ready, wait_until
from tests.support.gateway_support import Services, http_client, sdk_client

GROWING = SERVERS / "growing.py"
STARTING = 40.0


def plain(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_pre_encoded_result_is_spliced_into_exactly_the_bytes_the_encoder_would_make() -> None:
    for result in (
        {"tools": [{"name": "é", "description": 'naïve "quotes"\n'}]},
        {"tools": [{"name": "x" * 10, "description": "y" * (SLICE_CHARS + 5)}]},
        {},
    ):
        for request_id in (7, "abc", None):
            message = {"jsonrpc": "2.0", "id": request_id, "result": EncodedResult(result)}
            assert dumps(message) == plain({"jsonrpc": "2.0", "id": request_id, "result": result})
            length, pieces = encoded(message)
            body = b"".join(pieces)
            assert body == dumps(message) and length == len(body)


def test_a_message_with_more_than_a_result_is_encoded_as_usual() -> None:
    result = EncodedResult({"tools": []})
    message = {"jsonrpc": "2.0", "id": 1, "result": result, "extra": True}
    assert json.loads(dumps(message)) == {**message, "result": {"tools": []}}


async def test_a_members_list_changed_rebuilds_the_cache_off_the_call_path_and_the_new_list_is_served(
    services: Services,
) -> None:
    service = await services.start(
        # Pinned to the handshake era, where the child's list_changed sent from inside a
        # tool call reaches the tray (an SDK 2.3 child of 2026-07-28 sent none here).
        {"g": python_server(GROWING) | {"protocol": "handshake"}},
        profiles={"lean": {"discovery": "search"}},
    )
    await wait_ready(service.supervisor.server("g"), timeout=STARTING)
    views = service.gateway.aggregate.views
    seen: list[str] = []

    async def handler(message: IncomingMessage) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            seen.append(method)

    async with (
        http_client(service, "@all", message_handler=handler) as client,
        sdk_client(service, "@lean", "auto") as lean,
    ):
        before = [tool.name for tool in (await client.list_tools()).tools]
        assert [t.name for t in (await lean.list_tools()).tools] == [
            "search_tools",
            "describe_tools",
            "call_tool",
        ]
        parents = service.gateway.aggregate.parents
        await wait_until(
            lambda: all(p.http is None or p.http.streaming for p in parents.values()),
            what="the GET stream open",
        )
        cached = views.get("all").answer("tools", False)
        on_call, rebuilds = views.built_on_call, views.rebuilds
        await client.call_tool("g__grow", {"name": "fresh"})
        await wait_until(
            lambda: "notifications/tools/list_changed" in seen, what=f"list_changed (seen {seen})"
        )
        after = [tool.name for tool in (await client.list_tools()).tools]
        again = views.get("all").answer("tools", False)
        found = await lean.call_tool("search_tools", {"query": "grown fresh"})

    assert "g__fresh" not in before and "g__fresh" in after
    assert views.rebuilds > rebuilds  # the change was built on a worker thread...
    assert views.built_on_call == on_call  # ...so no request had to build it
    assert again is not cached and again.json != cached.json  # invalidated, encoded anew
    assert found.structured_content is not None
    assert found.structured_content["tools"][0]["name"] == "g__fresh"


class Member:
    """What the views read of a managed server: its catalog (a real one)."""

    def __init__(self, tools: list[str]) -> None:
        self.catalog = Catalog()
        self.catalog.known = True
        self.catalog.lists = {"tools": [{"name": name, "inputSchema": {}} for name in tools]}


async def test_a_view_whose_catalog_moved_is_never_served_stale_and_a_rebuild_lands_off_the_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}}}))
    config = load_config(path)
    member = Member(["one"])
    views = Views(lambda: config, lambda: cast(dict[str, ManagedServer], {"a": member}))

    assert [t["name"] for t in views.get("all").view.tools] == ["a__one"]
    member.catalog.lists = {"tools": [{"name": "two", "inputSchema": {}}]}
    member.catalog.revision += 1  # a listing, before any rebuild ran
    assert [t["name"] for t in views.get("all").view.tools] == ["a__two"]
    assert views.built_on_call == 2

    member.catalog.lists = {"tools": [{"name": "three", "inputSchema": {}}]}
    member.catalog.revision += 1
    views.changed()
    rebuilding = views.settled()
    assert rebuilding is not None
    await rebuilding
    listing = views.get("all")
    assert [t["name"] for t in listing.view.tools] == ["a__three"]
    assert (views.built_on_call, views.rebuilds) == (2, 1)
    assert json.loads(listing.answer("tools", True).json)["resultType"] == "complete"
