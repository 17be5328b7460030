"""The gateway bench's run: every client connected at once, then timed in
interleaved blocks so that the machine's drift falls on all rows alike.
"""

import contextlib
import sys

import httpx2
import psutil
from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.harness.files import ECHO_SCRIPT, ROOT
from bench.harness.tray import AGGREGATE_TOOL, SERVER, Tray
from bench.suites.gateway.clients import (
    Client,
    check_answer,
    cpu_seconds_of,
    era_clients,
    floor_clients,
    modern_clients,
    open_session,
    peer_clients,
    roles,
    sdk_call,
    timed_block,
    tray_call_path,
    tray_upstream,
    warm_up,
)
from bench.suites.gateway.constants import AGGREGATE_PATHS
from bench.suites.gateway.peers import PeerSpec


async def measure(
    tray: Tray,
    calls: int,
    warmup: int,
    block: int,
    floor: bool,
    modern: bool,
    peers: list[PeerSpec],
    notes: list[str],
) -> dict[str, Client]:
    logs = tray.home / "client-stderr.log"
    async with contextlib.AsyncExitStack() as stack:
        errlog = stack.enter_context(logs.open("w"))
        headers = {"Authorization": f"Bearer {tray.token}"}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60))
        )
        # A separate connection for /metrics, so scrapes never share the gateway's.
        scrape = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30))
        )
        direct, direct_echo = await open_session(
            stack,
            stdio_client(
                StdioServerParameters(command=sys.executable, args=[str(ECHO_SCRIPT)]),
                errlog=errlog,
            ),
        )
        gateway, _ = await open_session(
            stack, streamable_http_client(f"{tray.url}/mcp/{SERVER}", http_client=http)
        )
        bridge_env = {**tray.env, "MCP_TRAY_CLIENT": "bench"}
        bridge, bridge_process = await open_session(
            stack,
            stdio_client(
                StdioServerParameters(
                    command=sys.executable,
                    args=["-m", "core.cli.main", "connect", SERVER],
                    env=bridge_env,
                    cwd=ROOT,
                ),
                errlog=errlog,
            ),
        )
        me = psutil.Process()
        assert tray.process is not None
        tray_process = psutil.Process(tray.process.pid)
        tray_echo = psutil.Process(tray.server_pid) if tray.server_pid else None
        # The processes one call runs through; "client" is this bench process (the SDK client).
        clients = era_clients(
            "",
            (sdk_call(direct), sdk_call(gateway), sdk_call(bridge)),
            me=me,
            direct_echo=direct_echo,
            tray=tray_process,
            tray_echo=tray_echo,
            bridge=bridge_process,
        )
        for name, path in AGGREGATE_PATHS.items():
            session, _ = await open_session(
                stack, streamable_http_client(f"{tray.url}{path}", http_client=http)
            )
            clients[name] = Client(
                name,
                sdk_call(session, AGGREGATE_TOOL),
                check_answer,
                roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
                through_tray=True,
            )
        if modern:
            clients.update(
                await modern_clients(stack, tray, errlog, bridge_env, me, tray_process, tray_echo)
            )
        # The peers after mcp-tray's sessions, each in front of its own echo.py.
        clients.update(await peer_clients(stack, peers, me, notes))
        if floor:
            # After the SDK sessions: open_session tells its spawned child by the bench's children.
            clients.update(await floor_clients(stack, tray, errlog, me, tray_process, tray_echo))
        for client in clients.values():
            await warm_up(client, warmup)
        await tray_call_path(scrape, tray.url)
        tray.server_protocol = await tray_upstream(scrape, tray.url)

        order = list(clients.values())
        done = 0
        round_no = 0
        while done < calls:
            size = min(block, calls - done)
            shift = round_no % len(order)
            for client in order[shift:] + order[:shift]:
                through_tray = client.through_tray
                if through_tray:
                    before = await tray_call_path(scrape, tray.url)
                cpu_before = cpu_seconds_of(client.processes)
                await timed_block(client, size)
                cpu_after = cpu_seconds_of(client.processes)
                for role, seconds in cpu_after.items():
                    if role in cpu_before:
                        client.cpu[role] = client.cpu.get(role, 0.0) + seconds - cpu_before[role]
                if through_tray:
                    after = await tray_call_path(scrape, tray.url)
                    client.tray_seconds += after[0] - before[0]
                    client.tray_calls += after[1] - before[1]
            done += size
            round_no += 1
        return clients
