"""``mcp-tray connect NAME``: the bridge process, a stdio MCP server that AI clients launch.

The client speaks newline-delimited JSON-RPC on our stdin/stdout; each
message is POSTed as is to ``/mcp/NAME`` on the running tray (``/mcp`` for
``@all``, ``/mcp/@NAME`` for a profile), and whatever
comes back (a JSON body, or SSE events: progress, a sampling request, then
the answer) is written back line by line. The standalone GET stream carries
notifications not tied to a request. Messages are relayed as bytes, never
re-modelled, so nothing the client or server says is lost in translation.

The bridge registers itself as a worker (client identity from
``MCP_TRAY_CLIENT``/``_INSTANCE``/``_SESSION``, else its parent process) and
heartbeats from a daemon thread. Each bridge is a client session of its
own: only a bridge that replaces a dead one of the same client session (its
process gone) takes that one's row over (core.bridge.attachment). On stdin
EOF it deregisters and exits 0. Every way it gives up (no registry, its row
taken over) still answers each request the client sent or sends
(core.bridge.refusal).

When no tray runs, the bridge starts one as the login autostart entry
does, detached from the client's process tree, and exactly one for many
bridges starting at once (core.bridge.autostart); each request waits up to
``MCP_TRAY_RECONNECT_SECONDS`` (60 by default) for it. With
``MCP_TRAY_AUTOSTART=0`` it starts none, and requests are answered within
``ABSENT_WAIT_SECONDS`` that mcp-tray is not running (a client would
otherwise time out first). When the tray goes away later (an upgrade, a
crash), the relay finds it again (core.bridge.relay).
"""

import asyncio
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from core.base.envvars import AUTOSTART_ENV, RECONNECT_SECONDS_ENV
from core.base.errors import InstanceError, NotRunning, RegistryFileError
from core.base.exitcodes import EXIT_FAILED, EXIT_OK
from core.bridge.attachment import Attachment, bridge_identity
from core.bridge.autostart import Started, autostart_enabled, ensure_tray
from core.bridge.refusal import refuse_all
from core.bridge.relay import RECONNECT_WAIT_SECONDS, Relay
from core.platform.backends import backends
from core.platform.pipes import pipes_for
from core.protocol.headers import CLIENT_HEADER, WORKER_HEADER
from core.registry.identity import normalize_client_name
from core.registry.records import HeartbeatOutcome
from core.settings.paths import Paths
from core.settings.profiles import endpoint_path
from core.settings.runtime import running_instance
from core.settings.secrets import read_token

