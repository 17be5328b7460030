"""The JSON-RPC lines the bridge writes itself, and how it reads a failure.

The relay (core.bridge.relay) forwards the client's and the tray's messages
as bytes; these are the few it makes up: an error the client can match to
its request whatever the gateway sent, the answer for a tray that went away,
the errors for every request a message holds when the bridge gives up on it
(one, or each of a 2025-03-26 batch), and the test for the tray's "cut by
shutdown" answer.
"""

import json
from collections.abc import Collection
from typing import Any, Final

from core.base.errors import HttpError, TrayStopping
from core.protocol.headers import TRAY_STOPPING_REASON
from core.protocol.jsonrpc import METHOD_NOT_FOUND, answerable, reply_id, valid_id

#: What a tray that is not there answers, in the client's terms.
NOT_THERE: Final = -32603


def unless_stopping(message: bytes) -> bytes:
    """``message``, unless it is the tray's "cut by shutdown" answer (then ``TrayStopping``)."""
    if TRAY_STOPPING_REASON.encode() in message:
        parsed = json_or_none(message)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        data = error.get("data") if isinstance(error, dict) else None
        if isinstance(data, dict) and data.get("reason") == TRAY_STOPPING_REASON:
            raise TrayStopping
    return message


def lost(exc: Exception, *, taken: bool = False) -> str:
    if taken:
        return (
            f"mcp-tray went away while this request was in flight ({exc}), so it may or may "
            "not have taken effect; check before repeating it. The bridge is reconnecting"
        )
    return f"mcp-tray's gateway did not answer ({exc}); the bridge is reconnecting"


def never_sent(exc: Exception) -> bool:
    """No connection was made: the tray certainly never saw the request."""
    return isinstance(exc, HttpError) and exc.never_sent


def key(request_id: object) -> object:
    return str(request_id) if isinstance(request_id, int | str) else request_id


def json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def answer_for(request_id: Any, status: int, body: bytes) -> bytes:
    """An error reply the client can match to its request, whatever the gateway sent."""
    reply = json_or_none(body)
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            code = -32603
        return error_reply(request_id, code, error["message"], error.get("data"))
    if isinstance(error, str):
        return error_reply(request_id, -32603, f"mcp-tray: {error}")
    text = body.decode("utf-8", errors="replace").strip()[:200]
    detail = f": {text}" if text else ""
    return error_reply(
        request_id,
        METHOD_NOT_FOUND if status == 404 else -32603,
        f"mcp-tray answered HTTP {status}{detail}",
    )


def result_reply(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def error_reply(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def given_up(message: Any, why: str, answered: Collection[object] = ()) -> bytes | None:
    """The errors that answer ``message`` when the bridge gives up on it: one for a
    request, one per request of a batch (ids in ``answered`` already had theirs), an
    array as JSON-RPC answers a batch; None when nothing in it expects an answer."""
    if not isinstance(message, list):
        return error_reply(reply_id(message), NOT_THERE, why) if answerable(message) else None
    errors = [
        {"jsonrpc": "2.0", "id": item["id"], "error": {"code": NOT_THERE, "message": why}}
        for item in message
        if isinstance(item, dict)
        and isinstance(item.get("method"), str)
        and valid_id(item.get("id"))
        and key(item["id"]) not in answered
    ]
    return json.dumps(errors).encode() if errors else None


def answered_id(line: bytes) -> object | None:
    """The id (as ``key`` gives it) of the response ``line`` is, else None."""
    parsed = json_or_none(line)
    if isinstance(parsed, dict) and "method" not in parsed and valid_id(parsed.get("id")):
        return key(parsed["id"])
    return None
