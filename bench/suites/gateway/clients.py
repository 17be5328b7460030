"""The clients the gateway bench times, one per row: SDK sessions of both eras,
raw clients, peers; their calls, warm-up and the tray's own call-path figures.
"""

import asyncio
import contextlib
import functools
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

import httpx2
import psutil
from mcp import Client as ModernClient
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from bench.harness.clients import ARGUMENTS, TOOL, RawHttpClient, RawLineClient
from bench.harness.errors import BenchError
from bench.harness.files import ECHO_SCRIPT, ROOT
from bench.harness.processes import close_writer, spawn_echo, stop_child
from bench.harness.tray import AGGREGATE_TOOL, SERVER, Tray
from bench.suites.gateway.constants import (
    AGGREGATE_PATHS,
    METRIC_RE,
    MODERN_MODE,
    MODERN_VERSION,
    RAW_AGGREGATE_CLIENTS,
    UPSTREAM_RE,
)
from bench.suites.gateway.peers import Peer, PeerSpec, PeerUnavailable
from bench.suites.gateway.relay import Relay


@dataclass
class Client:
    name: str
    #: One timed call; its result goes to ``check`` after the clock stops.
    call: Callable[[], Awaitable[Any]]
    check: Callable[[Any], None]
    #: The processes one call of this client runs through, by role.
    processes: dict[str, psutil.Process]
    #: Whether its calls go through the tray (its /metrics is read around each block).
    through_tray: bool = False
    #: Seconds per timed call.
    samples: list[float] = field(default_factory=list)
    #: Seconds spent inside the tray's call path during this client's timed blocks.
    tray_seconds: float = 0.0
    tray_calls: int = 0
    #: CPU seconds (user + system) per role during this client's timed blocks.
    cpu: dict[str, float] = field(default_factory=dict)


