"""Upstream: mcp-tray's own JSON-RPC peer over a real child's pipes.

Strategy: the "server" is a real child process spawned by
``ChildProcess.spawn``, but it has no logic of its own. Most tests run
tests/servers/socket_puppet.py, which relays its stdin to a loopback socket
and the socket to its stdout, so the test reads exactly what ``Upstream``
wrote and writes exactly what the server answers (ids in either form,
progress, junk, over-long lines, silence). A few tests run tiny ``python -c``
scripts instead where the child's own exit is the point (a reply written just
before exiting, a grandchild holding stdout open). Every wait is bounded;
"nothing was sent" is shown by ordering (the next line the server sees is a
later marker), never by sleeping.
"""

import asyncio
import contextlib
import json
import os
import sys
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import pytest

import core.supervision.child as child_module
from core.base.errors import ConnectionLost, RpcError
from core.protocol.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, REQUEST_TIMEOUT, dumps
from core.supervision.child import ChildProcess, StopTiming, child_environment
from core.supervision.sweep import new_owner_id
from core.supervision.upstream import CLIENT_INFO, PROTOCOL_VERSION, Handshake, Upstream
from tests.conftest import SERVERS, kill_now, wait_until
from tests.support.fakes import FakeClock

#: Every test here runs under the native and the portable backend sets (conftest).
pytestmark = pytest.mark.usefixtures("backend")

PUPPET = SERVERS / "socket_puppet.py"
#: The children here exit on their own; a short stop contract is plenty.
QUICK_STOP = StopTiming(stdin_close_grace=1.0, sigterm_grace=1.0, sigkill_settle=1.0)
#: Upper bound for anything that should happen "at once" on a loaded machine.
PROMPT = 5.0

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = PROMPT) -> T:
    return await asyncio.wait_for(awaitable, seconds)


class Peer:
    """The mcp-tray side's handlers: records what reaches them."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Mapping[str, Any] | None]] = []
        self.notifications: list[tuple[str, Mapping[str, Any] | None]] = []
        self.junk: list[str] = []
        self.answer: Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]] = (
            self._echo
        )

    @staticmethod
    async def _echo(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"answered": method}

    async def on_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        self.requests.append((method, params))
        return await self.answer(method, params)

    async def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        self.notifications.append((method, params))
        if method == "test/explode":
            raise RuntimeError("a notification handler failed")

    def on_junk(self, line: str) -> None:
        self.junk.append(line)


class Puppet:
    """The test's end of socket_puppet.py: what the child reads and writes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def receive(self) -> dict[str, Any]:
        """The next line Upstream wrote to the child's stdin, parsed."""
        line = await within(self.reader.readline())
        assert line, "the child's stdin closed"
        message = json.loads(line)
        assert isinstance(message, dict)
        return message

    async def send(self, message: Mapping[str, Any] | bytes) -> None:
        """Make the child print this on its stdout (a dict becomes one JSON line)."""
        data = message if isinstance(message, bytes) else dumps(message) + b"\n"
        self.writer.write(data)
        await self.writer.drain()

    async def reply(self, request: Mapping[str, Any], result: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def reply_error(self, request: Mapping[str, Any], error: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "error": error})

    async def hang_up(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def stop(child: ChildProcess) -> None:
    await child.stop(QUICK_STOP, log=lambda line: None)


def open_upstream(
    child: ChildProcess, peer: Peer
) -> contextlib.AbstractAsyncContextManager[Upstream]:
    """An Upstream over ``child`` whose handlers are ``peer``'s."""
    return Upstream.open(
        child,
        on_request=peer.on_request,
        on_notification=peer.on_notification,
        on_junk=peer.on_junk,
    )


async def ping_round_trip(upstream: Upstream, puppet: Puppet, result: dict[str, Any]) -> Any:
    """A ping the server answers with ``result``: what the caller gets back."""
    call = asyncio.ensure_future(upstream.request("ping", None))
    await puppet.reply(await puppet.receive(), result)
    return await within(call)


@contextlib.asynccontextmanager
async def puppet_session(
    peer: Peer | None = None,
) -> AsyncIterator[tuple[Upstream, Puppet, Peer]]:
    """An Upstream over a real socket_puppet.py child, and the test's end of it."""
    peer = peer or Peer()
    loop = asyncio.get_running_loop()
    connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
        loop.create_future()
    )

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connected.done():
            writer.close()
        else:
            connected.set_result((reader, writer))

    listener = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    child = await ChildProcess.spawn(
        sys.executable, [str(PUPPET), str(port)], env=dict(os.environ), cwd=None
    )
    puppet: Puppet | None = None
    try:
        puppet = Puppet(*await within(connected, 20))
        async with open_upstream(child, peer) as upstream:
            yield upstream, puppet, peer
    finally:
        if puppet is not None:
            await puppet.hang_up()  # the puppet exits on its socket's EOF
        listener.close()
        await listener.wait_closed()
        await stop(child)


