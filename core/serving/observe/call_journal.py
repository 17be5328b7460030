"""The gateway's side of the call journal (docs/design.md §3.16): one ``Watch`` per request.

Every request that reaches a server passes through the pipeline
(core.serving.calls.pipeline), whatever its door: ``/mcp/NAME``, ``/mcp`` and
profiles (core.serving.aggregate.aggregate routes into the pipeline), a bridge
(an HTTP session like any other, named by its headers), and mcp-tray's own
calls (``mcp-tray call``, the control API: ``Pipeline.own_call``). There, and
only there, a ``Watch`` is opened when the request is about to be sent and
ended with its answer or its error; the call path tells it which child took
the request and whether it was replayed (``Caller.observer``).

On the loop a watch costs a few attributes, the result's size and first
lines, and a queue put: the record is made on the journal's writer thread
(core.registry.journal). Written records
come back here (``published``, on the loop) for the subscribers: the
window's Activity tab, ``--follow`` through the API.

Outcomes: ``ok``; ``tool-error`` (a result with ``isError``); ``retried`` (an
answer after a replay); ``exited``; ``timeout``; ``error`` (with its JSON-RPC
code where there is one); ``cancelled``; ``refused`` by the ``breaker`` (the
session's or the server's) or the ``profile``. Who else refuses (approvals,
held tools) says so with ``Watch.settle`` before the watch ends, or raises an
error that carries ``journal_outcome = (outcome, refused_by)``.

Traces (core.serving.observe.telemetry): a watch carries its client's trace context;
with an exporter it also begins the call's span, told to a 2026-07-28 child
as its parent (``traceparent``) and ended with the record.
"""

import asyncio
import functools
import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

from core.base.errors import (
    BreakerOpen,
    CallTimedOut,
    RpcError,
    SessionTripped,
    TransportFailure,
    UpstreamError,
)
from core.registry.identity import client_display_name
from core.registry.journal import JournalWriter
from core.registry.journal_rows import (
    RESULT_HEAD_BYTES,
    CallRecord,
    Seen,
    cut,
    result_summary,
)
from core.serving.observe.telemetry import Span, Telemetry, TraceParent
from core.serving.sessions.sessions import ClientSession
from core.settings.config_model import KEYRING_REF_RE

#: Records the window gets when it opens (newest last).
RECENT_RECORDS: Final = 500
#: The one method whose target is a URI, and those whose target is a name.
_URI_METHODS: Final = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
_NAME_METHODS: Final = frozenset({"tools/call", "prompts/get"})
#: Exited, in the journal's words: every way a child's death ends a call.
_EXITED: Final = ("exited", "exited-again", "exited-mid-call")

Subscriber = Callable[[list[CallRecord]], None]
#: A Seen made by tuple's own constructor (a NamedTuple's __new__ is a Python frame
#: of 20 arguments, on the loop once per call); ``Who`` is its fields 2 to 7.
_new_seen: Final = functools.partial(tuple.__new__, Seen)
#: (client, its name, pid, how identified, session id, door).
Who = tuple[str, str, int | None, str, str, str]
assert Seen._fields[2:8] == ("client", "client_name", "pid", "identified_by", "session", "door")
#: A head this short is kept whole whatever it holds (``cut``: no character takes over 4 bytes).
_SHORT_HEAD: Final = RESULT_HEAD_BYTES // 4
#: Sessions whose description is remembered (then forgotten all at once: rebuilt on use).
KNOWN_SESSIONS: Final = 4096
#: A bridge whose worker row is not in the tray's copy yet is looked for again this often.
PID_RETRY_SECONDS: Final = 2.0


def target_of(method: str, params: Mapping[str, Any] | None) -> str:
    """The tool, resource URI or prompt a request names ("" when it names none)."""
    if not params:
        return ""
    if method in _NAME_METHODS:
        return str(params.get("name") or "")
    if method in _URI_METHODS:
        return str(params.get("uri") or "")
    return ""