#: How long a request waits for a tray nobody is starting (autostart off, or the
#: tray the bridge started died): short enough for any client's own timeout.
ABSENT_WAIT_SECONDS: Final = 2.0
#: Why a bridge whose row a newer bridge claimed stops.
TAKEN_OVER: Final = "a newer bridge took over this client session"


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Our stdin and stdout as streams, through the platform's pipes (threads on
    Windows, and for a stdin or stdout that is a file)."""
    loop = asyncio.get_running_loop()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await pipes_for(stdin, backends().pipes).read_pipe(
        loop, lambda: asyncio.StreamReaderProtocol(reader), stdin
    )
    protocol = asyncio.streams.FlowControlMixin()
    transport = await pipes_for(stdout, backends().pipes).write_pipe(loop, lambda: protocol, stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(name: str, paths: Paths, launcher: Sequence[str] | None = None) -> int:
    """Relay between the client's stdio and the tray; ``launcher`` starts an absent
    tray (``mcp-tray run --minimized``; None: never)."""
    reader, writer = await _stdio()
    who = bridge_identity(os.environ, os.getppid())
    fenced = asyncio.Event()
    loop = asyncio.get_running_loop()
    attachment: Attachment | None = None

    def on_refused(outcome: HeartbeatOutcome) -> None:
        if attachment is not None and attachment.fenced:
            print(
                f"mcp-tray connect {name}: {outcome}; {TAKEN_OVER}, exiting",
                file=sys.stderr,
            )
            loop.call_soon_threadsafe(fenced.set)
        elif attachment is not None:
            # The row vanished (a deleted registry): register it again.
            loop.call_soon_threadsafe(_spawn_ensure, attachment)

    try:
        attachment = await asyncio.to_thread(Attachment.attach, paths, name, who, on_refused)
    except (RegistryFileError, OSError) as exc:
        why = f"mcp-tray connect {name}: {exc}"
        print(why, file=sys.stderr, flush=True)
        await refuse_all(reader, writer, why)
        return EXIT_FAILED
    headers = {
        CLIENT_HEADER: normalize_client_name(who.client),
        WORKER_HEADER: attachment.identity,
    }

    async def locate() -> str:
        # Whatever port the tray listens on now, and its token (created at its first start).
        info = await asyncio.to_thread(running_instance, paths)
        token = await asyncio.to_thread(read_token, paths.token_file)
        if token is None:
            raise NotRunning(paths.state_dir, "no API token yet")
        headers["authorization"] = f"Bearer {token}"
        return info.url + endpoint_path(name)

    wait = reconnect_wait(os.environ)

    async def reconnected() -> None:
        print(f"mcp-tray connect {name}: connected to mcp-tray again", file=sys.stderr, flush=True)
        relay.wait_seconds, relay.absent_why = wait, None
        await asyncio.to_thread(attachment.ensure)

    relay = Relay(locate, headers, writer, wait_seconds=wait)
    relay.on_reconnected = reconnected
    try:
        await relay.connect()
    except InstanceError as exc:
        what = await _tray_absent(relay, paths, launcher)
        print(f"mcp-tray connect {name}: {exc} {what}", file=sys.stderr, flush=True)
    try:
        stdin_done = asyncio.ensure_future(_pump_stdin(reader, relay))
        fenced_wait = asyncio.ensure_future(fenced.wait())
        await asyncio.wait([stdin_done, fenced_wait], return_when=asyncio.FIRST_COMPLETED)
        stdin_done.cancel()
        fenced_wait.cancel()
    finally:
        await relay.aclose(TAKEN_OVER if fenced.is_set() else "its client closed its input")
        await asyncio.to_thread(attachment.detach)
    return EXIT_FAILED if fenced.is_set() else EXIT_OK


async def _tray_absent(relay: Relay, paths: Paths, launcher: Sequence[str] | None) -> str:
    """Start the absent tray unless told not to; what was done, for stderr."""
    if launcher is None or not autostart_enabled(os.environ):
        why = f"{AUTOSTART_ENV}=0: this bridge does not start it"
        if launcher is None:
            why = "this bridge was given no way to start it"
        relay.wait_seconds, relay.absent_why = min(relay.wait_seconds, ABSENT_WAIT_SECONDS), why
        return f"Not starting it ({why}): requests are answered that it is not running."
    try:
        started = await ensure_tray(paths, launcher, os.environ)
    except OSError as exc:
        started = Started(None, False, f"cannot start mcp-tray: {exc}")
    if not started.up:
        relay.wait_seconds = min(relay.wait_seconds, ABSENT_WAIT_SECONDS)
        relay.absent_why = started.text
    return f"Autostart: {started.text}; requests wait up to {relay.wait_seconds:g} s each for it."


def reconnect_wait(environ: Mapping[str, str]) -> float:
    """How long a request waits for an absent tray (``MCP_TRAY_RECONNECT_SECONDS``)."""
    raw = environ.get(RECONNECT_SECONDS_ENV)
    try:
        seconds = float(raw) if raw is not None else RECONNECT_WAIT_SECONDS
    except ValueError:
        return RECONNECT_WAIT_SECONDS
    return seconds if math.isfinite(seconds) and seconds >= 0 else RECONNECT_WAIT_SECONDS


_ensuring: set["asyncio.Task[None]"] = set()


def _spawn_ensure(attachment: Attachment) -> None:
    task = asyncio.ensure_future(asyncio.to_thread(attachment.ensure))
    _ensuring.add(task)
    task.add_done_callback(_ensuring.discard)


async def _pump_stdin(reader: asyncio.StreamReader, relay: Relay) -> None:
    while True:
        line = await reader.readline()
        if not line:
            return
        if line.strip():
            relay.submit(line)


def run(name: str, paths: Paths, launcher: Sequence[str] | None = None) -> int:
    return asyncio.run(serve(name, paths, launcher))


def refuse(why: str, code: int) -> int:
    """A bridge that cannot relay at all: each request is answered ``why``; then ``code``."""

    async def answer_all() -> int:
        await refuse_all(*await _stdio(), why)
        return code

    return asyncio.run(answer_all())