@contextlib.asynccontextmanager
async def script_session(script: str, peer: Peer | None = None) -> AsyncIterator[Upstream]:
    """An Upstream over a ``python -c script`` child."""
    peer = peer or Peer()
    # Tagged as the tray tags its children: the stop contract then finds a grandchild whose
    # parent exited first even where the backend cannot see it below the child (portable).
    # The owner is this live process, as a tray's is: an owner that is not one reads as a
    # dead tray's, and a tray starting in another test worker would sweep the child away.
    env = child_environment({}, new_owner_id(), "0")
    child = await ChildProcess.spawn(sys.executable, ["-c", script], env=env, cwd=None)
    try:
        async with open_upstream(child, peer) as upstream:
            yield upstream
    finally:
        await stop(child)


# ------------------------------------------------------------ requests


async def test_replies_find_their_requests_whether_the_server_echoes_ids_as_numbers_or_strings() -> (
    None
):
    async with puppet_session() as (upstream, puppet, _):
        first = asyncio.ensure_future(upstream.request("tools/list", None))
        second = asyncio.ensure_future(upstream.request("prompts/list", None))
        sent_first = await puppet.receive()
        sent_second = await puppet.receive()
        assert (sent_first["method"], sent_second["method"]) == ("tools/list", "prompts/list")
        assert isinstance(sent_first["id"], int)
        assert sent_first["id"] != sent_second["id"]
        assert "params" not in sent_first  # None means no params member at all

        # Out of order, and the second id comes back as a string ("7" for 7).
        await puppet.send({"jsonrpc": "2.0", "id": str(sent_second["id"]), "result": {"n": 2}})
        await puppet.send({"jsonrpc": "2.0", "id": sent_first["id"], "result": {"n": 1}})

        assert await within(first) == {"n": 1}
        assert await within(second) == {"n": 2}


async def test_an_error_reply_raises_rpc_error_with_the_servers_code_message_and_data() -> None:
    async with puppet_session() as (upstream, puppet, _):
        call = asyncio.ensure_future(upstream.request("tools/call", {"name": "x"}))
        sent = await puppet.receive()
        assert sent["params"] == {"name": "x"}
        await puppet.reply_error(
            sent, {"code": -32602, "message": "unknown tool x", "data": {"tool": "x"}}
        )

        with pytest.raises(RpcError) as caught:
            await within(call)
        assert (caught.value.code, caught.value.message, caught.value.data) == (
            -32602,
            "unknown tool x",
            {"tool": "x"},
        )


async def test_a_reply_with_an_id_nobody_waits_for_is_ignored_and_the_session_goes_on() -> None:
    async with puppet_session() as (upstream, puppet, peer):
        await puppet.send({"jsonrpc": "2.0", "id": 999, "result": {"stray": True}})

        assert await ping_round_trip(upstream, puppet, {}) == {}
        assert peer.junk == []