def outcome_of(error: BaseException) -> tuple[str, str, int | None]:
    """(outcome, refused by, JSON-RPC code) of a request that ended in ``error``."""
    given = getattr(error, "journal_outcome", None)
    if isinstance(given, tuple) and len(given) == 2:
        return str(given[0]), str(given[1] or ""), None
    if isinstance(error, SessionTripped | BreakerOpen):
        return "refused", "breaker", None
    if isinstance(error, TransportFailure) and error.kind in _EXITED:
        return "exited", "", None
    if isinstance(error, CallTimedOut):
        return "timeout", "", None
    if isinstance(error, UpstreamError | RpcError):
        return "error", "", error.code
    if isinstance(error, asyncio.CancelledError):
        return "cancelled", "", None
    return "error", "", None


class Watch:
    """One request, from the moment it is sent to its end."""

    __slots__ = (
        "_first_generation",
        "_journal",
        "_params",
        "_replays",
        "_settled",
        "_span",
        "_started",
        "_t0",
        "_trace",
        "_who",
        "generation",
        "method",
        "replayed",
        "server",
    )

    def __init__(
        self,
        journal: "CallJournal",
        who: Who,
        server: str,
        method: str,
        params: Mapping[str, Any] | None,
        trace: TraceParent | None = None,
    ) -> None:
        self._journal = journal
        self._started = time.time()
        self._t0 = time.perf_counter()
        self._who = who
        self.server = server
        self.method = method
        self._params = params
        self.generation: int | None = None
        self._first_generation: int | None = None
        self.replayed = False
        self._replays = 0
        self._settled: tuple[str, str] | None = None
        self._trace = trace
        self._span: Span | None = None
        if journal.telemetry is not None:
            self._span = self._begin(journal.telemetry)

    def _begin(self, telemetry: Telemetry) -> Span:
        client, _, _, _, session, door = self._who
        target = target_of(self.method, self._params)
        attributes: dict[str, Any] = {
            "mcp.method.name": self.method,
            "mcp_tray.server": self.server,
            "mcp_tray.client": client,
            "mcp_tray.door": door,
        }
        if session:
            attributes["mcp.session.id"] = session
        if self.method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = target
        elif self.method == "prompts/get":
            attributes["gen_ai.prompt.name"] = target
        elif target:
            attributes["mcp.resource.uri"] = target
        span_name = f"{self.method} {target}" if target else self.method
        return telemetry.begin(span_name, self._trace, time.time_ns(), attributes)

    @property
    def traceparent(self) -> str | None:
        """The trace context a 2026-07-28 child gets with the request (None: none)."""
        if self._span is not None:
            return self._span.parent.header
        return self._trace.header if self._trace is not None else None

    def attempt(self, generation: int, replay: bool) -> None:
        if self._first_generation is None:
            self._first_generation = generation
        self.generation = generation
        self.replayed = self.replayed or replay
        self._replays += replay

    def settle(self, outcome: str, refused_by: str = "") -> None:
        """Say how the call ended where the answer alone does not (a denied approval)."""
        self._settled = (outcome, refused_by)

    def done(self, result: Mapping[str, Any]) -> None:
        outcome = "tool-error" if result.get("isError") else "ok"
        if outcome == "ok" and self.replayed:
            outcome = "retried"
        if (
            self._settled is None
            and self._span is None
            and self._trace is None
            and self.method == "tools/call"
        ):
            # Most calls, in one frame: on the loop for each of them, the frames
            # _end takes cost more than their work.
            content = result.get("content")
            if type(content) is list and len(content) == 1:
                block = content[0]
                text = block.get("text") if type(block) is dict else None
                if type(text) is str and block.get("type") == "text":
                    params = self._params
                    self._journal.put(
                        _new_seen(
                            (
                                self._started,
                                (time.perf_counter() - self._t0) * 1000,
                                *self._who,
                                self.server,
                                self.generation,
                                "tools/call",
                                str(params.get("name") or "") if params else "",
                                params.get("arguments") if params else None,
                                outcome,
                                "",
                                None,
                                "",
                                len(text),
                                text if len(text) <= _SHORT_HEAD else cut(text, RESULT_HEAD_BYTES),
                                "",
                            )
                        )
                    )
                    return
        self._end(outcome, "", None, "", result)

    def failed(self, error: BaseException) -> None:
        outcome, refused_by, code = outcome_of(error)
        self._end(outcome, refused_by, code, str(error), None)

    def _end(
        self,
        outcome: str,
        refused_by: str,
        code: int | None,
        detail: str,
        result: Mapping[str, Any] | None,
    ) -> None:
        if self._settled is not None:
            outcome, refused_by = self._settled
        trace_id = self._trace.trace_id if self._trace is not None else ""
        if self._span is not None:
            trace_id = self._span.parent.trace_id
            self._end_span(outcome, refused_by, code)
        params = self._params
        arguments: object = None
        if params is not None:
            arguments = params.get("arguments") if self.method in _NAME_METHODS else None
            if arguments is None and self.method not in _NAME_METHODS:
                arguments = {k: v for k, v in params.items() if k != "_meta"} or None
        self._journal.put(
            _new_seen(
                (
                    self._started,
                    (time.perf_counter() - self._t0) * 1000,
                    *self._who,
                    self.server,
                    self.generation,
                    self.method,
                    target_of(self.method, params),
                    arguments,
                    outcome,
                    refused_by,
                    code,
                    detail,
                    *result_summary(result),
                    trace_id,
                )
            )
        )

    def _end_span(self, outcome: str, refused_by: str, code: int | None) -> None:
        assert self._span is not None
        attributes: dict[str, Any] = {"mcp_tray.retries": self._replays}
        if self.generation is not None and self._first_generation is not None:
            attributes["mcp_tray.child.generation"] = self.generation
            attributes["mcp_tray.respawns"] = self.generation - self._first_generation
        if refused_by:
            attributes["mcp_tray.refused_by"] = refused_by
        if code is not None:
            attributes["rpc.response.status_code"] = str(code)
        self._span.end(outcome, attributes, time.time_ns())


