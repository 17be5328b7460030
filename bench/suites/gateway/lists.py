"""tools/list through ``/mcp``: many servers of many tools each, and the profile
view's rebuild measured in process.
"""

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.harness.clients import ARGUMENTS, RawHttpClient
from bench.harness.stats import Stats
from bench.harness.tray import PROFILE, Tray
from bench.suites.gateway.constants import (
    DEFAULT_WARMUP,
    LIST_SERVERS,
    LIST_TOOLS,
    MANY_TOOLS_SCRIPT,
)


@dataclass(frozen=True)
class ListFigures:
    """tools/list of LIST_SERVERS servers of LIST_TOOLS tools each, through ``/mcp``."""

    calls: int
    tools: int
    aggregate: Stats
    aggregate_bytes: int
    one_server: Stats
    one_server_bytes: int
    #: Building the aggregate's view again (after a member's list changed), in-process.
    rebuild: Stats
    #: The aggregate's own work per call, in-process, by profile (routing_in_process).
    routing: dict[str, Stats]


LIST_NAMES: Final = tuple(f"tools-{n:02d}" for n in range(1, LIST_SERVERS + 1))


def _list_tray_document(enabled: int) -> dict[str, Any]:
    """The many-tools servers, the first ``enabled`` of them enabled."""
    return {
        "mcpServers": {
            name: {
                "command": sys.executable,
                "args": [str(MANY_TOOLS_SCRIPT)],
                "env": {"MANY_TOOLS": str(LIST_TOOLS)},
                "disabled": index >= enabled,
            }
            for index, name in enumerate(LIST_NAMES)
        }
    }


async def _timed_lists(raw: RawHttpClient, calls: int) -> tuple[Stats, bytes]:
    body = b""
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        body = await raw.request("tools/list")
        samples.append(time.perf_counter() - started)
    return Stats.of(samples), body