async def test_progress_reaches_the_caller_whose_request_it_belongs_to() -> None:
    seen: dict[str, list[Mapping[str, Any]]] = {"a": [], "b": []}

    def recorder(key: str) -> Any:
        async def on_progress(params: Mapping[str, Any]) -> None:
            seen[key].append(params)

        return on_progress

    async with puppet_session() as (upstream, puppet, _):
        call_a = asyncio.ensure_future(
            upstream.request(
                "tools/call", {"name": "a", "_meta": {"keep": 1}}, on_progress=recorder("a")
            )
        )
        call_b = asyncio.ensure_future(
            upstream.request("tools/call", None, on_progress=recorder("b"))
        )
        sent_a = await puppet.receive()
        sent_b = await puppet.receive()
        # Our request id doubles as the progress token; the caller's _meta survives.
        assert sent_a["params"]["_meta"] == {"keep": 1, "progressToken": sent_a["id"]}
        assert sent_b["params"] == {"_meta": {"progressToken": sent_b["id"]}}

        def progress(token: object, **fields: object) -> dict[str, Any]:
            params = {"progressToken": token, **fields}
            return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}

        await puppet.send(progress(str(sent_b["id"]), progress=1))  # token as a string
        await puppet.send(progress(sent_a["id"], progress=0.5, total=2, message="half"))
        await puppet.send(progress(424242, progress=9))  # nobody's token: dropped
        await wait_until(lambda: bool(seen["a"] and seen["b"]), timeout=PROMPT, what="progress")
        await puppet.reply(sent_a, {"done": "a"})
        await puppet.reply(sent_b, {"done": "b"})

        assert await within(call_a) == {"done": "a"}
        assert await within(call_b) == {"done": "b"}
        # Passed on as sent: the caller swaps the token for its client's own.
        assert seen == {
            "a": [{"progressToken": sent_a["id"], "progress": 0.5, "total": 2, "message": "half"}],
            "b": [{"progressToken": str(sent_b["id"]), "progress": 1}],
        }


async def test_a_request_that_times_out_raises_request_timeout_and_tells_the_server_to_stop() -> (
    None
):
    async with puppet_session() as (upstream, puppet, peer):
        with pytest.raises(RpcError) as caught:
            await upstream.request("tools/call", {"name": "slow"}, timeout=0.2)
        assert caught.value.code == REQUEST_TIMEOUT
        assert "'tools/call' timed out" in caught.value.message

        sent = await puppet.receive()
        assert await puppet.receive() == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": sent["id"], "reason": "timed out after 0.2s"},
        }
        # A late reply after the timeout is dropped quietly; the session still works.
        await puppet.reply(sent, {"too": "late"})
        assert await ping_round_trip(upstream, puppet, {}) == {}
        assert peer.junk == []


async def test_a_caller_that_gives_up_sends_the_server_a_cancellation_for_its_request() -> None:
    async with puppet_session() as (upstream, puppet, _):
        call = asyncio.ensure_future(upstream.request("tools/call", {"name": "slow"}))
        sent = await puppet.receive()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

        assert await puppet.receive() == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": sent["id"], "reason": "the client cancelled"},
        }


async def test_list_all_follows_next_cursor_until_the_last_page() -> None:
    async with puppet_session() as (upstream, puppet, _):
        listing = asyncio.ensure_future(upstream.list_all("tools/list", "tools"))
        first = await puppet.receive()
        assert "params" not in first
        await puppet.reply(
            first, {"tools": [{"name": "a"}, "not-a-tool", {"name": "b"}], "nextCursor": "p2"}
        )
        second = await puppet.receive()
        assert second["method"] == "tools/list"
        assert second["params"] == {"cursor": "p2"}
        await puppet.reply(second, {"tools": [{"name": "c"}], "nextCursor": "p3"})
        third = await puppet.receive()
        assert third["params"] == {"cursor": "p3"}
        await puppet.reply(third, {"tools": [{"name": "d"}]})

        assert await within(listing) == ([{"name": n} for n in "abcd"], {})