class CallJournal:
    """Opens watches (none while no writer is attached) and hands written records on."""

    def __init__(self) -> None:
        self._writer: JournalWriter | None = None
        #: Hands a call's ``Seen`` to the writer (``JournalWriter.put``), or drops it.
        self.put: Callable[[Seen], None] = _drop
        #: Spans of the calls, when the config names an OTLP endpoint (core.serving.observe.telemetry).
        self.telemetry: Telemetry | None = None
        #: The bridge's pid for a worker identity (the worker registry knows it).
        self.pid_of: Callable[[str], int | None] = lambda identity: None
        self.recent: deque[CallRecord] = deque(maxlen=RECENT_RECORDS)
        self._subscribers: list[Subscriber] = []
        self._known: dict[tuple[str, bool, str, int | None, str], Who] = {}
        #: Monotonic seconds, for when to look for a bridge's pid again (a seam for tests).
        self.clock: Callable[[], float] = time.monotonic
        self._pid_retry: dict[str, float] = {}

    @property
    def writer(self) -> JournalWriter | None:
        return self._writer

    @writer.setter
    def writer(self, writer: JournalWriter | None) -> None:
        self._writer = writer
        self.put = _drop if writer is None else writer.put

    def watch(
        self,
        session: ClientSession,
        modern: bool,
        server: str,
        method: str,
        params: Mapping[str, Any] | None,
        trace: TraceParent | None = None,
    ) -> Watch | None:
        """A watch for a client session's request (None: nothing is journaled or traced)."""
        if self._writer is None and self.telemetry is None:
            return None
        return Watch(self, self._who(session, modern), server, method, params, trace)

    def own(
        self, server: str, method: str, params: Mapping[str, Any] | None, door: str
    ) -> Watch | None:
        """A watch for a request of mcp-tray's own (``door``: ``cli``, ``api``)."""
        if self._writer is None and self.telemetry is None:
            return None
        who = ("mcp-tray", "mcp-tray", None, "mcp-tray itself", "", door)
        return Watch(self, who, server, method, params)

    def refused(
        self,
        session: ClientSession,
        modern: bool,
        server: str,
        method: str,
        params: Mapping[str, Any] | None,
        refused_by: str,
        detail: str,
        trace: TraceParent | None = None,
    ) -> None:
        """A request refused before anything was sent (a tripped session, a profile)."""
        watch = self.watch(session, modern, server, method, params, trace)
        if watch is not None:
            watch._end("refused", refused_by, None, detail, None)

    def _who(self, session: ClientSession, modern: bool) -> Who:
        """(client, its name, pid, how identified, session id, door) of a client session:
        worked out once per session and what it knows (names are folded, pids looked up)."""
        bridge = session.kind == "bridge"
        if bridge and session.pid is None and session.worker_identity:
            self._look_up_pid(session, session.worker_identity)
        key = (session.id, modern, session.client_name, session.pid, session.via)
        who = self._known.get(key)
        if who is None:
            if len(self._known) >= KNOWN_SESSIONS:
                self._known.clear()
            who = self._known[key] = self._work_out(session, modern, bridge)
        return who

    def _look_up_pid(self, session: ClientSession, identity: str) -> None:
        """A bridge's pid, from the tray's copy of the worker registry (its row may come
        a moment after its first call): looked for again at most every ``PID_RETRY_SECONDS``."""
        now = self.clock()
        if now < self._pid_retry.get(identity, -math.inf):
            return
        session.pid = self.pid_of(identity)
        if session.pid is None:
            if len(self._pid_retry) >= KNOWN_SESSIONS:
                self._pid_retry.clear()
            self._pid_retry[identity] = now + PID_RETRY_SECONDS
        else:
            self._pid_retry.pop(identity, None)

    def _work_out(self, session: ClientSession, modern: bool, bridge: bool) -> Who:
        if session.identified_by:
            identified_by = session.identified_by
        elif bridge:
            identified_by = "bridge worker"
        elif session.client_name != "unknown":
            identified_by = "clientInfo" if not modern else "declared name"
        else:
            identified_by = "unknown"
        path = f"/mcp/{session.via}" if session.via else f"/mcp/{session.server}"
        if path == "/mcp/@all":
            path = "/mcp"
        door = f"bridge {path}" if bridge else path
        era = "2026-07-28" if modern else "handshake"
        return (
            client_display_name(session.client_name),
            session.client_name,
            session.pid,
            f"{identified_by}, {era}",
            session.id,
            door,
        )

    # ------------------------------------------------------- readers

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Told every batch of written records, on the loop; returns the unsubscribe."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def published(self, records: list[CallRecord]) -> None:
        """Records the writer wrote (on the loop)."""
        self.recent.extend(records)
        for subscriber in list(self._subscribers):
            subscriber(records)


def _drop(seen: Seen) -> None:
    """Where a call's ``Seen`` goes while no writer is attached."""


async def journaled(watch: Watch | None, call: Callable[[], Any]) -> dict[str, Any]:
    """``call()`` awaited, its end told to ``watch``."""
    if watch is None:
        result: dict[str, Any] = await call()
        return result
    try:
        result = await call()
    except BaseException as exc:
        watch.failed(exc)
        raise
    watch.done(result)
    return result


def keyring_values(template: Mapping[str, str], resolved: Mapping[str, str]) -> frozenset[str]:
    """The values a server's env took from the keyring (``${keyring:NAME}`` in ``template``)."""
    found: set[str] = set()
    for key, raw in template.items():
        if "${keyring:" not in raw or key not in resolved:
            continue
        # The template with each reference as a group, matched against what it became.
        pattern = "".join(
            "(.*?)" if index % 2 else re.escape(piece)
            for index, piece in enumerate(KEYRING_REF_RE.split(raw))
        )
        match = re.fullmatch(pattern, resolved[key], re.DOTALL)
        if match is not None:
            found.update(value for value in match.groups() if value)
    return frozenset(found)
