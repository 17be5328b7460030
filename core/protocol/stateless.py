"""The server side of streamable HTTP for the stateless revision (2026-07-28).

No session: every POST stands alone, its ``_meta`` envelope says who the
client is and what it can do. ``core.protocol.streamable`` hands a request
here when its ``MCP-Protocol-Version`` header names a revision outside the
handshake era. The checks, in the order the revision gives them:

    non-POST                                   405, Allow: POST
    Content-Type / Accept                      415 / 406
    body size                                  413
    not JSON / a batch / not JSON-RPC          400 (-32700 / -32600)
    a notification                             202 (nothing to do: the
                                               client cancels by closing)
    a response                                 400 (the era has no server
                                               requests to answer)
    envelope missing or malformed              400 -32602
    headers that disagree with the body        400 -32020
    a version mcp-tray does not speak          400 -32022 {supported, requested}

then the handler answers, with an error's HTTP status chosen by its code
(404 for -32601, 400 for the codes above, else 200). A client that closes
the connection cancels its request.
"""

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Final, Protocol

from starlette.types import Receive, Scope, Send

from core.base.errors import RpcError
from core.protocol.eras import ERROR_STATUS, Envelope, Rejection, check_request
from core.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    dumps,
    error_message,
)
from core.protocol.wire import (
    ANSWERED,
    JSON_TYPE,
    SSE_TYPE,
    Reply,
    accepts,
    error,
    read_message,
    respond,
    shape_problem,
    wait_disconnect,
)

logger = logging.getLogger(__name__)

#: Methods whose reply is a stream the client keeps open (change notifications).
STREAMING_METHODS: Final = frozenset({"subscriptions/listen"})


class StatelessContext:
    """One request of a stateless client: where its related messages go."""

    def __init__(self, request_id: Any, params: Mapping[str, Any], reply: Reply) -> None:
        self.request_id = request_id
        meta = params.get("_meta")
        self.progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.reply = reply

    def related(self, message: dict[str, Any]) -> None:
        self.reply.related(message)

    async def progress(self, params: Mapping[str, Any]) -> None:
        """The server's progress, passed on as it came, under the client's own token."""
        if self.progress_token is None:
            return
        forwarded = {**params, "progressToken": self.progress_token}
        self.related({"jsonrpc": "2.0", "method": "notifications/progress", "params": forwarded})


class StatelessHandler(Protocol):
    """What the gateway implements for the stateless era."""

    async def on_stateless(
        self,
        ctx: StatelessContext,
        method: str,
        params: Mapping[str, Any],
        envelope: Envelope,
        scope: Scope,
        headers: Mapping[str, str],
    ) -> dict[str, Any]: ...


async def handle_stateless(
    handler: StatelessHandler,
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: Mapping[str, str],
    max_body_bytes: int,
) -> None:
    if scope["method"] != "POST":
        await error(
            send,
            405,
            INVALID_REQUEST,
            f"method {scope['method']} is not part of MCP 2026-07-28: every request is a POST",
            {"allow": "POST"},
        )
        return
    message = await read_message(receive, send, headers, max_body_bytes, sse_required=False)
    if message is ANSWERED:
        return
    if isinstance(message, list):
        await error(send, 400, INVALID_REQUEST, "JSON-RPC batches are not part of MCP 2026-07-28")
        return
    shape = shape_problem(message)
    if shape is not None:
        await respond(send, 400, dumps(shape), JSON_TYPE)
        return
    method = message.get("method")
    if not isinstance(method, str):
        await error(
            send,
            400,
            INVALID_REQUEST,
            "MCP 2026-07-28 has no server requests, so there is nothing to answer",
            request_id=message.get("id"),
        )
        return
    if "id" not in message:
        await respond(send, 202, b"", JSON_TYPE)
        return
    request_id = message["id"]
    checked = check_request(message, headers)
    if isinstance(checked, Rejection):
        await _answer_error(send, request_id, checked.code, checked.message, checked.data)
        return
    if method in STREAMING_METHODS and not accepts(headers, SSE_TYPE):
        await error(
            send,
            406,
            INVALID_REQUEST,
            f"Not Acceptable: {method} answers with a stream; accept {SSE_TYPE}",
            request_id=request_id,
        )
        return
    params = message["params"]
    reply = Reply(send, {}, 1, batch=False, stream_id=None)
    ctx = StatelessContext(request_id, params, reply)
    work = asyncio.ensure_future(handler.on_stateless(ctx, method, params, checked, scope, headers))
    # In this era closing the connection is how a client cancels.
    hung_up = asyncio.ensure_future(wait_disconnect(receive))
    try:
        await asyncio.wait([work, hung_up], return_when=asyncio.FIRST_COMPLETED)
    finally:
        hung_up.cancel()
    if not work.done():
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        await reply.respond(None)
        return
    try:
        result = work.result()
    except RpcError as exc:
        if not reply.streaming:
            await _answer_error(send, request_id, exc.code, exc.message, exc.data)
            return
        await reply.respond(error_message(request_id, exc.code, exc.message, exc.data))
        return
    except asyncio.CancelledError:
        await reply.respond(None)
        return
    except Exception as exc:
        logger.exception("stateless request %s failed", method)
        await reply.respond(
            error_message(
                request_id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"
            )
        )
        return
    await reply.respond({"jsonrpc": "2.0", "id": request_id, "result": result})


async def _answer_error(send: Send, request_id: Any, code: int, message: str, data: Any) -> None:
    status = ERROR_STATUS.get(code, 200)
    await respond(send, status, dumps(error_message(request_id, code, message, data)), JSON_TYPE)