async def test_ping_falls_back_to_tools_list_when_the_server_has_no_ping() -> None:
    async with puppet_session() as (upstream, puppet, _):
        pinging = asyncio.ensure_future(upstream.ping(timeout=PROMPT))
        ping = await puppet.receive()
        assert ping["method"] == "ping"
        await puppet.reply_error(ping, {"code": METHOD_NOT_FOUND, "message": "Method not found"})
        fallback = await puppet.receive()
        assert fallback["method"] == "tools/list"
        await puppet.reply(fallback, {"tools": []})

        await within(pinging)  # returns once the fallback answered


async def test_a_ping_that_fails_for_another_reason_raises_without_the_fallback() -> None:
    async with puppet_session() as (upstream, puppet, _):
        pinging = asyncio.ensure_future(upstream.ping(timeout=PROMPT))
        ping = await puppet.receive()
        await puppet.reply_error(ping, {"code": INTERNAL_ERROR, "message": "broken"})
        with pytest.raises(RpcError) as caught:
            await within(pinging)
        assert caught.value.code == INTERNAL_ERROR

        # The next line the server sees is our marker, not a tools/list.
        marker = asyncio.ensure_future(upstream.request("test/marker", None))
        assert (await puppet.receive())["method"] == "test/marker"
        marker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await marker


async def test_initialize_offers_mcp_trays_version_and_capabilities_then_says_initialized() -> None:
    async with puppet_session() as (upstream, puppet, _):
        handshake = asyncio.ensure_future(upstream.initialize())
        sent = await puppet.receive()
        assert sent["method"] == "initialize"
        assert sent["params"]["protocolVersion"] == PROTOCOL_VERSION
        assert sent["params"]["clientInfo"] == CLIENT_INFO
        assert set(sent["params"]["capabilities"]) == {"roots", "sampling", "elicitation"}
        result = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "puppet", "version": "1"},
        }
        await puppet.reply(sent, result)

        assert await within(handshake) == result
        assert await puppet.receive() == {"jsonrpc": "2.0", "method": "notifications/initialized"}


# -------------------------------------------------- server -> mcp-tray


async def test_a_server_request_is_answered_with_what_on_request_returns_under_its_own_id() -> None:
    peer = Peer()

    async def answer(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"roots": [{"uri": "file:///tmp"}]} if method == "roots/list" else {"p": params}

    peer.answer = answer
    async with puppet_session(peer) as (_, puppet, _):
        await puppet.send({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
        assert await puppet.receive() == {
            "jsonrpc": "2.0",
            "id": "srv-1",
            "result": {"roots": [{"uri": "file:///tmp"}]},
        }
        await puppet.send(
            {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"m": 1}}
        )
        assert await puppet.receive() == {"jsonrpc": "2.0", "id": 7, "result": {"p": {"m": 1}}}
        assert peer.requests == [("roots/list", None), ("sampling/createMessage", {"m": 1})]


async def test_a_handler_raising_rpc_error_becomes_an_error_reply_and_any_other_an_internal_error() -> (
    None
):
    peer = Peer()

    async def answer(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        if method == "sampling/createMessage":
            raise RpcError(-32602, "no client can sample", {"why": "test"})
        raise KeyError("boom")

    peer.answer = answer
    async with puppet_session(peer) as (_, puppet, _):
        await puppet.send({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage"})
        assert await puppet.receive() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32602, "message": "no client can sample", "data": {"why": "test"}},
        }
        await puppet.send({"jsonrpc": "2.0", "id": 2, "method": "roots/list"})
        reply = await puppet.receive()
        assert reply["id"] == 2
        assert reply["error"]["code"] == INTERNAL_ERROR
        assert "boom" in reply["error"]["message"]


async def test_a_servers_cancellation_cancels_the_handler_and_no_reply_is_sent() -> None:
    peer = Peer()
    started = asyncio.Event()
    outcome: list[str] = []

    async def answer(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        if method != "elicitation/create":
            return {}
        started.set()
        try:
            await asyncio.Event().wait()  # only the cancellation ends this
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return {"never": True}

    peer.answer = answer
    async with puppet_session(peer) as (_, puppet, _):
        await puppet.send({"jsonrpc": "2.0", "id": 5, "method": "elicitation/create"})
        await within(started.wait())
        # The id comes back as a string: "5" must still find request 5.
        await puppet.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "5"}}
        )
        await puppet.send({"jsonrpc": "2.0", "id": 6, "method": "ping"})

        # The first reply the server gets is the later ping's: none for request 5.
        assert await puppet.receive() == {"jsonrpc": "2.0", "id": 6, "result": {}}
        await wait_until(lambda: outcome == ["cancelled"], timeout=PROMPT, what="handler cancelled")


