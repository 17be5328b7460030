"""Era translation, in one place: a client of one era, a child of the other.

The call path (core.supervision.calls) answers in the child's era; this
module turns that into the client's, and the client's answers back:

- **one encoder per era**: ``encode`` dresses a result as the client's era
  expects it (2026-07-28: ``resultType``, caching hints, ``serverInfo`` in
  ``_meta``; the handshake era: none of those, which some clients reject);
- **a handshake-era client, a 2026-07-28 child** (``fulfil``): the child's
  ``input_required`` result is put to the client as the mid-call requests it
  stands for (sampling, elicitation, roots); the request then goes through
  the call path again with the answers and the child's ``requestState``,
  until it is complete;
- **a 2026-07-28 client, a handshake-era child** (``Parking``): the child
  asks mid-call, and a stateless client cannot be asked back. The call is
  parked: the client gets an ``input_required`` result whose
  ``requestState`` names the parked call; its retry, on any connection of
  the same client session (another process's retry is refused: the token
  is no password between local processes), answers the child's pending
  request and the call goes on. A parked call
  waits ``PARKED_TTL_SECONDS``; meanwhile it asks nothing, so it never counts
  as a call in flight for the router. A ``requestState`` mcp-tray no longer
  holds is answered with the spec's "invalid or expired" error.
"""

import asyncio
import contextlib
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from core.base.errors import RpcError
from core.protocol.eras import (
    INPUT_REQUIRED,
    SERVER_INFO_META_KEY,
    as_complete,
    as_handshake,
    without_envelope,
)
from core.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from core.serving.calls.request import REQUIRED_CAPABILITY, ClientAsk
from core.supervision.catalog import Catalog
from core.supervision.routing import Caller
from core.supervision.server import ManagedServer

#: Rounds of ``input_required`` mcp-tray answers for one request of a handshake-era client.
MAX_INPUT_ROUNDS: Final = 10
#: A round with state but no question waits this long, doubling up to the cap.
STATE_ONLY_PAUSE_SECONDS: Final = 0.05
STATE_ONLY_PAUSE_CAP_SECONDS: Final = 0.25
#: A parked call waits this long for the client's retry.
PARKED_TTL_SECONDS: Final = 600.0
#: The ``requestState`` of a call mcp-tray parked starts with this.
STATE_PREFIX: Final = "mcp-tray."
#: The error data's ``reason`` when a retry names another session's parked call.
OTHER_SESSION: Final = "request_state_of_another_session"
#: The members a retry adds to a request (they never reach a handshake-era child).
RETRY_KEYS: Final = ("inputResponses", "requestState")


# ---------------------------------------------------------------- encoders


def encode(result: dict[str, Any], method: str, modern: bool, catalog: Catalog) -> dict[str, Any]:
    """A result (the child's, or mcp-tray's own) as a client of this era expects it."""
    if not modern:
        # Only a 2026-07-28 child says what the handshake era does not know.
        return as_handshake(result) if catalog.modern else result
    if "resultType" in result:
        return result
    return as_complete(result, method, catalog.server_info)


def input_required(questions: Mapping[str, Any], state: str, catalog: Catalog) -> dict[str, Any]:
    """mcp-tray's own ``input_required`` result, for a 2026-07-28 client."""
    answer: dict[str, Any] = {
        "resultType": INPUT_REQUIRED,
        "inputRequests": dict(questions),
        "requestState": state,
    }
    if catalog.server_info:
        answer["_meta"] = {SERVER_INFO_META_KEY: dict(catalog.server_info)}
    return answer


# --------------------------------------- handshake-era client, 2026-07-28 child