def cpu_seconds_of(processes: dict[str, psutil.Process]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for role, process in processes.items():
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            seconds[role] = times.user + times.system
    return seconds


def check_answer(result: object) -> None:
    if not isinstance(result, CallToolResult) or result.is_error:
        raise BenchError(f"echo call failed: {result!r}")
    content = result.content[0] if result.content else None
    if not isinstance(content, TextContent) or content.text != ARGUMENTS["text"]:
        raise BenchError(f"echo answered {result!r}")


def _check_raw(answer: Any) -> None:
    try:
        result = answer["result"]
        ok = not result.get("isError") and result["content"][0]["text"] == ARGUMENTS["text"]
    except (KeyError, IndexError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise BenchError(f"raw echo call answered {answer!r}")


def sdk_call(session: ClientSession, tool: str = TOOL) -> Callable[[], Awaitable[Any]]:
    return functools.partial(session.call_tool, tool, ARGUMENTS)


def _modern_call(client: ModernClient) -> Callable[[], Awaitable[Any]]:
    return functools.partial(client.call_tool, TOOL, ARGUMENTS)


async def timed_block(client: Client, calls: int) -> None:
    call, check, samples = client.call, client.check, client.samples
    try:
        for _ in range(calls):
            started = time.perf_counter()
            result = await call()
            samples.append(time.perf_counter() - started)
            check(result)
    except Exception as exc:
        # Named, so a failure says which client broke (the stack's task groups wrap it).
        raise BenchError(
            f"{client.name}: timed call {len(samples) + 1} failed: {one_line_error(exc)}"
        ) from exc


async def warm_up(client: Client, calls: int) -> None:
    try:
        for _ in range(calls):
            client.check(await client.call())
    except Exception as exc:
        raise BenchError(f"{client.name}: a warm-up call failed: {one_line_error(exc)}") from exc


async def tray_upstream(http: httpx2.AsyncClient, url: str) -> str | None:
    """The revision the tray speaks to its echo.py child, from its /metrics."""
    reply = await http.get(f"{url}/metrics")
    reply.raise_for_status()
    found = UPSTREAM_RE.search(reply.text)
    return found.group(1) if found else None


async def tray_call_path(http: httpx2.AsyncClient, url: str) -> tuple[float, int]:
    """(sum seconds, count) of the tray's tools/call histogram for the echo server."""
    reply = await http.get(f"{url}/metrics")
    reply.raise_for_status()
    found = {kind: float(value) for kind, value in METRIC_RE.findall(reply.text)}
    return found.get("sum", 0.0), int(found.get("count", 0.0))


async def open_session(
    stack: contextlib.AsyncExitStack,
    streams: contextlib.AbstractAsyncContextManager[tuple[Any, Any]],
) -> tuple[ClientSession, psutil.Process | None]:
    """An initialized session, and the child process its transport spawned (if any)."""
    before = {child.pid for child in psutil.Process().children()}
    read, write = await stack.enter_async_context(streams)
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    spawned = [child for child in psutil.Process().children() if child.pid not in before]
    return session, spawned[0] if len(spawned) == 1 else None


async def _modern_session(
    stack: contextlib.AsyncExitStack,
    transport: contextlib.AbstractAsyncContextManager[tuple[Any, Any]],
) -> tuple[ModernClient, psutil.Process | None]:
    """A connected 2026-07-28 ``mcp.Client`` (checked), and the child process its transport
    spawned (if any). No response cache: every call reaches the server."""
    before = {child.pid for child in psutil.Process().children()}
    client = await stack.enter_async_context(ModernClient(transport, mode=MODERN_MODE, cache=None))
    if client.protocol_version != MODERN_VERSION:
        raise BenchError(
            f"mcp.Client(mode={MODERN_MODE!r}) negotiated {client.protocol_version!r}, "
            f"not {MODERN_VERSION}"
        )
    spawned = [child for child in psutil.Process().children() if child.pid not in before]
    return client, spawned[0] if len(spawned) == 1 else None


def roles(processes: dict[str, psutil.Process | None]) -> dict[str, psutil.Process]:
    return {role: process for role, process in processes.items() if process is not None}


Call = Callable[[], Awaitable[Any]]


def era_clients(
    prefix: str,
    calls: tuple[Call, Call, Call],
    *,
    me: psutil.Process,
    direct_echo: psutil.Process | None,
    tray: psutil.Process,
    tray_echo: psutil.Process | None,
    bridge: psutil.Process | None,
) -> dict[str, Client]:
    """One client era's three rows: direct, through the gateway, through the bridge,
    each with the processes one of its calls runs through ("client" is this process)."""
    direct, gateway, through_bridge = calls
    return {
        f"{prefix}direct": Client(
            f"{prefix}direct", direct, check_answer, roles({"client": me, "echo.py": direct_echo})
        ),
        f"{prefix}gateway": Client(
            f"{prefix}gateway",
            gateway,
            check_answer,
            roles({"client": me, "tray": tray, "echo.py": tray_echo}),
            through_tray=True,
        ),
        f"{prefix}bridge": Client(
            f"{prefix}bridge",
            through_bridge,
            check_answer,
            roles({"client": me, "bridge": bridge, "tray": tray, "echo.py": tray_echo}),
            through_tray=True,
        ),
    }


async def modern_clients(
    stack: contextlib.AsyncExitStack,
    tray: Tray,
    errlog: TextIO,
    bridge_env: dict[str, str],
    me: psutil.Process,
    tray_process: psutil.Process,
    tray_echo: psutil.Process | None,
) -> dict[str, Client]:
    """modern-direct, modern-gateway and modern-bridge: the same three paths as direct,
    gateway and bridge, with ``mcp.Client`` in the 2026-07-28 era; every process they
    start is stopped when ``stack`` closes."""
    direct, direct_echo = await _modern_session(
        stack,
        stdio_client(
            StdioServerParameters(command=sys.executable, args=[str(ECHO_SCRIPT)]),
            errlog=errlog,
        ),
    )
    # Its own connection pool: no keep-alive connection shared with the handshake-era row.
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tray.token}"},
            timeout=httpx2.Timeout(30, read=60),
        )
    )
    gateway, _ = await _modern_session(
        stack, streamable_http_client(f"{tray.url}/mcp/{SERVER}", http_client=http)
    )
    # A client session of its own: a second bridge of the bridge row's client session
    # would claim its worker row, and the bridge row's bridge, fenced, would exit.
    modern_env = {**bridge_env, "MCP_TRAY_CLIENT_SESSION": f"bench-modern-{os.getpid()}"}
    bridge, bridge_process = await _modern_session(
        stack,
        stdio_client(
            StdioServerParameters(
                command=sys.executable,
                args=["-m", "core.cli.main", "connect", SERVER],
                env=modern_env,
                cwd=ROOT,
            ),
            errlog=errlog,
        ),
    )
    return era_clients(
        "modern-",
        (_modern_call(direct), _modern_call(gateway), _modern_call(bridge)),
        me=me,
        direct_echo=direct_echo,
        tray=tray_process,
        tray_echo=tray_echo,
        bridge=bridge_process,
    )


