"""``mcp-tray connect NAME``: the bridge process, a stdio MCP server that AI clients launch.

The client speaks newline-delimited JSON-RPC on our stdin/stdout; each
message is POSTed as is to ``/mcp/NAME`` on the running tray, and whatever
comes back (a JSON body, or SSE events: progress, a sampling request, then
the answer) is written back line by line. The standalone GET stream carries
notifications not tied to a request. Messages are relayed as bytes, never
re-modelled, so nothing the client or server says is lost in translation.

The bridge registers itself as a worker (client identity from
``MCP_TRAY_CLIENT``/``_INSTANCE``/``_SESSION``, else its parent process) and
heartbeats from a daemon thread. A second bridge for the same client session
claims the row: this one is fenced, says so on stderr, and exits. On stdin
EOF it deregisters and exits 0. When the tray is not running it says so in
one line and exits 3 (it does not start a tray of its own: a tray started
inside a client's process tree would die with the client).
"""

import asyncio
import os
import sys
from typing import Final

from core.base.errors import NotRunning, RegistryFileError
from core.bridge.attachment import Attachment, bridge_identity
from core.bridge.relay import Relay
from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.registry.identity import normalize_client_name
from core.registry.records import HeartbeatOutcome
from core.settings.paths import Paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_NOT_RUNNING: Final = 3


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout.buffer
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(name: str, paths: Paths) -> int:
    try:
        info = running_instance(paths)
    except NotRunning:
        print(
            f"mcp-tray: not running, so {name!r} is unavailable. Start it (mcp-tray, or mcp-tray run --headless), "
            "then restart this client's MCP server.",
            file=sys.stderr,
        )
        return EXIT_NOT_RUNNING
    token = await asyncio.to_thread(read_token, paths.token_file)
    if token is None:
        print(
            f"mcp-tray: no API token found (keyring or {paths.token_file}); restart mcp-tray",
            file=sys.stderr,
        )
        return EXIT_NOT_RUNNING
    who = bridge_identity(os.environ, os.getppid())
    fenced = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_fenced(outcome: HeartbeatOutcome) -> None:
        print(
            f"mcp-tray connect {name}: {outcome}; a newer bridge took over this session, exiting",
            file=sys.stderr,
        )
        loop.call_soon_threadsafe(fenced.set)

    try:
        attachment = await asyncio.to_thread(Attachment.attach, paths, name, who, on_fenced)
    except RegistryFileError as exc:
        print(f"mcp-tray connect {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    headers = {
        "authorization": f"Bearer {token}",
        CLIENT_HEADER: normalize_client_name(who.client),
        WORKER_HEADER: attachment.identity,
    }
    reader, writer = await _stdio()
    relay = Relay(f"{info.url}/mcp/{name}", headers, writer)
    try:
        stdin_done = asyncio.ensure_future(_pump_stdin(reader, relay))
        fenced_wait = asyncio.ensure_future(fenced.wait())
        await asyncio.wait([stdin_done, fenced_wait], return_when=asyncio.FIRST_COMPLETED)
        stdin_done.cancel()
        fenced_wait.cancel()
    finally:
        await relay.aclose()
        await asyncio.to_thread(attachment.detach)
    return EXIT_FAILED if fenced.is_set() else EXIT_OK


async def _pump_stdin(reader: asyncio.StreamReader, relay: Relay) -> None:
    while True:
        line = await reader.readline()
        if not line:
            return
        if line.strip():
            relay.submit(line)


def run(name: str, paths: Paths) -> int:
    return asyncio.run(serve(name, paths))