async def fulfil(
    server: ManagedServer,
    method: str,
    params: Mapping[str, Any] | None,
    result: dict[str, Any],
    caller: Caller,
) -> dict[str, Any]:
    """Answer a 2026-07-28 child's ``input_required`` for a client of the handshake era.

    Each input request goes to the caller as the server->client request it
    stands for; the request is then sent again, through the call path, with
    the answers and the child's ``requestState``, until it is complete (at
    most ``MAX_INPUT_ROUNDS`` rounds).
    """
    pause = STATE_ONLY_PAUSE_SECONDS
    for _ in range(MAX_INPUT_ROUNDS):
        if result.get("resultType") != INPUT_REQUIRED:
            return result
        asked = result.get("inputRequests")
        requests = asked if isinstance(asked, dict) else {}
        ask = caller.on_server_request
        if requests and ask is None:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r} needs input from a client ({', '.join(sorted(requests))}), "
                "and this call came from mcp-tray itself",
            )
        answers: dict[str, Any] = {}
        if requests:
            assert ask is not None
            keys = list(requests)
            replies = await asyncio.gather(*(_put(ask, requests[key]) for key in keys))
            answers = dict(zip(keys, replies, strict=True))
        else:
            # Only state, no question: the child is working; ask again soon.
            await server.clock.sleep(pause)
            pause = min(pause * 2, STATE_ONLY_PAUSE_CAP_SECONDS)
        retry = {**(params or {}), "inputResponses": answers}
        if "requestState" in result:
            retry["requestState"] = result["requestState"]
        result = await server.request(method, retry, caller)
    raise RpcError(
        INTERNAL_ERROR,
        f"{method!r}: the server asked for input more than {MAX_INPUT_ROUNDS} times",
    )


async def _put(ask: ClientAsk, request: Any) -> dict[str, Any]:
    """One input request of an ``input_required`` result, asked the handshake-era way."""
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        raise RpcError(INVALID_PARAMS, f"malformed input request from the server: {request!r}")
    return await ask(request["method"], request.get("params"))


# --------------------------------------- 2026-07-28 client, handshake-era child


class Parked:
    """A call to a handshake-era child, waiting for its stateless client's input."""

    def __init__(
        self,
        session: str,
        method: str,
        name: object,
        capabilities: Mapping[str, Any],
        on_waiting: Callable[[], None],
    ) -> None:
        self.session = session
        self.method = method
        self.name = name
        self.capabilities = capabilities
        self.expires = time.monotonic() + PARKED_TTL_SECONDS
        #: True while the client holds the questions and mcp-tray waits for its retry.
        self.waiting = False
        self._on_waiting = on_waiting
        #: Where the progress of the request now answering goes (first, then each retry).
        self.progress: Callable[[Mapping[str, Any]], Awaitable[None]] | None = None
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._asked: dict[str, tuple[str, Any, asyncio.Future[dict[str, Any]]]] = {}
        self._keys = itertools.count(1)
        self.task: asyncio.Task[dict[str, Any]] | None = None

    def start(self, call: Awaitable[dict[str, Any]]) -> None:
        self.task = asyncio.ensure_future(call)
        self.task.add_done_callback(lambda task: self._events.put_nowait(("done", task)))

    async def on_progress(self, params: Mapping[str, Any]) -> None:
        if self.progress is not None:
            await self.progress(params)

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The child's own request: it becomes one of the client's input requests."""
        needed = REQUIRED_CAPABILITY.get(method)
        if needed is None or needed not in self.capabilities:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"{method!r}: the client did not declare the {needed or method!r} capability",
            )
        key = f"mcp-tray-{next(self._keys)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[key] = (method, params, future)
        self._events.put_nowait(("ask", key))
        try:
            return await future
        finally:
            self._asked.pop(key, None)

    def answer(self, responses: Mapping[str, Any]) -> None:
        self.waiting = False
        for key, (_, _, future) in list(self._asked.items()):
            response = responses.get(key)
            if isinstance(response, dict) and not future.done():
                future.set_result(response)

    async def next(self) -> dict[str, Any] | None:
        """The call's result (None: it needs input; see ``questions``)."""
        kind, value = await self._events.get()
        if kind == "done":
            return await value  # type: ignore[no-any-return]
        # Whatever else the child asked meanwhile rides the same round.
        with contextlib.suppress(asyncio.QueueEmpty):
            while True:
                kind, value = self._events.get_nowait()
                if kind == "done":
                    self._events.put_nowait((kind, value))
                    break
        self.waiting = True
        self._on_waiting()
        return None

    def questions(self) -> dict[str, Any]:
        """Every request of the child still waiting for an answer (asked again until answered)."""
        return {
            key: {"method": method, **({"params": dict(params)} if params is not None else {})}
            for key, (method, params, future) in self._asked.items()
            if not future.done()
        }

    def drop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        for _, _, future in self._asked.values():
            if not future.done():
                future.set_exception(RpcError(INVALID_PARAMS, "the client never answered"))


