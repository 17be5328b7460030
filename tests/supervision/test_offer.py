"""A server's offer as rows: tools with the "retried after a crash" mark, and the counts.

Strategy: the call path (``CallPath.replay_safe``), the window's rows
(``offer``) and the bridge (``Relay``, which never sees the ``retry``
config) all apply the one replay rule of core.protocol.replay: checked for
every combination of hints and ``retry`` config (so the window and the CLI
can never promise a retry the call path would not make), and the rows are
read from a real supervisor's catalog of tests/servers/echo.py.
"""

import json
from types import SimpleNamespace
from typing import Any

import pytest

from core.bridge.relay import Relay
from core.protocol.replay import replay_verdict
from core.supervision.calls import CallPath
from core.supervision.catalog import Catalog
from core.supervision.offer import offer, offer_of
from tests.conftest import ECHO, ReadyFactory, python_server

HINTS: list[dict[str, Any]] = [
    {},
    {"readOnlyHint": True},
    {"idempotentHint": True},
    {"readOnlyHint": False, "idempotentHint": False},
    {"destructiveHint": True},
    {"readOnlyHint": True, "idempotentHint": True},
]


def catalog_with(tools: list[dict[str, Any]], **lists: list[dict[str, Any]]) -> Catalog:
    catalog = Catalog()
    catalog.lists = {"tools": tools, **lists}
    catalog.tools = {t["name"]: t for t in tools if isinstance(t.get("name"), str)}
    catalog.known = True
    return catalog


@pytest.mark.parametrize("retry", ["safe", "always", "never"])
@pytest.mark.parametrize("hints", HINTS)
def test_the_replay_mark_follows_the_call_paths_own_rule(retry: str, hints: dict[str, Any]) -> None:
    catalog = catalog_with([{"name": "t", "annotations": hints}])
    server = SimpleNamespace(name="s", config=SimpleNamespace(retry=retry), catalog=catalog)
    call_path_says, _ = CallPath(server).replay_safe("tools/call", {"name": "t"})

    retried, reason = replay_verdict("tools/call", {"name": "t"}, hints, retry)

    assert retried is call_path_says
    assert offer("s", catalog, retry).tools[0].retried_after_crash is call_path_says
    assert reason


@pytest.mark.parametrize("hints", HINTS)
async def test_the_bridge_resends_a_cut_call_by_the_same_rule(hints: dict[str, Any]) -> None:
    relay = Relay("http://127.0.0.1:9/mcp/s", {}, None)
    listing = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"tools": [{"name": "t", "annotations": hints}]},
    }
    relay._listings.add("1")  # as submit() notes a tools/list request it relays
    relay._learn(1, json.dumps(listing).encode())
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}

    assert relay._repeatable(call) is replay_verdict("tools/call", {"name": "t"}, hints).again
    for method in ("tools/list", "resources/read", "server/discover"):
        assert relay._repeatable({"jsonrpc": "2.0", "id": 3, "method": method})


def test_rows_carry_title_description_hints_and_the_counts() -> None:
    catalog = catalog_with(
        [
            {"name": "a", "title": "Alpha", "description": "  does a  ", "annotations": {}},
            {"name": "b", "annotations": {"title": "Beta", "idempotentHint": True}},
            {"title": "no name: skipped"},
        ],
        resources=[{"uri": "x://1"}, {"uri": "x://2"}],
        resourceTemplates=[{"uriTemplate": "x://{id}"}],
        prompts=[{"name": "p"}],
    )

    rows = offer("s", catalog, "safe")

    assert [(t.name, t.title, t.description) for t in rows.tools] == [
        ("a", "Alpha", "does a"),
        ("b", "Beta", ""),
    ]
    assert [t.retried_after_crash for t in rows.tools] == [False, True]
    assert (rows.resources, rows.resource_templates, rows.prompts) == (2, 1, 1)
    body = rows.to_json()
    assert body["tools"][1]["idempotent"] is True and body["retry"] == "safe"


def test_a_server_never_listed_offers_nothing_and_says_so() -> None:
    rows = offer("s", Catalog(), "safe")
    assert rows.tools == () and not rows.known


async def test_a_real_echo_server_marks_its_read_only_tools_and_not_its_writes(
    start_ready: ReadyFactory,
) -> None:
    _, echo = await start_ready("echo", python_server(ECHO))

    rows = offer_of(echo)

    marks = {tool.name: tool.retried_after_crash for tool in rows.tools}
    assert marks["echo"] and marks["whoami"] and marks["slow_read"]
    assert not marks["slow_write"] and not marks["write_note"] and not marks["crash"]
    echo_tool = next(t for t in rows.tools if t.name == "echo")
    assert echo_tool.description == "Return the text." and echo_tool.read_only
    assert rows.known and rows.resources == 1 and rows.prompts == 1