async def test_server_notifications_reach_on_notification_even_after_one_handler_fails() -> None:
    async with puppet_session() as (upstream, puppet, peer):
        await puppet.send({"jsonrpc": "2.0", "method": "test/explode"})
        await puppet.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"x": 1},
            }
        )
        await puppet.send({"jsonrpc": "2.0", "method": "notifications/message", "params": [1]})
        await wait_until(lambda: len(peer.notifications) == 3, timeout=PROMPT, what="3 notes")

        assert peer.notifications == [
            ("test/explode", None),
            ("notifications/tools/list_changed", {"x": 1}),
            ("notifications/message", None),  # non-object params are not passed on
        ]
        assert not upstream.closed.is_set()


# -------------------------------------------------------------- junk


async def test_stdout_lines_that_are_not_json_rpc_messages_go_to_on_junk() -> None:
    async with puppet_session() as (upstream, puppet, peer):
        await puppet.send(b"Starting puppet server v1.2 ...\n")
        await puppet.send(b"   \n")  # blank: skipped, not junk
        await puppet.send(b"[1, 2, 3]\n")  # JSON, but not a message
        await puppet.send(b"\xc3\x28 invalid utf-8\n")

        assert await ping_round_trip(upstream, puppet, {"ok": True}) == {"ok": True}
        assert peer.junk == [
            "Starting puppet server v1.2 ...",
            "[1, 2, 3]",
            "\ufffd( invalid utf-8",
        ]


async def test_an_over_long_stdout_line_is_dropped_with_a_note_and_reading_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The child's stdout reader takes its limit at spawn: shrink it for this child.
    monkeypatch.setattr(child_module, "MAX_LINE_BYTES", 1024)
    async with puppet_session() as (upstream, puppet, peer):
        call = asyncio.ensure_future(upstream.request("resources/read", None))
        sent = await puppet.receive()
        await puppet.reply(sent, {"pad": "x" * 5000})  # over the limit: dropped
        await puppet.reply(sent, {"pad": "short"})

        assert await within(call) == {"pad": "short"}
        assert peer.junk[0] == "<a stdout line longer than the read limit was dropped>"
        assert not upstream.closed.is_set()


# ------------------------------------------------------- the child ends


async def test_a_request_in_flight_fails_with_connection_lost_at_once_when_the_child_is_killed() -> (
    None
):
    async with puppet_session() as (upstream, puppet, _):
        loop = asyncio.get_running_loop()
        call = asyncio.ensure_future(upstream.request("tools/call", None, timeout=30))
        await puppet.receive()
        killed_at = loop.time()
        assert upstream.child.pid is not None
        kill_now(upstream.child.pid)

        with pytest.raises(ConnectionLost):
            await within(call)
        # Seen as the exit, not left to the request's 30 s timeout.
        assert loop.time() - killed_at < PROMPT
        await within(upstream.closed.wait())
        with pytest.raises(ConnectionLost):
            await upstream.request("ping", None)  # refused at once, nothing written


async def test_a_request_in_flight_fails_at_once_when_the_child_exits_but_a_grandchild_holds_its_stdout() -> (
    None
):
    script = (
        "import subprocess, sys\n"
        "sys.stdin.readline()\n"
        # The grandchild inherits the stdout pipe, so stdout never reaches EOF.
        "subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
        "sys.exit(0)\n"
    )
    async with script_session(script) as upstream:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ConnectionLost):
            await within(upstream.request("tools/call", None, timeout=30))
        assert loop.time() - started < PROMPT
        assert upstream.child.returncode == 0