async def floor_clients(
    stack: contextlib.AsyncExitStack,
    tray: Tray,
    errlog: IO[str],
    me: psutil.Process,
    tray_process: psutil.Process,
    tray_echo: psutil.Process | None,
) -> dict[str, Client]:
    """raw-direct, raw-hop and raw-gateway, initialized; every process they start is
    stopped when ``stack`` closes."""
    echo = await spawn_echo(errlog)
    stack.push_async_callback(stop_child, echo)
    assert echo.stdin is not None and echo.stdout is not None
    raw_direct = RawLineClient(echo.stdout, echo.stdin)
    await raw_direct.initialize()

    relay = Relay(tray.home, errlog)
    stack.callback(relay.stop)
    relay.start()
    assert relay.process is not None
    port = await relay.wait_port()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # Closed before the relay is stopped (the stack unwinds last in, first out).
    stack.push_async_callback(close_writer, writer)
    raw_hop = RawLineClient(reader, writer)
    await raw_hop.initialize()
    relay_process = psutil.Process(relay.process.pid)
    relay_children = relay_process.children()
    hop_echo = relay_children[0] if len(relay_children) == 1 else None

    raw_gateway = RawHttpClient(f"{tray.url}/mcp/{SERVER}", tray.token)
    stack.push_async_callback(raw_gateway.aclose)
    await raw_gateway.connect()
    await raw_gateway.initialize()
    aggregated = {}
    for name, path in zip(RAW_AGGREGATE_CLIENTS, AGGREGATE_PATHS.values(), strict=True):
        raw = RawHttpClient(f"{tray.url}{path}", tray.token, AGGREGATE_TOOL)
        stack.push_async_callback(raw.aclose)
        await raw.connect()
        await raw.initialize()
        aggregated[name] = Client(
            name,
            raw.call,
            _check_raw,
            roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
            through_tray=True,
        )

    return aggregated | {
        "raw-direct": Client(
            "raw-direct",
            raw_direct.call,
            _check_raw,
            roles({"client": me, "echo.py": psutil.Process(echo.pid)}),
        ),
        "raw-hop": Client(
            "raw-hop",
            raw_hop.call,
            _check_raw,
            roles({"client": me, "relay": relay_process, "echo.py": hop_echo}),
        ),
        "raw-gateway": Client(
            "raw-gateway",
            raw_gateway.call,
            _check_raw,
            roles({"client": me, "tray": tray_process, "echo.py": tray_echo}),
            through_tray=True,
        ),
    }


def innermost_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups nest them), or the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def one_line_error(exc: BaseException) -> str:
    """The innermost error of an exception (group), on one line."""
    exc = innermost_error(exc)
    text = " ".join(str(exc).split())
    if isinstance(exc, PeerUnavailable | BenchError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _peer_client(
    stack: contextlib.AsyncExitStack,
    spec: PeerSpec,
    http: httpx2.AsyncClient,
    me: psutil.Process,
) -> Client:
    """A started peer and an initialized SDK streamable-HTTP session to it; the peer is
    stopped when ``stack`` closes (after the session)."""
    peer = Peer(spec)
    stack.callback(peer.stop)
    peer.start()
    url = await peer.wait_url()
    session, _ = await open_session(stack, streamable_http_client(url, http_client=http))
    assert peer.process is not None
    return Client(
        spec.name,
        sdk_call(session),
        check_answer,
        roles(
            {
                "client": me,
                spec.name: psutil.Process(peer.process.pid),
                "echo.py": peer.echo_process(),
            }
        ),
    )


async def peer_clients(
    stack: contextlib.AsyncExitStack,
    peers: list[PeerSpec],
    me: psutil.Process,
    notes: list[str],
) -> dict[str, Client]:
    """One client per peer that starts; a peer that does not start is stopped at once and
    gets a one-line note instead of a row."""
    if not peers:
        return {}
    # No Authorization header: the tray's token never goes to a peer.
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)))
    clients: dict[str, Client] = {}
    for spec in peers:
        # Its own stack: a peer that fails is unwound now, before anything else is entered.
        peer_stack = contextlib.AsyncExitStack()
        try:
            clients[spec.name] = await _peer_client(peer_stack, spec, http, me)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await peer_stack.aclose()
            notes.append(f"{spec.name} skipped: it did not start: {one_line_error(exc)}")
            continue
        except BaseException:
            await peer_stack.aclose()
            raise
        stack.push_async_callback(peer_stack.aclose)
    return clients