async def _measure_lists(tray: Tray, calls: int) -> ListFigures:
    from core.serving.aggregate.profile_view import build_view
    from core.settings.config import load_config
    from core.settings.profiles import EVERYTHING
    from core.supervision.catalog import Catalog

    clients = []
    for path in ("/mcp", "/mcp/tools-01"):
        raw = RawHttpClient(f"{tray.url}{path}", tray.token)
        await raw.connect()
        await raw.initialize()
        clients.append(raw)
    try:
        for raw in clients:
            await _timed_lists(raw, DEFAULT_WARMUP)
        aggregate, listed = await _timed_lists(clients[0], calls)
        one, single = await _timed_lists(clients[1], calls)
    finally:
        for raw in clients:
            await raw.aclose()
    tools = json.loads(listed)["result"]["tools"]
    # The same listings in-process: what building the view again costs the tray.
    config = load_config(tray.config)
    catalogs = {}
    for name in config.servers:
        catalog = catalogs[name] = Catalog()
        catalog.known = True
        catalog.lists = {"tools": json.loads(single)["result"]["tools"]}
    rebuilds = []
    for _ in range(max(10, calls // 10)):
        started = time.perf_counter()
        build_view(EVERYTHING, config.servers, catalogs)
        rebuilds.append(time.perf_counter() - started)
    in_process = tray.home / "in-process"
    in_process.mkdir()
    routing = routing_in_process(in_process)
    return ListFigures(
        calls, len(tools), aggregate, len(listed), one, len(single), Stats.of(rebuilds), routing
    )


def routing_in_process(home: Path, calls: int = 20000) -> dict[str, Stats]:
    """The aggregate's own work per tools/call, in-process and without the call itself:
    the profile's view (cached), the name's route, the link's client, the routed request.
    LIST_SERVERS x LIST_TOOLS tools known; ``all`` and a one-tool profile."""
    from core.serving.aggregate.aggregate import Aggregate
    from core.serving.aggregate.aggregate_links import Link, Parent
    from core.serving.calls.pipeline import Pipeline
    from core.serving.calls.request import Client as SessionClient
    from core.serving.calls.request import NoReply, Request
    from core.serving.sessions.sessions import ClientSession, SessionTable
    from core.settings.config import DEFAULT_MAX_BODY_BYTES, load_config
    from core.settings.paths import Paths
    from core.supervision.supervisor import Supervisor

    class Hooks:
        def session_opened(self, session: ClientSession) -> None:
            pass

        def session_closed(self, session: ClientSession) -> None:
            pass

    document = _list_tray_document(LIST_SERVERS)
    member = LIST_NAMES[2]
    tool = "search_records_07"
    document["profiles"] = {PROFILE: {"servers": [member], "tools": [f"{member}__{tool}"]}}
    (home / "config.json").write_text(json.dumps(document))
    paths = Paths(home / "config", home / "state", home / "logs", home / "run")
    supervisor = Supervisor(load_config(home / "config.json"), paths)
    names = [f"search_records_{n:02d}" for n in range(LIST_TOOLS)]
    for child in supervisor.servers.values():  # as if each had listed (never started)
        child.catalog.known = True
        child.catalog.lists = {"tools": [{"name": n, "inputSchema": {}} for n in names]}
    pipeline = Pipeline(supervisor, SessionTable(lambda event: None), Hooks(), lambda job: None)
    aggregate = Aggregate(pipeline, lambda worker: None, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    params = {"name": f"{member}__{tool}", "arguments": ARGUMENTS}
    figures = {}
    for profile in ("all", PROFILE):
        session = ClientSession(id=profile, server=f"@{profile}", kind="http")
        parent = Parent(session, profile, modern=False, on_lists=lambda parent, kind: None)
        client = SessionClient(session, modern=False)
        link_session = ClientSession(id=f"{profile}.{member}", server=member, kind="http")
        parent.links[member] = Link(parent, member, link_session, pipeline.seats.seat)
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            view = aggregate.view(profile)
            owner, routed = aggregate._route(view, "tools/call", params)
            link = parent.links[owner]
            request = Request(link.client(client), "tools/call", routed, NoReply(), None)
            parent.called(parent.calling(owner, request.reply))
            samples.append(time.perf_counter() - started)
        figures[profile] = Stats.of(samples)
    return figures


def list_bench(home: Path, calls: int) -> ListFigures:
    """A tray of its own with LIST_SERVERS many-tools servers; always stopped."""
    tray = Tray(home, None, document=_list_tray_document(1))
    try:
        tray.start()
        tray.wait_ready(names=LIST_NAMES[:1])
        # Enabled one at a time (a hot reload each): ten SDK servers starting at once on
        # a small busy machine can miss their handshake deadline and be parked.
        for count in range(2, LIST_SERVERS + 1):
            tray.config.write_text(json.dumps(_list_tray_document(count)))
            tray.wait_ready(names=LIST_NAMES[:count])
        return asyncio.run(_measure_lists(tray, calls))
    finally:
        tray.stop()


def list_report(figures: ListFigures) -> None:
    print(
        f"  tools/list through /mcp: {LIST_SERVERS} servers x {LIST_TOOLS} tools "
        f"(tests/servers/many_tools.py), raw HTTP/1.1 client, handshake era, "
        f"{figures.calls} timed calls after {DEFAULT_WARMUP} warm-up calls:"
    )
    tokens = -(-figures.aggregate_bytes // 4)
    for name, stats, size, note in (
        ("/mcp", figures.aggregate, figures.aggregate_bytes, f"{figures.tools} tools"),
        ("/mcp/tools-01", figures.one_server, figures.one_server_bytes, "one server's"),
    ):
        print(
            f"    {name:<14} p50 {stats.p50:.3f} ms  p95 {stats.p95:.3f} ms  "
            f"{size:,} bytes ({note})"
        )
    for profile, stats in figures.routing.items():
        print(
            f"    routing in-process (@{profile}: view, route, link, request; the call itself "
            f"not included): p50 {stats.p50 * 1000:.1f} us  p95 {stats.p95 * 1000:.1f} us"
        )
    print(
        f"    the /mcp answer is about {tokens:,} tokens in a model's context (bytes / 4); "
        f"building the view again after a member's list changed (in-process, "
        f"core.serving.aggregate.profile_view.build_view): p50 {figures.rebuild.p50:.3f} ms"
    )