async def test_a_reply_written_just_before_the_child_exits_still_reaches_its_caller() -> None:
    script = (
        "import json, sys\n"
        "request = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'result': {'last': 'words'}}), flush=True)\n"
    )
    async with script_session(script) as upstream:
        assert await within(upstream.request("tools/call", None)) == {"last": "words"}
        await within(upstream.closed.wait())
        with pytest.raises(ConnectionLost):
            await upstream.request("tools/call", None)


async def test_a_large_reply_is_held_at_most_about_twice_on_its_way_in() -> None:
    unit = 'a "quoted" line\n'  # JSON escapes some of it, as it would a real file's
    size = 16 * 1024 * 1024
    script = (
        "import json, sys\n"
        "request = json.loads(sys.stdin.readline())\n"
        f"text = {unit!r} * {size // len(unit)}\n"
        "reply = {'jsonrpc': '2.0', 'id': request['id'], 'result': {'text': text}}\n"
        "sys.stdout.write(json.dumps(reply) + '\\n'); sys.stdout.flush()\n"
        "sys.stdin.readline()\n"
    )
    async with script_session(script) as upstream:
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            result = await within(upstream.request("tools/call", None), 30)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result["text"] == unit * (size // len(unit))
        # The bytes as read (the reader's buffer, then the line cut from it), then
        # its text, then the text and the parsed result: about twice, never the
        # three copies parsing the bytes themselves would hold.
        assert peak - before < 2.6 * size, (peak - before) / size


async def test_requests_to_a_child_that_already_exited_fail_with_connection_lost() -> None:
    async with script_session("import sys; sys.exit(3)") as upstream:
        await within(upstream.closed.wait())
        with pytest.raises(ConnectionLost):
            await within(upstream.request("ping", None))
        await upstream.notify("notifications/initialized", None)  # swallowed, no raise


# ------------------------------------------------- which era the child speaks

DISCOVERED = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}},
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "puppet", "version": "2"}},
}
INITIALIZED = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "puppet", "version": "1"},
}


async def test_a_child_that_answers_discover_is_driven_in_the_stateless_era() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening = asyncio.ensure_future(upstream.start_session("auto", PROMPT))
        probe = await puppet.receive()
        assert probe["method"] == "server/discover"
        meta = probe["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert set(meta["io.modelcontextprotocol/clientCapabilities"]) == {
            "roots",
            "sampling",
            "elicitation",
        }
        await puppet.reply(probe, DISCOVERED)

        assert await within(opening) == ("2026-07-28", DISCOVERED)


async def test_a_child_that_does_not_know_discover_gets_initialize() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening = asyncio.ensure_future(upstream.start_session("auto", PROMPT))
        await puppet.reply_error(
            await puppet.receive(), {"code": -32601, "message": "Method not found"}
        )
        handshake = await puppet.receive()
        assert handshake["method"] == "initialize"
        await puppet.reply(handshake, INITIALIZED)
        assert (await puppet.receive())["method"] == "notifications/initialized"

        assert await within(opening) == (None, INITIALIZED)


async def opened_past_the_window(
    upstream: Upstream, puppet: Puppet, notes: list[str]
) -> tuple["asyncio.Future[Handshake]", dict[str, Any], dict[str, Any]]:
    """A session opening on a FakeClock whose discover went unanswered through the
    probe window: the opening, the pending discover and the initialize sent beside it."""
    clock = FakeClock()
    opening = asyncio.ensure_future(
        upstream.start_session("auto", 5.0, clock=clock, note=notes.append)
    )
    discover = await puppet.receive()
    assert discover["method"] == "server/discover"
    await wait_until(lambda: clock.sleepers == 1, what="the probe window to start")
    clock.advance(5.0)
    handshake = await puppet.receive()
    # initialize follows at once, with discover still pending: no cancellation between.
    assert handshake["method"] == "initialize"
    assert not opening.done()
    return opening, discover, handshake