class Parking:
    """Parked calls by ``requestState``: a retry finds its call on any connection."""

    def __init__(self) -> None:
        self.parked: dict[str, Parked] = {}

    async def through(
        self,
        server: ManagedServer,
        session: str,
        method: str,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        caller: Caller,
        progress: Callable[[Mapping[str, Any]], Awaitable[None]] | None,
    ) -> dict[str, Any]:
        """A handshake-era child, for a client that cannot be asked back mid-call."""
        name = params.get("uri") if method == "resources/read" else params.get("name")
        state = params.get("requestState")
        if isinstance(state, str) and state.startswith(STATE_PREFIX):
            parked = self.claim(state, method, name, session)
            parked.progress = progress
            responses = params.get("inputResponses")
            parked.answer(responses if isinstance(responses, dict) else {})
        else:
            parked = Parked(session, method, name, capabilities, server.routing.settle)
            parked.progress = progress
            clean = {k: v for k, v in params.items() if k not in RETRY_KEYS}
            call = Caller(
                session=caller.session,
                timeout=caller.timeout,
                on_progress=parked.on_progress if progress is not None else None,
                on_server_request=parked.ask,
                envelope=caller.envelope,
                waiting=lambda: parked.waiting,
                observer=caller.observer,
            )
            parked.start(server.request(method, without_envelope(clean), call))
        result = await parked.next()
        if result is not None:
            return result
        return input_required(parked.questions(), self.park(parked), server.catalog)

    def park(self, parked: Parked) -> str:
        token = STATE_PREFIX + secrets.token_urlsafe(24)
        self.parked[token] = parked
        return token

    def claim(self, token: str, method: str, name: object, session: str) -> Parked:
        """The parked call a retry names: any connection will do, but only its own client
        session (so its own process, where the OS tells: core.serving.eras.identity) may claim it."""
        self.expire()
        found = self.parked.get(token)
        if found is not None and found.session != session:
            # Left parked: its own client's retry still finds it.
            raise RpcError(
                INVALID_PARAMS,
                "this requestState belongs to another client session (another process): "
                "mcp-tray answers a parked request only for the client that sent it; send the "
                "request again without requestState",
                {"reason": OTHER_SESSION},
            )
        parked = self.parked.pop(token, None)
        if parked is None or (parked.method, parked.name) != (method, name):
            if parked is not None:
                self.parked[token] = parked  # another request's: leave it be
            raise RpcError(
                INVALID_PARAMS,
                "Invalid or expired requestState: mcp-tray no longer holds this request (it "
                f"finished, waited more than {PARKED_TTL_SECONDS:g} s for the answer, its client "
                "went away, or mcp-tray or the server restarted since); send the request again "
                "without requestState",
                {"reason": "invalid_request_state"},
            )
        return parked

    def expire(self, now: float | None = None) -> None:
        """Drop parked calls past their time."""
        now = time.monotonic() if now is None else now
        for token, parked in list(self.parked.items()):
            if parked.expires < now:
                del self.parked[token]
                parked.drop()

    def drop_session(self, session: str) -> None:
        """The client went away: its parked calls go with it."""
        for token, parked in list(self.parked.items()):
            if parked.session == session:
                del self.parked[token]
                parked.drop()

    def aclose(self) -> None:
        for parked in self.parked.values():
            parked.drop()
        self.parked.clear()
