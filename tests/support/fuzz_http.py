"""Hypothesis strategies for hostile HTTP requests to the gateway: shared by
tests/serving/test_fuzz_http.py and the abuse bench (bench/suites/abuse).
"""

import json
from typing import Any, Final

from hypothesis import strategies as st

#: Methods a client may send (and a few it may not), so generated requests reach deep.
METHODS: Final = (
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "prompts/get",
    "logging/setLevel",
    "completion/complete",
    "server/discover",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/roots/list_changed",
)
VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "1999")
#: Tools of echo that would end or stall the child on purpose: not what this probes.
HARMFUL_TOOLS: Final = frozenset({"crash", "slow_read", "slow_write", "count", "ask", "confirm"})

#: One segment of a path. Not "." or "..": the client resolves dot segments
#: (RFC 3986) before it sends, so the request would name another route.
path_segment = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/?#%"),
    min_size=1,
    max_size=20,
).filter(lambda segment: segment not in {".", ".."})
#: What a header value can be on the wire (no surrounding blanks: a client strips them).
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(
    str.strip
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _envelope(version: str) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """Something shaped like JSON-RPC, often nearly right, sometimes not at all."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0"]) | json_scalars)
    if draw(st.booleans()):
        message["id"] = draw(st.integers(0, 10**6) | st.text(max_size=10) | json_values)
    if draw(st.integers(0, 9)) > 0:
        message["method"] = draw(st.sampled_from(METHODS) | st.text(max_size=20))
    if draw(st.booleans()):
        params = draw(
            st.dictionaries(
                st.sampled_from(
                    [
                        "name",
                        "uri",
                        "arguments",
                        "_meta",
                        "level",
                        "protocolVersion",
                        "capabilities",
                        "clientInfo",
                        "requestId",
                        "cursor",
                    ]
                ),
                json_values,
                max_size=4,
            )
            | json_values
        )
        if isinstance(params, dict) and draw(st.booleans()):
            params["_meta"] = _envelope(draw(st.sampled_from(VERSIONS)))
        if isinstance(params, dict) and str(params.get("name")) in HARMFUL_TOOLS:
            params["name"] = "echo"
        message["params"] = params
    for key in draw(st.lists(st.text(max_size=6), max_size=2)):
        message.setdefault(key, draw(json_scalars))
    return message


#: Nesting depths around the parser's own limit (~1,000) and far past it.
DEEP: Final = (200, 999, 1_500, 100_000)
#: A lone surrogate, escaped: legal JSON text, not encodable as UTF-8.
SURROGATE_CALL: Final = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"echo","arguments":{"text":"\\ud800"}}}'
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A message as JSON most of the time; else raw bytes, deep nesting, a batch, a surrogate."""
    kind = draw(st.sampled_from(["message", "message", "raw", "deep", "batch", "surrogate"]))
    if kind == "raw":
        return draw(st.binary(max_size=64))
    if kind == "deep":
        depth = draw(st.sampled_from(DEEP))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        return opener * depth + b"1" + closer * depth
    if kind == "batch":
        return json.dumps(draw(st.lists(messages(), max_size=3))).encode()
    if kind == "surrogate":
        return SURROGATE_CALL
    return json.dumps(draw(messages())).encode()


@st.composite
def headers(draw: st.DrawFn, session_id: str) -> dict[str, str]:
    out: dict[str, str] = {}
    out["accept"] = draw(
        st.sampled_from(
            [
                "application/json, text/event-stream",
                "application/json",
                "text/event-stream",
                "*/*",
            ]
        )
        | header_text
    )
    out["content-type"] = draw(
        st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain"])
        | header_text
    )
    if draw(st.booleans()):
        out["mcp-session-id"] = draw(st.just(session_id) | header_text)
    if draw(st.booleans()):
        out["mcp-protocol-version"] = draw(st.sampled_from(VERSIONS) | header_text)
    if draw(st.booleans()):
        out["mcp-method"] = draw(st.sampled_from(METHODS) | header_text)
    if draw(st.booleans()):
        out["mcp-name"] = draw(header_text)
    return out