async def test_a_child_silent_through_the_probe_window_gets_initialize_beside_the_pending_discover() -> (
    None
):
    notes: list[str] = []
    async with puppet_session() as (upstream, puppet, _):
        opening, discover, handshake = await opened_past_the_window(upstream, puppet, notes)
        await puppet.reply(handshake, INITIALIZED)

        assert (await within(opening)).modern is None
        assert (await puppet.receive())["method"] == "notifications/initialized"
        # The discover nobody answered is withdrawn once the era is settled.
        cancelled = await puppet.receive()
        assert cancelled["method"] == "notifications/cancelled"
        assert cancelled["params"]["requestId"] == discover["id"]
    assert notes and "server/discover unanswered after 5 s" in notes[0]


async def test_a_discover_answered_after_the_window_still_decides_the_2026_era() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening, discover, handshake = await opened_past_the_window(upstream, puppet, [])
        # A slow SDK server read discover first: it answers it, then refuses initialize.
        await puppet.reply(discover, DISCOVERED)
        await puppet.reply_error(
            handshake, {"code": -32022, "message": "this server speaks 2026-07-28"}
        )

        assert await within(opening) == ("2026-07-28", DISCOVERED)


async def test_a_discover_refused_after_the_window_leaves_the_era_to_initialize() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening, discover, handshake = await opened_past_the_window(upstream, puppet, [])
        await puppet.reply_error(discover, {"code": -32601, "message": "Method not found"})
        await puppet.reply(handshake, INITIALIZED)

        assert await within(opening) == (None, INITIALIZED)
        # The one initialize already sent was the handshake: no second one came.
        assert (await puppet.receive())["method"] == "notifications/initialized"


async def test_silence_never_decides_the_era_however_long_it_lasts() -> None:
    async with puppet_session() as (upstream, puppet, _):
        clock = FakeClock()
        opening = asyncio.ensure_future(upstream.start_session("auto", 5.0, clock=clock))
        discover = await puppet.receive()
        await wait_until(lambda: clock.sleepers == 1, what="the probe window to start")
        clock.advance(3600.0)
        handshake = await puppet.receive()
        clock.advance(3600.0)
        # A round trip after the hour: the opening had every chance to move.
        assert await ping_round_trip(upstream, puppet, {}) == {}
        # Only the caller's start timeout ends an opening nobody answers; then
        # both requests are withdrawn.
        assert not opening.done()
        opening.cancel()
        withdrawn = {(await puppet.receive())["params"]["requestId"] for _ in range(2)}
        assert withdrawn == {discover["id"], handshake["id"]}


async def test_when_both_eras_are_refused_the_start_fails_with_initializes_refusal() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening, discover, handshake = await opened_past_the_window(upstream, puppet, [])
        await puppet.reply_error(discover, {"code": -32601, "message": "Method not found"})
        await puppet.reply_error(handshake, {"code": -32600, "message": "not today"})

        with pytest.raises(RpcError) as caught:
            await within(opening)
        assert caught.value.code == -32600
        assert str(caught.value) == "initialize refused: not today"


async def test_a_child_pinned_to_2026_07_28_that_refuses_it_fails_the_start() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening = asyncio.ensure_future(upstream.start_session("2026-07-28", PROMPT))
        first = await puppet.receive()
        await puppet.reply_error(
            first,
            {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
            },
        )
        # Pinned to 2026-07-28 and refused it: no fallback, the error stands.
        with pytest.raises(RpcError) as caught:
            await within(opening)
        assert caught.value.code == -32022


async def test_a_child_pinned_to_the_handshake_era_is_never_probed() -> None:
    async with puppet_session() as (upstream, puppet, _):
        opening = asyncio.ensure_future(upstream.start_session("handshake", PROMPT))
        handshake = await puppet.receive()
        assert handshake["method"] == "initialize"
        await puppet.reply(handshake, INITIALIZED)

        assert (await within(opening)).modern is None
