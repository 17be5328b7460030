"""The aggregate's tools/list from its cache, and what discovery saves: ``@all`` vs its search twin.

A real tray service (in this process, on this loop, the "fail" keyring
backend so the user's keyring is never touched) runs SERVERS copies of
tests/servers/many_tools.py, TOOLS tools each (default 10 x 50 = 500: the
issue's "ten servers x fifty tools"), with one profile, ``lean``: every
server, ``"discovery": "search"``. Printed:

1. **tokens**: the profiles' estimates (bytes of the compact tools/list JSON
   / 4) for ``@all`` and ``@lean``, and the bytes of the tools/list each
   endpoint actually answers over HTTP;
2. **the answer from the cache**: ``Aggregate.handle`` of a handshake-era
   ``tools/list`` plus the response's encoding (``jsonrpc.dumps``), CALLS
   times, p50 and p90 — against what it cost before the cache: the list
   copied and encoded for every request, and the view built on core's loop
   by the first request after a change (now on a worker thread);
3. **over HTTP**: CALLS ``tools/list`` requests to ``/mcp`` in one open
   handshake-era session (httpx2, keep-alive), p50 and p90, beside CALLS
   pings in the same session (the round trip's floor on this machine). The
   client runs in the tray's own process and loop, so its own cost (reading
   the 240 KB answer) is in the figure: an upper bound of what a client in
   another process waits;
4. **a search**: ``search_tools`` answered by ``Aggregate.handle`` in the
   tray, and through ``@lean`` over HTTP, p50 and p90.

Reproduce: .venv/bin/python bench/list_cache.py [--servers 10 --tools 50 --calls 300]
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from a checkout: make `core` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

import httpx2

from bench.harness.records import Row, record
from core.base.states import ServerState
from core.protocol.jsonrpc import dumps
from core.serving.aggregate.aggregate_links import Parent
from core.serving.aggregate.profile_view import build_view
from core.serving.calls.request import Client, NoReply, Request
from core.serving.service import TrayService
from core.serving.sessions.sessions import ClientSession
from core.settings.config import load_config
from core.settings.paths import default_paths
from core.settings.profiles import EVERYTHING

ROOT = Path(__file__).resolve().parents[1]
MANY_TOOLS = ROOT / "tests" / "servers" / "many_tools.py"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def p(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ms(values: list[float]) -> str:
    return f"p50 {p(values, 0.5) * 1000:.3f} ms, p90 {p(values, 0.9) * 1000:.3f} ms"


async def ready(service: TrayService, names: list[str]) -> None:
    deadline = time.monotonic() + 120
    while not all(service.supervisor.server(n).state is ServerState.READY for n in names):
        if time.monotonic() > deadline:
            raise SystemExit("the servers were not ready within 120 s")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the views' rebuild after the last start


async def in_process(
    service: TrayService, calls: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """The handshake-era tools/list answer from the cache, and built the old way."""
    aggregate = service.gateway.aggregate
    session = ClientSession(id="bench", server="@all", kind="http", client_name="bench")
    client = Client(session, modern=False)
    parent = Parent(session, "all", modern=False, on_lists=lambda parent, kind: None)
    cached: list[float] = []
    encoded: list[float] = []
    built: list[float] = []
    searched: list[float] = []
    config = service.supervisor.config
    catalogs = {n: s.catalog for n, s in service.supervisor.servers.items()}
    view = build_view(EVERYTHING, config.servers, catalogs)
    for number in range(calls):
        request = Request(client, "tools/list", {}, NoReply(), None)
        began = time.perf_counter()
        result = await aggregate.handle(parent, request)
        dumps({"jsonrpc": "2.0", "id": number, "result": result})
        cached.append(time.perf_counter() - began)
        # Before: the view kept, its list copied and encoded for every request...
        began = time.perf_counter()
        dumps({"jsonrpc": "2.0", "id": number, "result": {"tools": list(view.tools)}})
        encoded.append(time.perf_counter() - began)
    lean = Parent(session, "lean", modern=False, on_lists=lambda parent, kind: None)
    for number in range(calls):
        arguments = {"query": f"records collection {number % 50}"}
        call = {"name": "search_tools", "arguments": arguments}
        began = time.perf_counter()
        await aggregate.handle(lean, Request(client, "tools/call", call, NoReply(), None))
        searched.append(time.perf_counter() - began)
    for _ in range(max(10, calls // 10)):
        # ...and built again on core's loop by the first request after a change.
        began = time.perf_counter()
        build_view(EVERYTHING, config.servers, catalogs)
        built.append(time.perf_counter() - began)
    return cached, encoded, built, searched


async def over_http(
    service: TrayService, calls: int
) -> tuple[list[float], dict[str, int], list[float], list[float]]:
    auth = {"authorization": f"Bearer {service.token}"}
    sizes: dict[str, int] = {}
    lists: list[float] = []
    searches: list[float] = []
    pings: list[float] = []
    async with httpx2.AsyncClient(timeout=60, headers={**HEADERS, **auth}) as http:
        for path in ("/mcp", "/mcp/@lean"):
            hello = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            }
            reply = await http.post(service.url + path, json=hello)
            session = {"mcp-session-id": reply.headers["mcp-session-id"]}
            await http.post(
                service.url + path,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=session,
            )
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            reply = await http.post(service.url + path, json=listing, headers=session)
            sizes[path] = len(json.dumps(reply.json()["result"], separators=(",", ":")).encode())
            for number in range(calls if path == "/mcp" else 0):
                ping = {"jsonrpc": "2.0", "id": 10_000 + number, "method": "ping"}
                began = time.perf_counter()
                reply = await http.post(service.url + path, json=ping, headers=session)
                pings.append(time.perf_counter() - began)
            for number in range(calls):
                if path == "/mcp":
                    began = time.perf_counter()
                    reply = await http.post(service.url + path, json=listing, headers=session)
                    lists.append(time.perf_counter() - began)
                else:
                    search = {
                        "jsonrpc": "2.0",
                        "id": number + 2,
                        "method": "tools/call",
                        "params": {
                            "name": "search_tools",
                            "arguments": {"query": f"records collection {number % 50}"},
                        },
                    }
                    began = time.perf_counter()
                    reply = await http.post(service.url + path, json=search, headers=session)
                    searches.append(time.perf_counter() - began)
                reply.raise_for_status()
    return lists, sizes, searches, pings


async def measure(home: Path, servers: int, tools: int, calls: int) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    entries = {
        f"s{n:02d}": {
            "command": sys.executable,
            "args": [str(MANY_TOOLS)],
            "env": {"MANY_TOOLS": str(tools)},
        }
        for n in range(servers)
    }
    document = {
        "mcpServers": entries,
        "profiles": {"lean": {"discovery": "search"}},
        "gateway": {"port": 0},
    }
    paths.config_file.write_text(json.dumps(document))
    service = TrayService(load_config(paths.config_file), paths)
    await service.start()
    try:
        await ready(service, list(entries))
        profiles = {profile.name: profile for profile in service.profiles()}
        every, lean = profiles["all"], profiles["lean"]
        cached, encoded, built, searched = await in_process(service, calls)
        lists, sizes, searches, pings = await over_http(service, calls)
        views = service.gateway.aggregate.views
    finally:
        await service.aclose()
    print(f"{servers} servers x {tools} tools = {every.tools} tools through /mcp")
    print(
        f"tokens (estimate, bytes/4): @all {every.tokens:,} ({every.tools_bytes:,} bytes); "
        f"@lean (its discovery twin) {lean.discovery_tokens:,}: "
        f"{every.tokens / lean.discovery_tokens:.0f}x fewer"
    )
    print(
        f"tools/list answered over HTTP: /mcp {sizes['/mcp']:,} bytes, "
        f"/mcp/@lean {sizes['/mcp/@lean']:,} bytes"
    )
    print(
        f"tools/list of {every.tools} tools, answer + encoding in the tray, from the cache: {ms(cached)}"
    )
    print(f"  before the cache: the list copied and encoded per request: {ms(encoded)}")
    print(f"  and the view built on core's loop after a change (now on a thread): {ms(built)}")
    print(f"a ping over HTTP in the same session (the round trip's floor here): {ms(pings)}")
    print(f"tools/list of {every.tools} tools over HTTP (client in the same process): {ms(lists)}")
    print(f"search_tools of {every.tools} tools in the tray (BM25, FTS5): {ms(searched)}")
    print(f"search_tools through /mcp/@lean over HTTP: {ms(searches)}")
    print(
        f"views built by a request (not off the call path): {views.built_on_call}; rebuilds: {views.rebuilds}"
    )
    command = (
        f".venv/bin/python bench/list_cache.py --servers {servers} --tools {tools} --calls {calls}"
    )
    print(f"reproduce: {command}")
    figures = {
        "tools": every.tools,
        "all_tokens": every.tokens,
        "discovery_tokens": lean.discovery_tokens,
        "cached_p50_ms": p(cached, 0.5) * 1000,
        "uncached_p50_ms": p(encoded, 0.5) * 1000,
        "http_list_p50_ms": p(lists, 0.5) * 1000,
        "http_ping_p50_ms": p(pings, 0.5) * 1000,
        "search_http_p50_ms": p(searches, 0.5) * 1000,
    }
    rows = [
        Row(
            f"tools/list of {every.tools} tools through /mcp, from the aggregate's cache",
            "<= 2 ms p50",
            "{http_list_p50_ms:.2f} ms p50 over HTTP (a ping: {http_ping_p50_ms:.2f} ms); "
            "{cached_p50_ms:.3f} ms in the tray vs {uncached_p50_ms:.2f} ms uncached",
        ),
        Row(
            "tokens of @all vs its discovery twin (search_tools, describe_tools, call_tool)",
            "fewer",
            "{all_tokens:,} vs {discovery_tokens:,}; a search over HTTP {search_http_p50_ms:.2f} ms p50",
        ),
    ]
    record("list_cache", command, figures, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        asyncio.run(measure(Path(tmp), args.servers, args.tools, args.calls))


if __name__ == "__main__":
    main()
