"""A client's roots (the folders it works in), as mcp-tray learns and hands them on.

Roots decide which child a ``per-workspace`` session sits on, and are what a
child made for one session or one workspace is told (core.serving.calls.placement,
core.supervision.routing). mcp-tray asks a session for them once, before
its first request is placed, and again when the client says they changed: a
handshake-era client on its request's stream, a 2026-07-28 client (which
cannot be asked back) with an ``input_required`` round of mcp-tray's own,
whose ``requestState`` names the question.
"""

import secrets
from collections.abc import Mapping
from typing import Any, Final

from core.base.errors import RpcError
from core.protocol.jsonrpc import INVALID_PARAMS
from core.serving.calls.translate import RETRY_KEYS, STATE_PREFIX, input_required
from core.serving.sessions.sessions import ClientSession
from core.supervision.catalog import Catalog
from core.supervision.routing import RootsSource

#: The input request (and ``requestState``) mcp-tray uses to learn a 2026-07-28 client's roots.
ROOTS_QUESTION: Final = "mcp-tray-roots"
ROOTS_STATE: Final = f"{STATE_PREFIX}roots."


def roots_in(answer: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The roots of a ``roots/list`` answer (whatever is malformed is left out)."""
    roots = answer.get("roots")
    if not isinstance(roots, list):
        return ()
    return tuple(
        dict(root) for root in roots if isinstance(root, dict) and isinstance(root.get("uri"), str)
    )


def roots_source(of: ClientSession | tuple[dict[str, Any], ...]) -> RootsSource:
    """Where a child made for one session (its roots as they are now) or one workspace
    (the roots it was made for) gets its ``roots/list`` answered."""

    async def answer() -> dict[str, Any]:
        roots = of.roots if isinstance(of, ClientSession) else of
        return {"roots": [dict(root) for root in roots or ()]}

    return answer


class RootsQuestions:
    """The roots questions put to 2026-07-28 clients, by ``requestState``."""

    def __init__(self) -> None:
        #: Open tokens, by the session they were put to.
        self._open: dict[str, str] = {}

    def ask(self, session: ClientSession, catalog: Catalog) -> dict[str, Any]:
        """The ``input_required`` result that asks a client for its roots."""
        token = ROOTS_STATE + secrets.token_urlsafe(24)
        self._open[token] = session.id
        return input_required({ROOTS_QUESTION: {"method": "roots/list"}}, token, catalog)

    def take(self, params: Mapping[str, Any], session: ClientSession) -> Mapping[str, Any]:
        """A retry answering the question: the roots, kept on the session; the request,
        as the client first sent it. Any other request passes as it is."""
        state = params.get("requestState")
        if not (isinstance(state, str) and state.startswith(ROOTS_STATE)):
            return params
        if self._open.pop(state, None) != session.id:
            raise RpcError(
                INVALID_PARAMS,
                "Invalid or expired requestState: mcp-tray did not ask this client session "
                "for its roots; send the request again without requestState",
                {"reason": "invalid_request_state"},
            )
        responses = params.get("inputResponses")
        answer = responses.get(ROOTS_QUESTION) if isinstance(responses, dict) else None
        session.roots = roots_in(answer if isinstance(answer, dict) else {})
        return {k: v for k, v in params.items() if k not in RETRY_KEYS}
